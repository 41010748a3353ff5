package workqueue

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// collect gets items as they come, recording how long after start each
// arrived, until the queue shuts down.
func collect[T comparable](q *DelayingQueue[T], start time.Time) <-chan []arrival[T] {
	out := make(chan []arrival[T], 1)
	go func() {
		var got []arrival[T]
		for {
			x, ok := q.Get()
			if !ok {
				out <- got
				return
			}
			got = append(got, arrival[T]{x, time.Since(start)})
			q.Done(x)
		}
	}()
	return out
}

type arrival[T any] struct {
	item T
	at   time.Duration
}

func TestAddAfter(t *testing.T) {
	type add struct {
		item  string
		delay time.Duration
	}
	tests := []struct {
		name string
		adds []add
		want []arrival[string]
	}{
		{
			name: "delivered in due order",
			adds: []add{{"c", 3 * time.Second}, {"a", time.Second}, {"b", 2 * time.Second}},
			want: []arrival[string]{{"a", time.Second}, {"b", 2 * time.Second}, {"c", 3 * time.Second}},
		},
		{
			name: "earlier due time wins",
			adds: []add{{"x", 5 * time.Second}, {"x", 2 * time.Second}, {"x", 4 * time.Second}},
			want: []arrival[string]{{"x", 2 * time.Second}},
		},
		{
			name: "non-positive delay adds at once",
			adds: []add{{"later", time.Second}, {"now", 0}, {"past", -time.Hour}},
			want: []arrival[string]{{"now", 0}, {"past", 0}, {"later", time.Second}},
		},
		{
			name: "immediate add while waiting, then delivered again",
			adds: []add{{"x", 2 * time.Second}, {"x", 0}},
			want: []arrival[string]{{"x", 0}, {"x", 2 * time.Second}},
		},
		{
			// The delivery loop spins for items due this close together;
			// in a bubble, whose clock stands still while it spins, it
			// must give up and arm the timer, or this would never end.
			name: "due microseconds apart, each at its time",
			adds: []add{{"d", time.Second + 2*time.Millisecond}, {"a", time.Second}, {"c", time.Second + 90*time.Microsecond}, {"b", time.Second + time.Microsecond}},
			want: []arrival[string]{{"a", time.Second}, {"b", time.Second + time.Microsecond}, {"c", time.Second + 90*time.Microsecond}, {"d", time.Second + 2*time.Millisecond}},
		},
		{
			name: "same due time keeps one",
			adds: []add{{"x", time.Second}, {"x", time.Second}},
			want: []arrival[string]{{"x", time.Second}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := NewDelayingQueue[string](Config{})
				start := time.Now()
				out := collect(q, start)
				for _, a := range tt.adds {
					if !q.AddAfter(a.item, a.delay) {
						t.Fatalf("AddAfter(%q) refused", a.item)
					}
				}
				time.Sleep(time.Minute)
				synctest.Wait()
				if n := q.Waiting(); n != 0 {
					t.Errorf("Waiting = %d after everything was due", n)
				}
				q.ShutDown()
				got := <-out
				if len(got) != len(tt.want) {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
				for i := range got {
					if got[i] != tt.want[i] {
						t.Fatalf("got %v, want %v", got, tt.want)
					}
				}
			})
		})
	}
}

func TestAddAfterShutDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewDelayingQueue[int](Config{})
		q.AddAfter(1, time.Second)
		q.ShutDown()
		if q.AddAfter(2, time.Second) || q.AddAfter(3, 0) {
			t.Fatal("AddAfter after ShutDown accepted")
		}
		time.Sleep(2 * time.Second)
		if _, ok := q.Get(); ok {
			t.Fatal("waiting item delivered after ShutDown")
		}
	})
}

// TestAddAfterManyRandom checks the heap against a sort: many items with
// pseudo-random delays arrive in due order at their exact due times.
func TestAddAfterManyRandom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var q DelayingQueue[int] // the zero value works
		start := time.Now()
		out := collect(&q, start)
		const n = 2000
		due := make(map[int]time.Duration, n)
		for i := range n {
			d := time.Duration((i*7919)%1000+1) * time.Millisecond
			due[i] = d
			q.AddAfter(i, d)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		q.ShutDown()
		got := <-out
		if len(got) != n {
			t.Fatalf("got %d items, want %d", len(got), n)
		}
		for i, a := range got {
			if a.at != due[a.item] {
				t.Fatalf("item %d arrived at %v, due %v", a.item, a.at, due[a.item])
			}
			if i > 0 && a.at < got[i-1].at {
				t.Fatalf("out of order: %v after %v", a, got[i-1])
			}
		}
	})
}

