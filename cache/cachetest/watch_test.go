package cachetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
)

const (
	added    = cache.EventAdded
	modified = cache.EventModified
	deleted  = cache.EventDeleted
	bookmark = cache.EventBookmark
	errorEv  = cache.EventError
)

func TestWatchResourceVersion(t *testing.T) {
	// history5: a@1 b@2 a@3 -b@4 c@5; then live: update c@6, delete a@7.
	tests := []struct {
		name    string
		compact int64
		opts    listOpts
		want    []ev
	}{
		{"from 0 replays nothing before", 0, listOpts{RV: "0"}, []ev{
			{added, "ns/a", "3"}, {added, "other/c", "5"},
			{modified, "other/c", "6"}, {deleted, "ns/a", "7"}}},
		{"from empty", 0, listOpts{}, []ev{
			{added, "ns/a", "3"}, {added, "other/c", "5"},
			{modified, "other/c", "6"}, {deleted, "ns/a", "7"}}},
		{"from 1", 0, listOpts{RV: "1"}, []ev{
			{added, "ns/b", "2"}, {modified, "ns/a", "3"}, {deleted, "ns/b", "4"}, {added, "other/c", "5"},
			{modified, "other/c", "6"}, {deleted, "ns/a", "7"}}},
		{"from 3", 0, listOpts{RV: "3"}, []ev{
			{deleted, "ns/b", "4"}, {added, "other/c", "5"},
			{modified, "other/c", "6"}, {deleted, "ns/a", "7"}}},
		{"from current", 0, listOpts{RV: "5"}, []ev{{modified, "other/c", "6"}, {deleted, "ns/a", "7"}}},
		{"from compacted revision", 3, listOpts{RV: "3"}, []ev{
			{deleted, "ns/b", "4"}, {added, "other/c", "5"},
			{modified, "other/c", "6"}, {deleted, "ns/a", "7"}}},
		{"from current after compacting it", 5, listOpts{RV: "5"}, []ev{{modified, "other/c", "6"}, {deleted, "ns/a", "7"}}},
		{"from 0 after compaction", 5, listOpts{RV: "0"}, []ev{
			{added, "ns/a", "3"}, {added, "other/c", "5"},
			{modified, "other/c", "6"}, {deleted, "ns/a", "7"}}},
		{"with label selector", 0, listOpts{RV: "1", Labels: "app=y"}, []ev{
			{added, "ns/b", "2"}, {added, "ns/a", "3"}, {deleted, "ns/b", "4"}, {deleted, "ns/a", "7"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := history5(t)
			s.Compact(tt.compact)
			w := watch(t, s, tt.opts.opts())
			if s.Watchers() != 1 {
				t.Fatalf("Watchers = %d", s.Watchers())
			}
			c, _ := s.Get("other", "c")
			c = c.DeepCopy()
			c.Labels["app"] = "x2"
			mustUpdate(t, s, c)
			mustDelete(t, s, "ns", "a")
			eqEvents(t, shortAll(takeAll(t, w)), tt.want)
		})
	}
}

func TestWatchStartErrors(t *testing.T) {
	tests := []struct {
		name      string
		compact   int64
		opts      listOpts
		wantCode  int32
		wantCheck func(error) bool
	}{
		{"below compacted", 3, listOpts{RV: "2"}, 410, apierrors.IsResourceExpired},
		{"far below compacted", 5, listOpts{RV: "1"}, 410, apierrors.IsResourceExpired},
		{"future", 0, listOpts{RV: "6"}, 504, IsTooLargeResourceVersion},
		{"future streaming", 0, listOpts{RV: "6", Match: "NotOlderThan", Initial: ptr(true), Bookmarks: true}, 504, IsTooLargeResourceVersion},
		{"future not streaming", 0, listOpts{RV: "6", Match: "NotOlderThan", Initial: ptr(false), Bookmarks: true}, 504, IsTooLargeResourceVersion},
		{"below compacted not streaming", 3, listOpts{RV: "2", Match: "NotOlderThan", Initial: ptr(false), Bookmarks: true}, 410, apierrors.IsResourceExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/event", func(t *testing.T) {
			s := history5(t)
			s.Compact(tt.compact)
			w := watch(t, s, tt.opts.opts())
			if s.Watchers() != 0 {
				t.Fatalf("a failed watch is counted open")
			}
			e, err := w.Next()
			if err != nil || e.Type != errorEv || e.Status == nil || e.Status.Code != tt.wantCode {
				t.Fatalf("first event %+v, %v", e, err)
			}
			if !tt.wantCheck(&apierrors.StatusError{ErrStatus: *e.Status}) {
				t.Fatalf("status %+v", e.Status)
			}
			if _, err := w.Next(); err != io.EOF {
				t.Fatalf("after ERROR event: %v", err)
			}
		})
		t.Run(tt.name+"/returned", func(t *testing.T) {
			s := history5(t, ReturnWatchErrors[*corev1.Pod]())
			s.Compact(tt.compact)
			w, err := s.Watch(context.Background(), tt.opts.opts())
			if w != nil || !tt.wantCheck(err) {
				t.Fatalf("Watch = %v, %v", w, err)
			}
		})
	}
}

