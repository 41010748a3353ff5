package cache

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/listwatch/listwatch/internal/proptest"
)

// podStore is the smallest cache a DeltaFIFO can feed: what Pop applied.
type podStore map[string]*corev1.Pod

func (s podStore) ListKeys() []string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	return keys
}

func (s podStore) GetByKey(key string) (*corev1.Pod, bool, error) {
	p, ok := s[key]
	return p, ok, nil
}

func (s podStore) apply(key string, deltas Deltas[*corev1.Pod]) {
	for _, d := range deltas {
		if d.Type == Deleted {
			delete(s, key)
		} else {
			s[key] = d.Object
		}
	}
}

func TestPoppedResourceVersion(t *testing.T) {
	type step struct {
		do   func(f *DeltaFIFO[*corev1.Pod], known podStore) error
		want string
	}
	add := func(name, rv string) step {
		return step{do: func(f *DeltaFIFO[*corev1.Pod], _ podStore) error { return f.Add(testPodRV("ns", name, rv)) }}
	}
	del := func(name, rv string) step {
		return step{do: func(f *DeltaFIFO[*corev1.Pod], _ podStore) error { return f.Delete(testPodRV("ns", name, rv)) }}
	}
	bookmark := func(rv string) step {
		return step{do: func(f *DeltaFIFO[*corev1.Pod], _ podStore) error { f.UpdateResourceVersion(rv); return nil }}
	}
	replace := func(rv string, pods ...*corev1.Pod) step {
		return step{do: func(f *DeltaFIFO[*corev1.Pod], _ podStore) error { return f.Replace(pods, rv) }}
	}
	pop := step{do: func(f *DeltaFIFO[*corev1.Pod], known podStore) error {
		return f.Pop(func(key string, d Deltas[*corev1.Pod], _ bool) error { known.apply(key, d); return nil })
	}}
	requeue := step{do: func(f *DeltaFIFO[*corev1.Pod], _ podStore) error {
		err := f.Pop(func(string, Deltas[*corev1.Pod], bool) error { return ErrRequeue{Err: errors.New("again")} })
		if err == nil || err.Error() != "again" {
			return fmt.Errorf("requeue: %v", err)
		}
		return nil
	}}
	expect := func(s step, want string) step { s.want = want; return s }

	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"nothing given", []step{expect(bookmark(""), "")}},
		{"an event is not reflected until popped", []step{
			expect(add("a", "5"), ""), expect(pop, "5"),
		}},
		{"a bookmark on an empty queue is reflected at once", []step{
			expect(bookmark("7"), "7"),
		}},
		{"a bookmark behind queued events waits for them", []step{
			expect(add("a", "5"), ""), expect(bookmark("9"), ""), expect(pop, "9"),
		}},
		{"a key popped with a later delta leaves what the next key entered after", []step{
			add("a", "5"), add("b", "6"), add("c", "7"), add("a", "8"),
			expect(pop, "5"), // a (5, 8) applied; b (6) is not
			expect(pop, "6"), // b applied; c entered after 6
			expect(pop, "8"),
		}},
		{"a list is reflected once its batch is popped", []step{
			expect(replace("10", testPodRV("ns", "a", "3"), testPodRV("ns", "b", "4")), ""),
			expect(pop, ""), expect(pop, "10"),
		}},
		{"an empty list is reflected at once", []step{
			expect(replace("10"), "10"),
		}},
		{"a delete of an unknown key is reflected when nothing is queued", []step{
			expect(del("a", "4"), "4"),
		}},
		{"a relist at an older version does not move it back", []step{
			add("a", "5"), expect(pop, "5"),
			expect(replace("3", testPodRV("ns", "a", "3")), "5"), expect(pop, "5"),
		}},
		{"a requeued key holds it until popped again", []step{
			add("a", "5"), add("b", "6"),
			expect(requeue, ""), // a back behind b
			expect(pop, ""),     // b applied, a still not
			expect(pop, "6"),
		}},
		{"opaque versions are followed as given", []step{
			add("a", "x1"), expect(pop, "x1"), expect(bookmark("x0"), "x0"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			known := podStore{}
			f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{KnownObjects: known})
			for i, s := range tc.steps {
				if err := s.do(f, known); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if got := f.PoppedResourceVersion(); got != s.want {
					t.Fatalf("step %d: PoppedResourceVersion %q, want %q", i, got, s.want)
				}
			}
		})
	}
}

func TestWaitForResourceVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{})
		if err := f.WaitForResourceVersion(t.Context(), "abc"); !errors.Is(err, ErrResourceVersionNotComparable) {
			t.Fatalf("wait for an opaque version: %v", err)
		}
		done := make(chan error, 1)
		go func() { done <- f.WaitForResourceVersion(t.Context(), "7") }()
		synctest.Wait()
		f.UpdateResourceVersion("6")
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("returned at 6 of 7: %v", err)
		default:
		}
		f.UpdateResourceVersion("8")
		if err := <-done; err != nil {
			t.Fatalf("wait: %v", err)
		}
		if err := f.WaitForResourceVersion(t.Context(), "8"); err != nil {
			t.Fatalf("wait for what is reached: %v", err)
		}

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := f.WaitForResourceVersion(ctx, "9"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("wait past the deadline: %v", err)
		}
	})
}

