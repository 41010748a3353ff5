package watchcache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/storage"
)

// historyEvents turns storage events into the events an unfiltered watcher
// must receive.
func historyEvents(t testing.TB, hist []storage.Event) []ev {
	t.Helper()
	var out []ev
	for _, e := range hist {
		rv := fmt.Sprint(e.KV.Revision)
		switch {
		case e.Type == storage.EventDelete:
			p, _ := decodePod(e.Prev)
			out = append(out, ev{watch.Deleted, p.Namespace + "/" + p.Name, rv})
		case e.IsCreate():
			p, _ := decodePod(e.KV)
			out = append(out, ev{watch.Added, p.Namespace + "/" + p.Name, rv})
		default:
			p, _ := decodePod(e.KV)
			out = append(out, ev{watch.Modified, p.Namespace + "/" + p.Name, rv})
		}
	}
	return out
}

func TestWatchReplaysStorageHistory(t *testing.T) {
	st := newStore(t)
	populate(t, st, 10)
	c := newPodCache(t, st, nil)
	start, _ := st.Revision(context.Background())
	populate(t, st, 25)
	last, _ := st.Revision(context.Background())
	ctx := context.Background()
	for rev := start; rev < last; rev += 3 {
		w, err := c.Watch(ctx, WatchOptions{ResourceVersion: fmt.Sprint(rev)})
		if err != nil {
			t.Fatalf("Watch from %d: %v", rev, err)
		}
		got := collectUntil(t, w, last)
		w.Stop()
		want := historyEvents(t, storageHistory(t, st, rev, last))
		if !slices.Equal(got, want) {
			t.Fatalf("watch from %d:\n got %v\nwant %v", rev, got, want)
		}
	}
}

func TestWatchInitialState(t *testing.T) {
	st := newStore(t)
	populate(t, st, 12)
	c := newPodCache(t, st, nil)
	ctx := context.Background()
	for _, rv := range []string{"", "0"} {
		caughtUp(t, c, st)
		w, err := c.Watch(ctx, WatchOptions{ResourceVersion: rv, Namespace: "ns1"})
		if err != nil {
			t.Fatal(err)
		}
		state, srev := storageNames(t, st, 0, func(p *corev1.Pod) bool { return p.Namespace == "ns1" })
		var got []string
		for range state {
			e, _ := next(w)
			if e.Type != watch.Added {
				t.Fatalf("initial event %v, want ADDED", e)
			}
			got = append(got, e.Name+"@"+e.RV)
		}
		if !slices.Equal(got, state) {
			t.Fatalf("rv %q initial events %v, want %v", rv, got, state)
		}
		// Then live events.
		rev := put(t, st, "ns1", "later", nil, corev1.PodPending)
		put(t, st, "ns2", "other", nil, corev1.PodPending) // not in the namespace
		if e, _ := next(w); e != (ev{watch.Added, "ns1/later", fmt.Sprint(rev)}) {
			t.Fatalf("live event %v after initial state at %d", e, srev)
		}
		w.Stop()
		if _, ok := next(w); ok || w.Err() != nil {
			t.Fatalf("after Stop: open=%v err=%v", ok, w.Err())
		}
		del(t, st, "ns1", "later")
	}
}

func TestWatchSendInitialEvents(t *testing.T) {
	st := newStore(t)
	populate(t, st, 9)
	c := newPodCache(t, st, nil)
	ctx := context.Background()
	yes := true
	for _, rv := range []string{"", "0", "1"} {
		w, err := c.Watch(ctx, WatchOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, SendInitialEvents: &yes, AllowBookmarks: true})
		if err != nil {
			t.Fatalf("rv %q: %v", rv, err)
		}
		state, srev := storageNames(t, st, 0, nil)
		var got []string
		for range state {
			e := <-w.Events()
			got = append(got, e.Object().Namespace+"/"+e.Object().Name+"@"+e.Object().ResourceVersion)
		}
		if !slices.Equal(got, state) {
			t.Fatalf("initial events %v, want %v", got, state)
		}
		bm := <-w.Events()
		if bm.Type != watch.Bookmark || bm.Revision != srev || bm.Object().ResourceVersion != fmt.Sprint(srev) ||
			bm.Object().Annotations[metav1.InitialEventsAnnotationKey] != "true" {
			t.Fatalf("end of initial events: %+v %v, want BOOKMARK at %d annotated", bm.Type, bm.Object().ObjectMeta, srev)
		}
		w.Stop()
	}
}