func TestWatchBadRequests(t *testing.T) {
	tests := []struct {
		name string
		opts listOpts
	}{
		{"malformed rv", listOpts{RV: "x1"}},
		{"negative rv", listOpts{RV: "-4"}},
		{"bad label selector", listOpts{Labels: "a in (b"}},
		{"unsupported field", listOpts{Fields: "spec.nodeName=x"}},
		{"match without sendInitialEvents", listOpts{RV: "1", Match: "NotOlderThan"}},
		{"exact match", listOpts{RV: "1", Match: "Exact", Initial: ptr(true), Bookmarks: true}},
		{"streaming without match", listOpts{Initial: ptr(true), Bookmarks: true}},
		{"streaming without bookmarks", listOpts{Match: "NotOlderThan", Initial: ptr(true)}},
		{"not streaming without bookmarks", listOpts{Match: "NotOlderThan", Initial: ptr(false)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := history5(t)
			w, err := s.Watch(context.Background(), tt.opts.opts())
			if !apierrors.IsBadRequest(err) || w != nil {
				t.Fatalf("Watch = %v, %v", w, err)
			}
			if s.Watchers() != 0 {
				t.Fatalf("Watchers = %d", s.Watchers())
			}
		})
	}
}

func TestWatchSendInitialEvents(t *testing.T) {
	tests := []struct {
		name    string
		compact int64
		opts    listOpts
		want    []ev
	}{
		{"no rv", 0, listOpts{}, []ev{{added, "ns/a", "3"}, {added, "other/c", "5"}, {bookmark, "", "5"}, {modified, "other/c", "6"}}},
		{"rv 0", 0, listOpts{RV: "0"}, []ev{{added, "ns/a", "3"}, {added, "other/c", "5"}, {bookmark, "", "5"}, {modified, "other/c", "6"}}},
		{"old rv is served latest", 0, listOpts{RV: "2"}, []ev{{added, "ns/a", "3"}, {added, "other/c", "5"}, {bookmark, "", "5"}, {modified, "other/c", "6"}}},
		{"compacted rv is fine", 5, listOpts{RV: "1"}, []ev{{added, "ns/a", "3"}, {added, "other/c", "5"}, {bookmark, "", "5"}, {modified, "other/c", "6"}}},
		{"selector", 0, listOpts{Labels: "app=x"}, []ev{{added, "other/c", "5"}, {bookmark, "", "5"}, {modified, "other/c", "6"}}},
		{"selector matching nothing", 0, listOpts{Labels: "app=none"}, []ev{{bookmark, "", "5"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := history5(t)
			s.Compact(tt.compact)
			o := tt.opts
			o.Match, o.Initial, o.Bookmarks = "NotOlderThan", ptr(true), true
			w := watch(t, s, o.opts())
			c, _ := s.Get("other", "c")
			mustUpdate(t, s, c)
			evs := takeAll(t, w)
			eqEvents(t, shortAll(evs), tt.want)
			for _, e := range evs {
				anno := e.Object.Annotations[cache.InitialEventsEndAnnotation]
				if (e.Type == bookmark) != (anno == "true") {
					t.Fatalf("%s event has end annotation %q", e.Type, anno)
				}
			}
		})
	}

	t.Run("not streaming", func(t *testing.T) {
		s := history5(t)
		for _, rv := range []string{"", "0", "3"} {
			w := watch(t, s, listOpts{RV: rv, Match: "NotOlderThan", Initial: ptr(false), Bookmarks: true}.opts())
			evs := shortAll(takeAll(t, w))
			if rv == "3" {
				eqEvents(t, evs, []ev{{deleted, "ns/b", "4"}, {added, "other/c", "5"}})
			} else {
				eqEvents(t, evs, nil)
			}
		}
	})
}

func TestWatchSelectorTransitions(t *testing.T) {
	s := New[*corev1.Pod]()
	live := watch(t, s, listOpts{RV: "0", Labels: "app=x"}.opts())
	// rv1: created outside; rv2: moves in; rv3: changes inside; rv4: moves
	// out; rv5: changes outside; rv6: moves in; rv7: deleted inside;
	// rv8: created inside; rv9: created outside, rv10: deleted outside.
	mustCreate(t, s, pod("ns", "p", map[string]string{"app": "y"}))
	mustUpdate(t, s, pod("ns", "p", map[string]string{"app": "x"}))
	mustUpdate(t, s, pod("ns", "p", map[string]string{"app": "x", "v": "2"}))
	mustUpdate(t, s, pod("ns", "p", map[string]string{"app": "z", "v": "3"}))
	mustUpdate(t, s, pod("ns", "p", map[string]string{"app": "z", "v": "4"}))
	mustUpdate(t, s, pod("ns", "p", map[string]string{"app": "x", "v": "5"}))
	mustDelete(t, s, "ns", "p")
	mustCreate(t, s, pod("ns", "q", map[string]string{"app": "x"}))
	mustCreate(t, s, pod("ns", "r", nil))
	mustDelete(t, s, "ns", "r")
	want := []ev{
		{added, "ns/p", "2"}, {modified, "ns/p", "3"}, {deleted, "ns/p", "4"},
		{added, "ns/p", "6"}, {deleted, "ns/p", "7"}, {added, "ns/q", "8"},
	}
	evs := takeAll(t, live)
	eqEvents(t, shortAll(evs), want)
	// Leaving the selection shows the last state that matched, stamped with
	// the revision of the change.
	if out := evs[2].Object; out.Labels["app"] != "x" || out.Labels["v"] != "2" {
		t.Fatalf("DELETED on leaving carries %v", out.Labels)
	}
	if h := s.History()[3]; h.Object.ResourceVersion != "4" || h.Old.ResourceVersion != "3" {
		t.Fatalf("history was changed by the watch: %s %s", h.Object.ResourceVersion, h.Old.ResourceVersion)
	}
	// Replay from a revision gives what a live watcher saw.
	replay := watch(t, s, listOpts{RV: "1", Labels: "app=x"}.opts())
	eqEvents(t, shortAll(takeAll(t, replay)), want)
	// A field selector works the same.
	byName := watch(t, s, listOpts{RV: "1", Fields: "metadata.name=q"}.opts())
	eqEvents(t, shortAll(takeAll(t, byName)), []ev{{added, "ns/q", "8"}})
}

func TestBookmark(t *testing.T) {
	s := history5(t)
	with := watch(t, s, listOpts{RV: "5", Bookmarks: true}.opts())
	without := watch(t, s, listOpts{RV: "5"}.opts())
	s.Bookmark()
	mustCreate(t, s, pod("ns", "d", nil))
	s.Bookmark()
	eqEvents(t, shortAll(takeAll(t, with)), []ev{{bookmark, "", "5"}, {added, "ns/d", "6"}, {bookmark, "", "6"}})
	eqEvents(t, shortAll(takeAll(t, without)), []ev{{added, "ns/d", "6"}})
}

func TestWatchTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := history5(t)
		w, err := s.Watch(t.Context(), listOpts{RV: "5", Timeout: 30}.opts())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		time.Sleep(29 * time.Second)
		mustCreate(t, s, pod("ns", "d", nil))
		if s.Watchers() != 1 {
			t.Fatalf("watch ended early")
		}
		if e, err := w.Next(); err != nil || e.Type != added {
			t.Fatalf("Next = %v, %v", e, err)
		}
		if _, err := w.Next(); err != io.EOF {
			t.Fatalf("Next at timeout = %v", err)
		}
		if d := time.Since(start); d != 30*time.Second {
			t.Fatalf("ended after %v", d)
		}
		if s.Watchers() != 0 {
			t.Fatalf("Watchers = %d after timeout", s.Watchers())
		}
		mustCreate(t, s, pod("ns", "e", nil)) // no one to deliver to
		if _, err := w.Next(); err != io.EOF {
			t.Fatalf("Next after end = %v", err)
		}
		w.Stop()
	})
}

func TestWatchContextDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := history5(t)
		ctx, cancel := context.WithCancel(t.Context())
		w, err := s.Watch(ctx, listOpts{RV: "5"}.opts())
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			_, err := w.Next()
			got <- err
		}()
		synctest.Wait()
		select {
		case err := <-got:
			t.Fatalf("Next returned early: %v", err)
		default:
		}
		cancel()
		if err := <-got; err != io.EOF {
			t.Fatalf("Next after cancel = %v", err)
		}
		if s.Watchers() != 0 {
			t.Fatalf("Watchers = %d", s.Watchers())
		}

		// A deadline ends the watch at the deadline.
		ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		w, err = s.Watch(ctx, listOpts{RV: "5"}.opts())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := w.Next(); err != io.EOF || time.Since(start) != 10*time.Second {
			t.Fatalf("Next = %v after %v", err, time.Since(start))
		}
	})
}

func TestWatchStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := history5(t)
		w, err := s.Watch(t.Context(), listOpts{RV: "3", Timeout: 60}.opts())
		if err != nil {
			t.Fatal(err)
		}
		if e, err := w.Next(); err != nil || short(e) != (ev{deleted, "ns/b", "4"}) {
			t.Fatalf("Next = %v, %v", short(e), err)
		}
		got := make(chan error, 1)
		go func() {
			_, err := w.Next() // one event is queued: takes it
			if err == nil {
				_, err = w.Next() // blocks until Stop
			}
			got <- err
		}()
		synctest.Wait()
		w.Stop()
		if err := <-got; err != io.EOF {
			t.Fatalf("Next after Stop = %v", err)
		}
		w.Stop()
		if s.Watchers() != 0 {
			t.Fatalf("Watchers = %d", s.Watchers())
		}
		// Stop drops whatever was still queued.
		w2, _ := s.Watch(t.Context(), listOpts{RV: "0"}.opts())
		w2.Stop()
		if _, err := w2.Next(); err != io.EOF {
			t.Fatalf("Next after Stop with queued events = %v", err)
		}
		// The timeout timer was stopped: nothing fires later.
		time.Sleep(2 * time.Minute)
	})
}