// TestPoppedResourceVersionProperty drives a DeltaFIFO through random
// histories of a server's writes (some missed by the watch and recovered by
// a relist), bookmarks, pops and requeues, and checks after every step
// that PoppedResourceVersion never moves back and never claims a change
// the cache has not applied: for every key, the cache holds the server's
// state of the key at that version or a newer one.
// Once the queue is drained it must have reached the newest version given.
func TestPoppedResourceVersionProperty(t *testing.T) {
	proptest.ForEachSeed(t, 2000, func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
		type state struct {
			rv     int
			exists bool
		}
		history := map[string][]state{} // per key, oldest first
		server := map[string]*corev1.Pod{}
		rv := 0
		known := podStore{}
		applied := map[string]int{}     // per key, the version of what was last applied
		tombstoneAt := map[string]int{} // per key, the list that queued its tombstone
		f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{KnownObjects: known, InOrder: seed%2 == 1})
		missing := false // the watch missed writes: the next delivery is a relist

		keys := []string{"a", "b", "c", "d"}
		write := func() {
			name := keys[rng.IntN(len(keys))]
			rv++
			p := testPodRV("ns", name, strconv.Itoa(rv))
			_, ok := server[name]
			switch {
			case ok && rng.IntN(3) == 0:
				delete(server, name)
				history["ns/"+name] = append(history["ns/"+name], state{rv, false})
				if !missing {
					if err := f.Delete(p); err != nil {
						t.Fatal(err)
					}
				}
			default:
				server[name] = p
				history["ns/"+name] = append(history["ns/"+name], state{rv, true})
				if !missing {
					do := f.Update
					if !ok {
						do = f.Add
					}
					if err := do(p); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		relist := func() {
			list := make([]*corev1.Pod, 0, len(server))
			for _, p := range server {
				list = append(list, p)
			}
			if err := f.Replace(list, strconv.Itoa(rv)); err != nil {
				t.Fatal(err)
			}
			for key, d := range f.items {
				if last, _ := d.Newest(); last.FinalStateUnknown {
					tombstoneAt[key] = rv
				}
			}
			missing = false
		}
		popOne := func(requeue bool) {
			err := f.Pop(func(key string, deltas Deltas[*corev1.Pod], _ bool) error {
				if requeue {
					return ErrRequeue{Err: errors.New("again")}
				}
				for _, d := range deltas {
					v, _ := strconv.Atoi(d.Object.ResourceVersion)
					if d.FinalStateUnknown {
						v = tombstoneAt[key]
					}
					applied[key] = max(applied[key], v)
				}
				known.apply(key, deltas)
				return nil
			})
			if err != nil && err.Error() != "again" {
				t.Fatal(err)
			}
		}
		prev := ""
		check := func(step int) {
			got := f.PoppedResourceVersion()
			if got == "" {
				return
			}
			if c, err := CompareResourceVersion(got, prev); prev != "" && (err != nil || c < 0) {
				t.Fatalf("step %d: PoppedResourceVersion moved back from %s to %s", step, prev, got)
			}
			prev = got
			at, _ := strconv.Atoi(got)
			for key, h := range history {
				var s state
				for _, e := range h {
					if e.rv <= at {
						s = e
					}
				}
				if _, cached := known[key]; s.rv > applied[key] && (s.exists || cached) {
					t.Fatalf("step %d: PoppedResourceVersion %s, but %s's change at %d (exists %v) is not applied (last applied %d)",
						step, got, key, s.rv, s.exists, applied[key])
				}
			}
		}

		relist() // the first list
		for step := range 200 {
			op := rng.IntN(100)
			switch {
			case op < 40:
				write()
			case op < 45:
				missing = true
			case op < 52 && missing:
				relist()
			case op < 57 && !missing:
				rv += rng.IntN(2) // a bookmark, maybe past other resources' writes
				f.UpdateResourceVersion(strconv.Itoa(rv))
			case f.Len() > 0:
				popOne(op >= 92)
			}
			if testing.Verbose() {
				t.Logf("step %d op %d: rv %d queue %v popped %q", step, op, rv, f.ListKeys(), f.PoppedResourceVersion())
			}
			check(step)
		}
		if missing {
			relist()
		}
		for f.Len() > 0 {
			popOne(false)
			check(-1)
		}
		if got, want := f.PoppedResourceVersion(), strconv.Itoa(rv); got != want && rv > 0 {
			t.Fatalf("drained: PoppedResourceVersion %s, want %s", got, want)
		}
		for name, p := range server {
			if got, ok := known["ns/"+name]; !ok || got.ResourceVersion != p.ResourceVersion {
				t.Fatalf("drained: cache holds %v for %s, server %s", got, name, p.ResourceVersion)
			}
		}
	})
}
