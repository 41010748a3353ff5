package record

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var eventsGR = schema.GroupResource{Resource: "events"}

// memSink stores events in memory, standing in for the API server in these
// unit tests of the recorder alone.
type memSink struct {
	mu      sync.Mutex
	events  map[string]*corev1.Event
	creates int
	patches int
	block   chan struct{} // when set, writes wait for it to close
}

func newMemSink() *memSink { return &memSink{events: map[string]*corev1.Event{}} }

func (s *memSink) wait(ctx context.Context) error {
	if s.block == nil {
		return nil
	}
	select {
	case <-s.block:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *memSink) Create(ctx context.Context, ev *corev1.Event) (*corev1.Event, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := ev.Namespace + "/" + ev.Name
	if _, ok := s.events[key]; ok {
		return nil, apierrors.NewAlreadyExists(eventsGR, ev.Name)
	}
	s.creates++
	s.events[key] = ev.DeepCopy()
	return ev.DeepCopy(), nil
}

func (s *memSink) Patch(ctx context.Context, ns, name string, pt types.PatchType, data []byte) (*corev1.Event, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	if pt != types.MergePatchType {
		return nil, apierrors.NewBadRequest("unsupported patch type " + string(pt))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ev, ok := s.events[ns+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(eventsGR, name)
	}
	if err := json.Unmarshal(data, ev); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	s.patches++
	return ev.DeepCopy(), nil
}

func (s *memSink) snapshot() (events []*corev1.Event, creates, patches int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range s.events {
		events = append(events, ev.DeepCopy())
	}
	return events, s.creates, s.patches
}

func (s *memSink) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.events)
}

func pod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
}

// run starts a Broadcaster over sink in the bubble and returns its recorder
// and a stop func that waits for Run to return.
func run(t *testing.T, sink Sink, opts Options) (*Broadcaster, *Recorder, func()) {
	t.Helper()
	opts.Logger = quiet
	b := NewBroadcaster(sink, opts)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); b.Run(ctx) }()
	return b, b.NewRecorder("replication-controller"), func() { cancel(); <-done }
}