func TestWatchSendInitialEventsFromStorage(t *testing.T) {
	// A revision the cache has not seen (a write under another prefix) is
	// served from storage, then the cache's events after it.
	st := newStore(t)
	populate(t, st, 5)
	c := newPodCache(t, st, nil)
	ctx := context.Background()
	other, err := st.Create(ctx, "/nodes/n1", []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	// "" is a consistent read: storage's revision, which is other.
	for i, rv := range []string{fmt.Sprint(other), ""} {
		w, err := c.Watch(ctx, WatchOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, SendInitialEvents: &yes, AllowBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		state, srev := storageNames(t, st, 0, nil)
		var got []string
		for range state {
			e := <-w.Events()
			got = append(got, e.Object().Namespace+"/"+e.Object().Name+"@"+e.Object().ResourceVersion)
		}
		if !slices.Equal(got, state) {
			t.Fatalf("rv %q: initial events %v, want %v", rv, got, state)
		}
		if bm := <-w.Events(); bm.Type != watch.Bookmark || bm.Revision != srev {
			t.Fatalf("rv %q: bookmark %v at %d, want at %d", rv, bm.Type, bm.Revision, srev)
		}
		rev := put(t, st, "ns0", fmt.Sprint("new", i), nil, corev1.PodPending)
		if e, _ := next(w); e != (ev{watch.Added, fmt.Sprint("ns0/new", i), fmt.Sprint(rev)}) {
			t.Fatalf("rv %q: live event %v", rv, e)
		}
		w.Stop()
		// Storage moves past the cache again, under another prefix.
		if _, err := st.Create(ctx, fmt.Sprint("/nodes/m", i), []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWatchErrors(t *testing.T) {
	st := newStore(t)
	c := newPodCache(t, st, func(cfg *Config[*corev1.Pod]) { cfg.WindowSize = 5; cfg.FreshTimeout = 1 })
	ctx := context.Background()
	first := put(t, st, "ns", "a", nil, corev1.PodPending)
	var last int64
	for i := range 10 {
		last = put(t, st, "ns", "a", map[string]string{"i": fmt.Sprint(i)}, corev1.PodPending)
	}
	seen(c, last)
	yes, no := true, false
	_, err := c.Watch(ctx, WatchOptions{ResourceVersion: fmt.Sprint(first)})
	if !apierrors.IsResourceExpired(err) {
		t.Errorf("watch from %d out of a window of 5: %v, want 410", first, err)
	}
	_, err = c.Watch(ctx, WatchOptions{ResourceVersion: fmt.Sprint(last + 100)})
	assertTooLarge(t, err)
	// kube-apiserver answers a watch from a resourceVersion that does not
	// parse with a 500 that quotes its storage's error.
	_, err = c.Watch(ctx, WatchOptions{ResourceVersion: "x"})
	if st, ok := err.(apierrors.APIStatus); !ok || st.Status().Code != 500 || st.Status().Reason != "" ||
		st.Status().Message != `resourceVersion: Invalid value: "x": strconv.ParseUint: parsing "x": invalid syntax` {
		t.Errorf("watch from x: %v, want kube's 500", err)
	}
	for _, o := range []WatchOptions{
		{SendInitialEvents: &yes, AllowBookmarks: true},
		{SendInitialEvents: &yes, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan},
		{ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan},
		{SendInitialEvents: &no, ResourceVersionMatch: metav1.ResourceVersionMatchExact},
	} {
		if _, err := c.Watch(ctx, o); !apierrors.IsBadRequest(err) {
			t.Errorf("Watch(%+v) = %v, want 400", o, err)
		}
	}
	// Inside the window, and sendInitialEvents=false: no initial events.
	w, err := c.Watch(ctx, WatchOptions{ResourceVersion: "0", SendInitialEvents: &no, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	rev := put(t, st, "ns", "b", nil, corev1.PodPending)
	if e, _ := next(w); e != (ev{watch.Added, "ns/b", fmt.Sprint(rev)}) {
		t.Fatalf("first event %v, want only the live one", e)
	}
	w.Stop()
}

func TestWatchFromUnseenRevision(t *testing.T) {
	st := newStore(t)
	c := newPodCache(t, st, nil)
	ctx := context.Background()
	put(t, st, "ns", "a", nil, corev1.PodPending)
	other, _ := st.Create(ctx, "/nodes/n1", []byte("{}"))
	// The cache may not have seen rev other yet; the watch starts after it.
	w, err := c.Watch(ctx, WatchOptions{ResourceVersion: fmt.Sprint(other)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	rev := put(t, st, "ns", "b", nil, corev1.PodPending)
	if e, _ := next(w); e != (ev{watch.Added, "ns/b", fmt.Sprint(rev)}) {
		t.Fatalf("event %v, want only writes after %d", e, other)
	}
}

func TestSelectorTransitions(t *testing.T) {
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	running := fields.OneTermEqualSelector("status.phase", "Running")
	type step struct {
		lbls  map[string]string
		phase corev1.PodPhase
		del   bool
		want  watch.EventType // "" : nothing
		prev  bool            // the DELETED event carries the previous state
	}
	webL, dbL := map[string]string{"app": "web"}, map[string]string{"app": "db"}
	tests := []struct {
		name  string
		label labels.Selector
		field fields.Selector
		steps []step
	}{
		{"label in and out", web, nil, []step{
			{lbls: dbL, want: ""},
			{lbls: webL, want: watch.Added},
			{lbls: webL, phase: corev1.PodRunning, want: watch.Modified},
			{lbls: dbL, want: watch.Deleted, prev: true},
			{lbls: dbL, phase: corev1.PodRunning, want: ""},
			{del: true, want: ""},
		}},
		{"field in and delete", nil, running, []step{
			{lbls: webL, phase: corev1.PodPending, want: ""},
			{lbls: webL, phase: corev1.PodRunning, want: watch.Added},
			{lbls: dbL, phase: corev1.PodRunning, want: watch.Modified},
			{del: true, want: watch.Deleted, prev: true},
		}},
		{"both selectors", web, running, []step{
			{lbls: webL, phase: corev1.PodRunning, want: watch.Added},
			{lbls: webL, phase: corev1.PodSucceeded, want: watch.Deleted, prev: true},
			{lbls: dbL, phase: corev1.PodRunning, want: ""},
			{lbls: webL, phase: corev1.PodRunning, want: watch.Added},
		}},
		{"everything", nil, nil, []step{
			{lbls: dbL, want: watch.Added},
			{lbls: webL, want: watch.Modified},
			{del: true, want: watch.Deleted, prev: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newStore(t)
			c := newPodCache(t, st, nil)
			w, err := c.Watch(context.Background(), WatchOptions{ResourceVersion: "0", Label: tt.label, Field: tt.field})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			var prevLabels map[string]string
			for i, s := range tt.steps {
				var rev int64
				if s.del {
					rev = del(t, st, "ns", "p")
				} else {
					rev = put(t, st, "ns", "p", s.lbls, s.phase)
				}
				// A marker write every watcher sees tells where step i ends.
				mark := put(t, st, "marker", fmt.Sprint(i), map[string]string{"app": "web"}, corev1.PodRunning)
				var got []*Event[*corev1.Pod]
				for e := range w.Events() {
					if e.Object().Namespace == "marker" {
						if e.Revision == mark {
							break
						}
						continue
					}
					got = append(got, e)
				}
				switch {
				case s.want == "" && len(got) != 0:
					t.Fatalf("step %d: got %v, want nothing", i, got[0].Type)
				case s.want != "" && (len(got) != 1 || got[0].Type != s.want || got[0].Revision != rev || got[0].Object().ResourceVersion != fmt.Sprint(rev)):
					t.Fatalf("step %d: got %d events %v, want one %s at %d", i, len(got), got, s.want, rev)
				case s.prev && !maps(got[0].Object().Labels, prevLabels):
					t.Fatalf("step %d: DELETED carries labels %v, want the previous %v", i, got[0].Object().Labels, prevLabels)
				}
				prevLabels = s.lbls
			}
		})
	}
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestBookmarks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t)
		c := newPodCache(t, st, func(cfg *Config[*corev1.Pod]) { cfg.BookmarkInterval = time.Minute })
		ctx := context.Background()
		w, err := c.Watch(ctx, WatchOptions{ResourceVersion: "0", AllowBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		quiet, err := c.Watch(ctx, WatchOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		rev := put(t, st, "ns", "a", nil, corev1.PodPending)
		if e, _ := next(w); e.Type != watch.Added {
			t.Fatalf("event %v", e)
		}
		if e, _ := next(quiet); e.Type != watch.Added {
			t.Fatalf("event %v", e)
		}
		synctest.Wait()
		if len(w.Events()) != 0 {
			t.Fatal("bookmark before the interval")
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		bm := <-w.Events()
		if bm.Type != watch.Bookmark || bm.Revision != rev || bm.Object().ResourceVersion != fmt.Sprint(rev) || len(bm.Object().Annotations) != 0 {
			t.Fatalf("got %v at %d (%v), want a BOOKMARK at %d", bm.Type, bm.Revision, bm.Object().ObjectMeta, rev)
		}
		if len(quiet.Events()) != 0 {
			t.Fatal("bookmark sent to a watcher that did not ask")
		}
		// Every interval, at the newest revision.
		rev = put(t, st, "ns", "b", nil, corev1.PodPending)
		next(w)
		time.Sleep(time.Minute)
		synctest.Wait()
		if bm := <-w.Events(); bm.Type != watch.Bookmark || bm.Revision != rev {
			t.Fatalf("second bookmark %v at %d, want at %d", bm.Type, bm.Revision, rev)
		}
		w.Stop()
		quiet.Stop()
	})
}

func TestSlowWatcherIsCutOff(t *testing.T) {
	st := newStore(t)
	const buffer, watchers, rounds, perRound = 16, 100, 40, 8
	put(t, st, "ns", "seed", nil, corev1.PodPending) // storage replays history only after a revision > 0
	c := newPodCache(t, st, func(cfg *Config[*corev1.Pod]) { cfg.WatcherBuffer = buffer })
	ctx := context.Background()
	start := c.ResourceVersion()
	stalled, err := c.Watch(ctx, WatchOptions{ResourceVersion: fmt.Sprint(start)})
	if err != nil {
		t.Fatal(err)
	}
	results := make([][]ev, watchers)
	var round sync.WaitGroup // the readers that have not read this round
	var readers sync.WaitGroup
	for i := range watchers {
		w, err := c.Watch(ctx, WatchOptions{ResourceVersion: fmt.Sprint(start)})
		if err != nil {
			t.Fatal(err)
		}
		readers.Go(func() {
			defer w.Stop()
			for e := range w.Events() {
				results[i] = append(results[i], toEv(e))
				if len(results[i])%perRound == 0 {
					round.Done()
				}
				if len(results[i]) == rounds*perRound {
					return
				}
			}
		})
	}
	// Writes go in rounds smaller than the buffer, so that readers that keep
	// up are never cut off however the goroutines are scheduled; the
	// stalled watcher overflows after two rounds.
	var last int64
	for r := range rounds {
		round.Add(watchers)
		for i := range perRound {
			last = put(t, st, "ns", fmt.Sprintf("p%d", i), map[string]string{"r": fmt.Sprint(r)}, corev1.PodPending)
		}
		round.Wait()
	}
	readers.Wait()
	want := historyEvents(t, storageHistory(t, st, start, last))
	for i, got := range results {
		if !slices.Equal(got, want) {
			t.Fatalf("watcher %d got %d events, want %d in order", i, len(got), len(want))
		}
	}
	// The stalled watcher got its buffer's worth, then was closed.
	var n int
	for range stalled.Events() {
		n++
	}
	if n != buffer || !errors.Is(stalled.Err(), ErrTooSlow) {
		t.Fatalf("stalled watcher: %d events then %v, want %d then ErrTooSlow", n, stalled.Err(), buffer)
	}
	if s := c.Stats(); s.TooSlow != 1 || s.Events != rounds*perRound || s.ResourceVersion != last {
		t.Fatalf("Stats = %+v, want 1 cut off, %d events up to %d", s, rounds*perRound, last)
	}
}

func TestStorageWatchFailures(t *testing.T) {
	st := &faultyStore{Store: newStore(t)}
	populate(t, st, 6)
	c := newPodCache(t, st, nil)
	ctx := context.Background()
	start := c.ResourceVersion()
	w, err := c.Watch(ctx, WatchOptions{ResourceVersion: fmt.Sprint(start)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// A watch that breaks is resumed from the last revision: no gap.
	put(t, st, "ns", "a", nil, corev1.PodPending)
	st.fail(errors.New("connection reset"))
	last := put(t, st, "ns", "b", nil, corev1.PodPending)
	got := collectUntil(t, w, last)
	if want := historyEvents(t, storageHistory(t, st.Store, start, last)); !slices.Equal(got, want) {
		t.Fatalf("across a broken storage watch:\n got %v\nwant %v", got, want)
	}
	if st.watchCount() < 2 {
		t.Fatal("the cache did not re-watch")
	}

	// Compacted past the cache: it relists and ends watchers with 410.
	mid := put(t, st, "ns", "c", nil, corev1.PodPending)
	seen(c, mid)
	st.hold()
	after := put(t, st, "ns", "d", nil, corev1.PodPending) // unseen: lost with the watch
	st.fail(storage.ErrCompacted)
	del(t, st, "ns", "a")
	end, _ := st.Revision(ctx)
	for range w.Events() {
	}
	if !apierrors.IsResourceExpired(w.Err()) {
		t.Fatalf("watcher after relist: %v, want 410", w.Err())
	}
	if s := c.Stats(); s.Relists != 1 {
		t.Fatalf("Stats.Relists = %d, want 1", s.Relists)
	}
	seen(c, end)
	res, err := c.List(ctx, ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := storageNames(t, st, 0, nil)
	if !slices.Equal(names(res.Objects()), want) {
		t.Fatalf("after relist %v\nwant %v (write at %d)", names(res.Objects()), want, after)
	}
}

// TestRunEndsWatchers: when Run's context ends, the watchers end with
// ErrClosed and later calls fail with it.
func TestRunEndsWatchers(t *testing.T) {
	st := newStore(t)
	c, err := New(Config[*corev1.Pod]{Storage: st, Prefix: prefix, Decode: decodePod})
	if err != nil {
		t.Fatal(err)
	}
	stop := runCache(t, c)
	populate(t, st, 3)
	w, err := c.Watch(context.Background(), WatchOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	for range w.Events() {
	}
	if !errors.Is(w.Err(), ErrClosed) {
		t.Fatalf("Err after Run = %v", w.Err())
	}
	if _, err := c.Watch(context.Background(), WatchOptions{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Watch after Run = %v", err)
	}
	if _, err := c.List(context.Background(), ListOptions{ResourceVersion: "0"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("List after Run = %v", err)
	}
	if err := c.Run(context.Background()); err == nil {
		t.Fatal("second Run succeeded")
	}
}

// TestReadsWaitForRun: New does no I/O; a list or watch made before Run
// waits for its first list, or fails with its context.
func TestReadsWaitForRun(t *testing.T) {
	st := newStore(t)
	populate(t, st, 3)
	c, err := New(Config[*corev1.Pod]{Storage: st, Prefix: prefix, Decode: decodePod})
	if err != nil {
		t.Fatal(err)
	}
	if rv := c.ResourceVersion(); rv != 0 {
		t.Fatalf("ResourceVersion before Run = %d, want 0", rv)
	}
	short, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.List(short, ListOptions{ResourceVersion: "0"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("List before Run with an ended context = %v", err)
	}
	if _, err := c.Watch(short, WatchOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch before Run with an ended context = %v", err)
	}
	listed := make(chan *ListResult[*corev1.Pod], 1)
	go func() {
		res, err := c.List(context.Background(), ListOptions{ResourceVersion: "0"})
		if err != nil {
			t.Errorf("List: %v", err)
		}
		listed <- res
	}()
	runCache(t, c)
	want, _ := storageNames(t, st, 0, nil)
	if res := <-listed; res == nil || !slices.Equal(names(res.Objects()), want) {
		t.Fatalf("List made before Run = %v, want %v", res, want)
	}
}

func TestWatchContextEnds(t *testing.T) {
	st := newStore(t)
	c := newPodCache(t, st, nil)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Watch(ctx, WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	for range w.Events() {
	}
	if w.Err() != nil {
		t.Fatalf("Err after the context ended = %v", w.Err())
	}
}

func TestEventEncodeOnce(t *testing.T) {
	e := NewEvent(watch.Added, &corev1.Pod{}, 0)
	var calls sync.Map
	var wg sync.WaitGroup
	for i := range 50 {
		key := fmt.Sprint("fmt", i%2)
		wg.Go(func() {
			b, err := e.Encode(key, func(*Event[*corev1.Pod]) ([]byte, error) {
				n, _ := calls.LoadOrStore(key, new(int))
				*n.(*int)++
				return []byte(key), nil
			})
			if err != nil || string(b) != key {
				t.Errorf("Encode(%s) = %q, %v", key, b, err)
			}
		})
	}
	wg.Wait()
	calls.Range(func(k, v any) bool {
		if *v.(*int) != 1 {
			t.Errorf("%v encoded %d times", k, *v.(*int))
		}
		return true
	})
}

func TestCatchingUpWatcherOvertakenByWindow(t *testing.T) {
	st := newStore(t)
	put(t, st, "ns", "seed", nil, corev1.PodPending)
	c := newPodCache(t, st, func(cfg *Config[*corev1.Pod]) { cfg.WindowSize = 10; cfg.WatcherBuffer = 1 })
	start := c.ResourceVersion()
	for i := range 8 {
		put(t, st, "ns", fmt.Sprint("p", i), nil, corev1.PodPending)
	}
	caughtUp(t, c, st)
	// The watcher replays from the window into a buffer of one and waits
	// for its consumer, who reads nothing while the window moves on.
	w, err := c.Watch(context.Background(), WatchOptions{ResourceVersion: fmt.Sprint(start)})
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for i := range 30 {
		last = put(t, st, "ns", fmt.Sprint("q", i), nil, corev1.PodPending)
	}
	seen(c, last)
	var got []ev
	for e := range w.Events() {
		got = append(got, toEv(e))
	}
	if !apierrors.IsResourceExpired(w.Err()) {
		t.Fatalf("Err = %v, want 410 Expired", w.Err())
	}
	want := historyEvents(t, storageHistory(t, st, start, last))
	if len(got) >= len(want) || !slices.Equal(got, want[:len(got)]) {
		t.Fatalf("got %v, want a strict prefix (maybe empty) of %v", got, want)
	}
}

func TestUndecodableValueDropsKey(t *testing.T) {
	st := newStore(t)
	c := newPodCache(t, st, nil)
	w, err := c.Watch(context.Background(), WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	rev := put(t, st, "ns", "a", nil, corev1.PodPending)
	if e, _ := next(w); e != (ev{watch.Added, "ns/a", fmt.Sprint(rev)}) {
		t.Fatalf("event %v", e)
	}
	bad, err := st.Update(context.Background(), podKey("ns", "a"), []byte("{not json"), rev)
	if err != nil {
		t.Fatal(err)
	}
	// The cache cannot show the new value, so the object leaves it.
	if e, _ := next(w); e != (ev{watch.Deleted, "ns/a", fmt.Sprint(bad)}) {
		t.Fatalf("event %v, want DELETED at %d", e, bad)
	}
	if _, ok := c.Get(podKey("ns", "a")); ok {
		t.Fatal("undecodable object still cached")
	}
}
