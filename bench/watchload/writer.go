package main

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// writer patches the pods round-robin at a steady rate, each patch setting
// the pod's annotation to its index, its next sequence number and the time
// it is sent. Patches are sent by a pool of goroutines so that the rate
// holds while some patches take long; a pod's patches are sent one at a
// time, so that its sequence numbers reach the server in order.
type writer struct {
	c      *client
	rate   float64
	window *window
	pods   []podSeq

	// sent counts the measured patches that succeeded, errs the patches
	// that failed, skipped the measured updates not sent because every
	// goroutine was busy and the queue full.
	sent, errs, skipped atomic.Int64

	mu sync.Mutex
	// lat holds the measured patches' latency.
	lat []time.Duration
}

// podSeq is one pod's sequence of updates.
type podSeq struct {
	mu sync.Mutex
	// n is the sequence number of the last update that succeeded.
	n int32
}

func newWriter(c *client, rate float64, pods int, w *window) *writer {
	return &writer{c: c, rate: rate, window: w, pods: make([]podSeq, pods)}
}

// run sends updates from start until end, with n goroutines: by each tick
// of a ticker, as many as the rate makes due since start, so that a late
// tick is made up for. It returns once every patch sent has been answered.
func (w *writer) run(ctx context.Context, start, end time.Time, n int) {
	work := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for i := range work {
				w.update(ctx, i)
			}
		})
	}
	t := time.NewTicker(max(time.Duration(float64(time.Second)/w.rate), time.Millisecond))
	defer t.Stop()
	var issued int64
	pod := 0
loop:
	for {
		select {
		case now := <-t.C:
			if !now.Before(end) {
				break loop
			}
			for due := int64(now.Sub(start).Seconds() * w.rate); issued < due; issued++ {
				select {
				case work <- pod:
				default:
					if w.window.contains(now.UnixNano()) {
						w.skipped.Add(1)
					}
				}
				pod = (pod + 1) % len(w.pods)
			}
		case <-ctx.Done():
			break loop
		}
	}
	close(work)
	wg.Wait()
}

// update patches pod i with its next sequence number.
func (w *writer) update(ctx context.Context, i int) {
	p := &w.pods[i]
	p.mu.Lock()
	defer p.mu.Unlock()
	sent := time.Now()
	if err := w.c.patch(ctx, i, p.n+1, sent); err != nil {
		// Not applied, as far as the client can tell: the next
		// update takes the number again.
		if w.errs.Add(1) <= 3 {
			slog.Warn("update failed", "pod", i, "err", err)
		}
		return
	}
	p.n++
	if w.window.contains(sent.UnixNano()) {
		d := time.Since(sent)
		w.sent.Add(1)
		w.mu.Lock()
		w.lat = append(w.lat, d)
		w.mu.Unlock()
	}
}

// final is the sequence number of each pod's last update, once run has
// returned.
func (w *writer) final() []int32 {
	out := make([]int32, len(w.pods))
	for i := range w.pods {
		out[i] = w.pods[i].n
	}
	return out
}