// TestDelayingQueueIdleHasNoGoroutine: waiting items cost one timer and no
// goroutine, so nothing polls while the queue is idle.
func TestDelayingQueueIdleHasNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before := runtime.NumGoroutine()
		q := NewDelayingQueue[int](Config{})
		for i := range 100 {
			q.AddAfter(i, time.Hour+time.Duration(i)*time.Second)
		}
		synctest.Wait()
		// NumGoroutine counts the whole process, where the goroutine of a
		// test that just finished may still be on its way out: what must
		// not happen is a goroutine more.
		if n := runtime.NumGoroutine(); n > before {
			t.Fatalf("%d goroutines while items wait, want at most %d", n, before)
		}
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		if n := q.Len(); n != 100 {
			t.Fatalf("Len = %d, want 100", n)
		}
		q.ShutDown()
	})
}

// TestAddAfterDueTogether: items that fall due at the same time reach every
// waiting worker at once, with metrics on and off, and each exactly once.
func TestAddAfterDueTogether(t *testing.T) {
	const workers = 4
	tests := []struct {
		name string
		cfg  func() (Config, *fakeProvider)
	}{
		{"no metrics", func() (Config, *fakeProvider) { return Config{}, nil }},
		{"metrics", func() (Config, *fakeProvider) {
			p := &fakeProvider{}
			return Config{Name: "due", MetricsProvider: p}, p
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg, p := tt.cfg()
				q := NewDelayingQueue[int](cfg)
				release := make(chan struct{})
				var mu sync.Mutex
				held := map[int]int{}
				var wg sync.WaitGroup
				for range workers {
					wg.Go(func() {
						for {
							x, ok := q.Get()
							if !ok {
								return
							}
							mu.Lock()
							held[x]++
							mu.Unlock()
							<-release
							q.Done(x)
						}
					})
				}
				synctest.Wait() // every worker waits in Get
				for i := range workers {
					q.AddAfter(i, time.Second)
				}
				time.Sleep(time.Second)
				synctest.Wait()
				mu.Lock()
				if len(held) != workers {
					t.Errorf("items held at once: %v, want %d distinct", held, workers)
				}
				for x, n := range held {
					if n != 1 {
						t.Errorf("item %d handed out %d times", x, n)
					}
				}
				mu.Unlock()
				if p != nil {
					if a, d := p.adds.get(), p.depth.get(); a != workers || d != 0 {
						t.Errorf("adds %v depth %v, want %d and 0", a, d, workers)
					}
				}
				close(release)
				q.ShutDown()
				wg.Wait()
			})
		})
	}
}

// TestDelayingQueueShutDownWithDrain: a drain processes the items already
// queued and waits for the ones in flight, but drops the items still
// waiting for their delay, including one that falls due while the drain is
// under way, and refuses new AddAfters.
func TestDelayingQueueShutDownWithDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewDelayingQueue[string](Config{})
		q.Add("busy")
		busy := getNow(t, &q.Queue)
		q.AddAfter("busy", time.Hour) // waiting while in flight: dropped
		q.AddAfter("soon", 500*time.Millisecond)
		q.AddAfter("later", time.Hour)
		q.Add("a")
		q.Add("b")
		if n := q.Waiting(); n != 3 {
			t.Fatalf("Waiting = %d, want 3", n)
		}

		drainErr := make(chan error, 1)
		go func() { drainErr <- q.ShutDownWithDrain(context.Background()) }()
		synctest.Wait()
		if n := q.Waiting(); n != 0 {
			t.Errorf("Waiting = %d once the drain began, want 0", n)
		}
		if q.AddAfter("new", time.Second) || q.AddAfter("new", 0) {
			t.Error("AddAfter during drain accepted")
		}

		// One worker, a second per item: "soon" falls due mid-drain.
		var rec recorder
		var wg sync.WaitGroup
		wg.Go(func() { slowWorker(q, time.Second, &rec) })
		time.Sleep(5 * time.Second)
		synctest.Wait()
		select {
		case err := <-drainErr:
			t.Fatalf("drain returned %v while an item was in flight", err)
		default:
		}
		q.Done(busy)
		if err := <-drainErr; err != nil {
			t.Fatalf("ShutDownWithDrain = %v", err)
		}
		wg.Wait()

		// Past every delay: nothing waiting comes back.
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		if x, ok := q.Get(); ok {
			t.Fatalf("Get after drain = %q, true", x)
		}
		if n := q.Len(); n != 0 {
			t.Errorf("Len after drain = %d, want 0", n)
		}
		if processed := rec.got(); len(processed) != 2 || processed[0] != "a" || processed[1] != "b" {
			t.Fatalf("processed %v, want [a b]: queued items only", processed)
		}
	})
}