func TestDropAndBreakWatches(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		end     func(s *podSource)
		wantErr error
	}{
		{"drop", func(s *podSource) { s.DropWatches() }, io.EOF},
		{"break", func(s *podSource) { s.BreakWatches(boom) }, boom},
		{"break nil", func(s *podSource) { s.BreakWatches(nil) }, ErrWatchBroken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := history5(t)
			w1 := watch(t, s, listOpts{RV: "4"}.opts())
			w2 := watch(t, s, listOpts{RV: "5", Labels: "app=none"}.opts())
			tt.end(s)
			if s.Watchers() != 0 {
				t.Fatalf("Watchers = %d", s.Watchers())
			}
			mustCreate(t, s, pod("ns", "late", nil))
			// What was queued before the end is still delivered.
			eqEvents(t, shortAll(takeAll(t, w1)), []ev{{added, "other/c", "5"}})
			expectEnd(t, w1, tt.wantErr)
			expectEnd(t, w2, tt.wantErr)
			// The client watches again from where it was.
			w3 := watch(t, s, listOpts{RV: "5"}.opts())
			eqEvents(t, shortAll(takeAll(t, w3)), []ev{{added, "ns/late", "6"}})
		})
	}
}

func TestInjectEvent(t *testing.T) {
	s := history5(t)
	w := watch(t, s, listOpts{RV: "5", Labels: "app=none"}.opts())
	injected := []cache.Event[*corev1.Pod]{
		{Type: errorEv},
		{Type: "BOGUS", Object: pod("ns", "x", nil)},
		{Type: added},
		{Type: errorEv, Status: &metav1.Status{Code: 500, Reason: metav1.StatusReasonInternalError}},
	}
	for _, e := range injected {
		s.InjectEvent(e)
	}
	got := takeAll(t, w)
	if len(got) != len(injected) {
		t.Fatalf("got %d events", len(got))
	}
	for i := range got {
		if got[i].Type != injected[i].Type || got[i].Object != injected[i].Object || got[i].Status != injected[i].Status {
			t.Fatalf("event %d: got %+v, want %+v", i, got[i], injected[i])
		}
	}
	if s.Revision() != 5 || len(s.History()) != 5 {
		t.Fatalf("InjectEvent changed the history")
	}
}