func TestRecorder(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"an event names its object, kind and source", func(t *testing.T) {
			sink := newMemSink()
			_, r, stop := run(t, sink, Options{})
			r.Eventf(pod("p1"), corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", "p1")
			synctest.Wait()
			stop()
			events, creates, _ := sink.snapshot()
			if creates != 1 || len(events) != 1 {
				t.Fatalf("creates=%d events=%d, want 1", creates, len(events))
			}
			ev := events[0]
			want := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "ns", Name: "p1", UID: "uid-p1"}
			if ev.InvolvedObject != want || ev.Namespace != "ns" || ev.Reason != "SuccessfulCreate" ||
				ev.Message != "Created pod: p1" || ev.Count != 1 || ev.Source.Component != "replication-controller" || ev.Type != corev1.EventTypeNormal {
				t.Fatalf("event = %+v", ev)
			}
		}},
		{"exact repeats raise the count of one event", func(t *testing.T) {
			sink := newMemSink()
			_, r, stop := run(t, sink, Options{})
			for range 5 {
				r.Event(pod("p1"), corev1.EventTypeWarning, "FailedCreate", "quota exceeded")
				time.Sleep(time.Second)
			}
			synctest.Wait()
			stop()
			events, creates, patches := sink.snapshot()
			if creates != 1 || patches != 4 || len(events) != 1 || events[0].Count != 5 {
				t.Fatalf("creates=%d patches=%d events=%d count=%d; want 1, 4, 1, 5", creates, patches, len(events), events[0].Count)
			}
			if !events[0].LastTimestamp.After(events[0].FirstTimestamp.Time) {
				t.Fatalf("lastTimestamp %v not after firstTimestamp %v", events[0].LastTimestamp, events[0].FirstTimestamp)
			}
		}},
		{"many different messages for one reason are combined", func(t *testing.T) {
			sink := newMemSink()
			_, r, stop := run(t, sink, Options{})
			for i := range 15 {
				r.Eventf(pod("p1"), corev1.EventTypeWarning, "FailedCreate", "error %d", i)
			}
			synctest.Wait()
			stop()
			events, creates, patches := sink.snapshot()
			// 10 as they are, then one combined event raised 4 times.
			if creates != 11 || patches != 4 || len(events) != 11 {
				t.Fatalf("creates=%d patches=%d events=%d; want 11, 4, 11", creates, patches, len(events))
			}
		}},
		{"rate limit per object: burst, then one per refill", func(t *testing.T) {
			sink := newMemSink()
			_, r, stop := run(t, sink, Options{Burst: 5, Refill: time.Minute})
			for range 20 {
				r.Event(pod("p1"), corev1.EventTypeNormal, "Sync", "same")
				r.Event(pod("p2"), corev1.EventTypeNormal, "Sync", "same")
			}
			synctest.Wait()
			_, creates, patches := sink.snapshot()
			if creates+patches != 10 {
				t.Fatalf("%d writes for 2 objects with burst 5, want 10", creates+patches)
			}
			time.Sleep(time.Minute)
			r.Event(pod("p1"), corev1.EventTypeNormal, "Sync", "same")
			synctest.Wait()
			stop()
			_, creates, patches = sink.snapshot()
			if creates+patches != 11 {
				t.Fatalf("%d writes after one refill, want 11", creates+patches)
			}
		}},
		{"an expired event is written anew", func(t *testing.T) {
			sink := newMemSink()
			_, r, stop := run(t, sink, Options{})
			r.Event(pod("p1"), corev1.EventTypeNormal, "Sync", "same")
			synctest.Wait()
			sink.expire()
			time.Sleep(time.Second) // a distinct name for the new event
			r.Event(pod("p1"), corev1.EventTypeNormal, "Sync", "same")
			synctest.Wait()
			stop()
			events, creates, _ := sink.snapshot()
			if creates != 2 || len(events) != 1 {
				t.Fatalf("creates=%d events=%d, want 2 and 1", creates, len(events))
			}
		}},
		{"recording never blocks: a full queue drops", func(t *testing.T) {
			sink := newMemSink()
			sink.block = make(chan struct{})
			b, r, stop := run(t, sink, Options{QueueSize: 10})
			for i := range 1000 {
				r.Eventf(pod("p"+strconv.Itoa(i)), corev1.EventTypeNormal, "Sync", "n")
			}
			synctest.Wait()
			// One event is being written, ten wait in the queue.
			if got := b.Dropped(); got != 1000-11 {
				t.Fatalf("Dropped = %d, want %d", got, 1000-11)
			}
			close(sink.block)
			stop()
			if _, creates, _ := sink.snapshot(); creates != 11 {
				t.Fatalf("creates = %d, want the 11 accepted events written", creates)
			}
		}},
		{"shutdown flushes what was queued", func(t *testing.T) {
			sink := newMemSink()
			b := NewBroadcaster(sink, Options{Logger: quiet})
			r := b.NewRecorder("c")
			for i := range 5 {
				r.Eventf(pod(fmt.Sprint(i)), corev1.EventTypeNormal, "Sync", "n")
			}
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			b.Run(ctx)
			if _, creates, _ := sink.snapshot(); creates != 5 {
				t.Fatalf("creates = %d after shutdown, want 5", creates)
			}
		}},
		{"bad objects are refused without a panic", func(t *testing.T) {
			sink := newMemSink()
			_, r, stop := run(t, sink, Options{})
			r.Event(nil, corev1.EventTypeNormal, "Sync", "nil")
			r.Event(&runtime.Unknown{}, corev1.EventTypeNormal, "Sync", "no meta")
			r.Event(pod("p1"), "Bogus", "Sync", "unknown type becomes Warning")
			synctest.Wait()
			stop()
			events, creates, _ := sink.snapshot()
			if creates != 1 || events[0].Type != corev1.EventTypeWarning {
				t.Fatalf("creates=%d, want only the pod's event, as Warning", creates)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { synctest.Test(t, tt.run) })
	}
}

func TestLRUBounded(t *testing.T) {
	c := newLRU[int](3)
	for i := range 10 {
		c.put(strconv.Itoa(i), i)
	}
	c.get("7") // 7 becomes most recent; 8 is now the oldest after 9, 7
	c.put("10", 10)
	if c.len() != 3 {
		t.Fatalf("len = %d, want 3", c.len())
	}
	for key, want := range map[string]bool{"7": true, "9": true, "10": true, "8": false, "0": false} {
		if _, ok := c.get(key); ok != want {
			t.Errorf("get(%q) present = %v, want %v", key, ok, want)
		}
	}
}
