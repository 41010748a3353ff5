// Package watchbase is the consumer's side of a storage watch, which every
// backend's watcher shares: the channel of events, the reason the watch
// ended, and a Stop that waits for the backend's goroutine.
package watchbase

import (
	"context"
	"sync"

	"github.com/listwatch/listwatch/storage"
)

// Watch implements storage.Watcher for a backend whose goroutine sends the
// events on Out and calls End once, when it is done.
type Watch struct {
	// Out is where the backend's goroutine sends the events; End closes it.
	Out    chan storage.Event
	cancel context.CancelFunc
	exited chan struct{}

	mu  sync.Mutex
	err error
}

// New returns a watch buffering buffer events; Stop calls cancel, which
// must end the backend's goroutine.
func New(buffer int, cancel context.CancelFunc) *Watch {
	return &Watch{
		Out:    make(chan storage.Event, buffer),
		cancel: cancel,
		exited: make(chan struct{}),
	}
}

// End records why the watch ended (nil: it was stopped or its context
// ended) and closes Out; the backend's goroutine calls it last.
func (w *Watch) End(err error) {
	if err != nil {
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
	}
	close(w.Out)
	close(w.exited)
}

// Events implements storage.Watcher.
func (w *Watch) Events() <-chan storage.Event { return w.Out }

// Err implements storage.Watcher.
func (w *Watch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Stop implements storage.Watcher; it returns once the backend's goroutine
// has called End.
func (w *Watch) Stop() {
	w.cancel()
	<-w.exited
}