// Writers never wait for a watcher that does not read, and the watcher
// later gets every event in order.
func TestSlowWatcherDoesNotBlockWriters(t *testing.T) {
	s := New[*corev1.Pod]()
	w := watch(t, s, listOpts{RV: "0"}.opts())
	const n = 5000
	for i := range n {
		mustUpsert(t, s, pod("ns", fmt.Sprintf("p%d", i%10), nil))
	}
	evs := takeAll(t, w)
	if len(evs) != n {
		t.Fatalf("got %d events", len(evs))
	}
	for i, e := range evs {
		if e.Object.ResourceVersion != strconv.Itoa(i+1) {
			t.Fatalf("event %d has rv %s", i, e.Object.ResourceVersion)
		}
	}
}

func mustUpsert(t *testing.T, s *podSource, p *corev1.Pod) {
	t.Helper()
	if _, err := s.Upsert(p); err != nil {
		t.Fatal(err)
	}
}

// Watches opened at random points while several goroutines write see,
// exactly, the history after their start revision through their selector.
func TestWatchConcurrentConsistency(t *testing.T) {
	s := New[*corev1.Pod]()
	type opened struct {
		w    cache.Watcher[*corev1.Pod]
		from int64
		sel  string
	}
	var (
		mu      sync.Mutex
		opens   []opened
		writers sync.WaitGroup
		readers sync.WaitGroup
	)
	// Some watches are read while writes happen, to exercise Next under
	// -race; they end at DropWatches.
	for range 3 {
		w := watch(t, s, listOpts{RV: "0"}.opts())
		readers.Go(func() {
			for {
				if _, err := w.Next(); err != nil {
					return
				}
			}
		})
	}
	for g := range 4 {
		writers.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range 400 {
				name := fmt.Sprintf("p%d", r.IntN(20))
				labels := map[string]string{"app": []string{"x", "y"}[r.IntN(2)]}
				if r.IntN(4) == 0 {
					_, _ = s.Delete("ns", name)
				} else {
					_, _ = s.Upsert(pod("ns", name, labels))
				}
				if i%50 == 0 {
					from := s.Revision()
					sel := []string{"", "app=x"}[r.IntN(2)]
					w, err := s.Watch(context.Background(), listOpts{RV: strconv.FormatInt(from, 10), Labels: sel}.opts())
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					opens = append(opens, opened{w, from, sel})
					mu.Unlock()
				}
			}
		})
	}
	writers.Wait()
	s.DropWatches()
	readers.Wait()

	hist := s.History()
	if len(opens) != 32 {
		t.Fatalf("%d watches opened", len(opens))
	}
	for _, o := range opens {
		match := func(p *corev1.Pod) bool { return o.sel == "" || p.Labels["app"] == "x" }
		var want []ev
		for _, c := range hist {
			if c.Revision <= o.from {
				continue
			}
			was := c.Old != nil && match(c.Old)
			is := c.Type != deleted && match(c.Object)
			rv := strconv.FormatInt(c.Revision, 10)
			switch {
			case was && is:
				want = append(want, ev{modified, c.Key, rv})
			case is:
				want = append(want, ev{added, c.Key, rv})
			case was:
				want = append(want, ev{deleted, c.Key, rv})
			}
		}
		eqEvents(t, shortAll(takeAll(t, o.w)), want)
		expectEnd(t, o.w, io.EOF)
	}
}
