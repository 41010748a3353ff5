package controller

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/listwatch/listwatch/cache/cachetest"
)

// TestPriorityQueueInitialListAfterLiveChanges: with Options.PriorityQueue
// the keys of the initial list wait behind live changes that come within
// the aging step, and go before those that come later; without it the
// queue is FIFO. The workers are held back (the informer reports not
// synced) while the events arrive, so that the order of the syncs is the
// queue's order.
func TestPriorityQueueInitialListAfterLiveChanges(t *testing.T) {
	initial := []string{"ns/a", "ns/b", "ns/c"}
	live := []string{"ns/x", "ns/y"}
	tests := []struct {
		name     string
		opts     Options
		liveWait time.Duration // between the initial list and the live changes
		// The initial list comes out in the informer's list order, which
		// is not fixed: want names a prefix as a set, then the rest in
		// order, or the reverse.
		initialFirst bool
	}{
		{"FIFO by default", Options{}, 0, true},
		{"initial list after live changes", Options{PriorityQueue: true, AgingStep: time.Minute}, 0, false},
		{"live changes within the aging step go first", Options{PriorityQueue: true, AgingStep: time.Minute}, 59 * time.Second, false},
		{"initial list aged past later live changes", Options{PriorityQueue: true, AgingStep: time.Minute}, 61 * time.Second, true},
		{"default aging step", Options{PriorityQueue: true}, 30 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := cachetest.NewInformer(newPod("ns", "a", nil, nil), newPod("ns", "b", nil, nil), newPod("ns", "c", nil, nil))
				f.SetSynced(false)
				log := newKeyLog()
				c := newTest(t, func(_ context.Context, key string) (Result, error) {
					log.add(key)
					return Result{}, nil
				}, tt.opts, For[*corev1.Pod](f))
				stop := run(c)
				synctest.Wait() // registered: the initial list is queued
				time.Sleep(tt.liveWait)
				for _, name := range []string{"x", "y"} {
					if err := f.Add(newPod("ns", name, nil, nil)); err != nil {
						t.Fatal(err)
					}
				}
				f.SetSynced(true)
				time.Sleep(time.Second)
				synctest.Wait()
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				got := log.keys
				if len(got) != len(initial)+len(live) {
					t.Fatalf("synced %q, want each of %q and %q once", got, initial, live)
				}
				first, second := got[:len(initial)], got[len(initial):]
				wantFirst, wantSecond := initial, live
				if !tt.initialFirst {
					first, second = got[:len(live)], got[len(live):]
					wantFirst, wantSecond = live, initial
				}
				ordered := func(keys, want []string) bool {
					if slices.Equal(want, live) {
						return slices.Equal(keys, want) // live changes keep their order
					}
					return slices.Equal(slices.Sorted(slices.Values(keys)), want)
				}
				if !ordered(first, wantFirst) || !ordered(second, wantSecond) {
					t.Errorf("synced %q, want %q then %q", got, wantFirst, wantSecond)
				}
			})
		})
	}
}

// TestPriorityQueueResyncAndLiveUpdate: with Options.PriorityQueue a
// resync (an update that changes nothing) queues its key at low priority,
// behind a live change that comes after it, while a real update is a live
// change.
func TestPriorityQueueResyncAndLiveUpdate(t *testing.T) {
	tests := []struct {
		name     string
		priority bool
		rv       string // the resourceVersion of a's update: "1" is a resync
		want     []string
	}{
		{"resync goes after a later live change", true, "1", []string{"ns/block", "ns/x", "ns/a"}},
		{"real update is a live change", true, "2", []string{"ns/block", "ns/a", "ns/x"}},
		{"FIFO without the option", false, "1", []string{"ns/block", "ns/a", "ns/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := cachetest.NewInformer(newPod("ns", "a", nil, nil))
				log := newKeyLog()
				release := make(chan struct{})
				c := newTest(t, func(_ context.Context, key string) (Result, error) {
					if key == "ns/block" {
						<-release
					}
					log.add(key)
					return Result{}, nil
				}, Options{PriorityQueue: tt.priority}, For[*corev1.Pod](f))
				stop := run(c)
				synctest.Wait() // the initial list is synced
				log.mu.Lock()
				log.keys = nil
				log.mu.Unlock()
				if err := f.Add(newPod("ns", "block", nil, nil)); err != nil {
					t.Fatal(err)
				}
				synctest.Wait() // the only worker holds ns/block
				a := newPod("ns", "a", nil, nil)
				a.ResourceVersion = tt.rv
				if err := f.Update(a); err != nil {
					t.Fatal(err)
				}
				if err := f.Add(newPod("ns", "x", nil, nil)); err != nil {
					t.Fatal(err)
				}
				close(release)
				synctest.Wait()
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				if got := log.keys; !slices.Equal(got, tt.want) {
					t.Errorf("synced %q, want %q", got, tt.want)
				}
			})
		})
	}
}
