package controller

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/listwatch/listwatch/client"
)

// processNextWorkItem takes one key off the queue, hands it to the sync
// handler and tells the queue how it went; it reports whether the worker
// should go on (false once the queue has shut down).
//
//   - a panic or an error: AddRateLimited, retried after the key's backoff
//     (logged at error level, one that raced another write at debug
//     level: see raced);
//   - a Terminal error: logged, Forget, not retried;
//   - success: Forget, and AddAfter when the Result asks for a later look.
//
// Done is always called, so a key queued again meanwhile is synced next.
// Before the sync, stale-read protection may put the key back instead
// (see StaleSyncs).
func (c *Controller[K]) processNextWorkItem(ctx context.Context) bool {
	key, ok := c.queue.Get()
	if !ok {
		return false
	}
	defer c.queue.Done(key)
	if c.fresh != nil {
		if wait, waited := c.fresh.stale(key, time.Now()); wait {
			c.fresh.retryLater(key, func(k K) { c.queue.Add(k) })
			return true
		} else if waited > 0 {
			c.log.Warn("syncing before the informers show this controller's last write", "item", key, "waited", waited)
		}
		ctx = client.WithWriteRecorder(ctx, c.fresh.recorder(key))
	}
	res, err := c.syncHandler(ctx, key)
	var pe *PanicError
	switch {
	case errors.As(err, &pe):
		c.log.Error("sync panicked; retrying with backoff", "item", key, "panic", pe.Value, "stack", string(pe.Stack))
		c.queue.AddRateLimited(key)
	case IsTerminal(err):
		c.log.Error("sync failed for good; not retrying", "item", key, "err", err)
		c.queue.Forget(key)
	case raced(err):
		// A write that met a newer version of the object (409), or found
		// it gone: the retry reads what is there now and decides again.
		// It is how optimistic concurrency works, not an error anyone
		// must act on; one that keeps coming back still shows in the
		// queue's retry metrics.
		c.log.Debug("sync raced another write; retrying with backoff", "item", key, "err", err)
		c.queue.AddRateLimited(key)
	case err != nil:
		c.log.Error("sync failed; retrying with backoff", "item", key, "err", err)
		c.queue.AddRateLimited(key)
	default:
		c.queue.Forget(key)
		if res.RequeueAfter > 0 {
			c.queue.AddAfter(key, res.RequeueAfter)
		}
	}
	return true
}

// raced reports whether err is a write's that raced another: a 409
// Conflict (the object changed since it was read), or a 404 of the object
// itself (deleted since it was read), not of its resource (a 404 without a
// name: the resource is not served, which someone must fix).
func raced(err error) bool {
	if apierrors.IsConflict(err) {
		return true
	}
	var st apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &st) {
		return false
	}
	d := st.Status().Details
	return d != nil && d.Name != ""
}

// PanicError is the error a panicking sync handler is turned into.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("sync panicked: %v", e.Value) }

// syncHandler calls the sync handler, turning a panic into an error so that
// one bad key cannot take the worker, or the process, down with it.
func (c *Controller[K]) syncHandler(ctx context.Context, key K) (res Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return c.sync(ctx, key)
}
