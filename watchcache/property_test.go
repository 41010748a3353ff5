package watchcache

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	kubesharding "k8s.io/apiserver/pkg/sharding"

	"github.com/listwatch/listwatch/storage"
)

// selection is a watcher's selector as the model evaluates it, on its own.
type selection struct {
	ns, app string
	phase   corev1.PodPhase
	// shard is evaluated by kube's own Selector.Matches.
	shard sharding.Selector
}

func (s selection) matches(p *corev1.Pod) bool {
	if p == nil || s.shard != nil && !must(s.shard.Matches(p)) {
		return false
	}
	return (s.ns == "" || p.Namespace == s.ns) && (s.app == "" || p.Labels["app"] == s.app) &&
		(s.phase == "" || p.Status.Phase == s.phase)
}

func must[V any](v V, err error) V {
	if err != nil {
		panic(err)
	}
	return v
}

func (s selection) options() WatchOptions {
	var o WatchOptions
	o.Namespace = s.ns
	if s.app != "" {
		o.Label = labels.SelectorFromSet(labels.Set{"app": s.app})
	}
	if s.phase != "" {
		o.Field = fields.OneTermEqualSelector("status.phase", string(s.phase))
	}
	o.Shard = s.shard
	return o
}

// propWatcher is a watcher of the property test and what it received.
type propWatcher struct {
	sel     selection
	start   int64 // the revision its stream starts after
	initial bool  // whether the stream begins with the state at start
	events  []ev
	bookmk  int64 // the initial-events-end bookmark's revision, if asked
	err     error // why the watch ended early
}

// TestPropertyWatchersSeeFilteredHistory: random writes, and watchers
// started at random points with random selectors; every watcher's stream
// must be the history after its start, filtered through its selector with
// the ADDED/DELETED transitions, preceded by the state at its start when it
// asked for one.
// Half the runs read attributes with Config.Scan, which decodes objects
// only when asked.
func TestPropertyWatchersSeeFilteredHistory(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { propertyRun(t, seed, seed%2 == 1) })
	}
}

func propertyRun(t *testing.T, seed uint64, scan bool) {
	rng := rand.New(rand.NewPCG(seed, 42))
	st := newStore(t)
	ctx := context.Background()
	// Storage replays history only after a revision > 0.
	if _, err := st.Create(ctx, "/nodes/zero", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	first := put(t, st, "ns0", "seed", map[string]string{"app": "web"}, corev1.PodRunning)
	c := newPodCache(t, st, func(cfg *Config[*corev1.Pod]) {
		cfg.WatcherBuffer = 1024 // more than the events of a run: cut-off has its own test
		if scan {
			cfg.Scan = scanPod
		}
	})

	namespaces := []string{"ns0", "ns1", "ns2"}
	apps := []string{"web", "db"}
	phases := []corev1.PodPhase{corev1.PodPending, corev1.PodRunning}
	// Halves of the hash space, of the uid or of the namespace, as kube's
	// parser makes them, and one that takes ns0 and ns1 but not ns2
	// (nsHalf): the halves take all three namespaces or none.
	shards := []sharding.Selector{nsHalf}
	for _, f := range []string{"uid", "namespace"} {
		for _, r := range [][2]string{{"0x0000000000000000", "0x8000000000000000"}, {"0x8000000000000000", "0x10000000000000000"}} {
			shards = append(shards, must(kubesharding.Parse(fmt.Sprintf("shardRange(object.metadata.%s, '%s', '%s')", f, r[0], r[1]))))
		}
	}
	randSel := func() selection {
		var s selection
		if rng.IntN(2) == 0 {
			s.ns = namespaces[rng.IntN(3)]
		}
		if rng.IntN(2) == 0 {
			s.app = apps[rng.IntN(2)]
		}
		if rng.IntN(3) == 0 {
			s.phase = phases[rng.IntN(2)]
		}
		if rng.IntN(3) == 0 {
			s.shard = shards[rng.IntN(len(shards))]
		}
		return s
	}

	var (
		watchers []*propWatcher
		wg       sync.WaitGroup
		revs     = []int64{first}
		live     = map[string]bool{podKey("ns0", "seed"): true}
		podRev   = first // the last write the cache sees
	)
	// collect reads w until the revision sent on done, which the markers
	// written at the end guarantee it receives.
	collect := func(pw *propWatcher, w *Watcher[*corev1.Pod], done chan int64) {
		wg.Go(func() {
			defer w.Stop()
			end, got := int64(-1), int64(0)
			for end < 0 || got < end {
				select {
				case end = <-done:
				case e, ok := <-w.Events():
					if !ok {
						pw.err = fmt.Errorf("ended: %w", w.Err())
						return
					}
					if e.Type != watch.Bookmark {
						pw.events = append(pw.events, toEv(e))
						got = e.Revision
					} else if e.Object().Annotations[metav1.InitialEventsAnnotationKey] == "true" {
						pw.bookmk = e.Revision
					}
				}
			}
		})
	}
	dones := map[*propWatcher]chan int64{}

	for step := range 400 {
		switch r := rng.IntN(100); {
		case r < 70: // a write
			ns, name := namespaces[rng.IntN(3)], fmt.Sprint("p", rng.IntN(8))
			key := podKey(ns, name)
			if live[key] && rng.IntN(4) == 0 {
				podRev = del(t, st, ns, name)
				live[key] = false
			} else {
				podRev = put(t, st, ns, name, map[string]string{"app": apps[rng.IntN(2)]}, phases[rng.IntN(2)])
				live[key] = true
			}
			revs = append(revs, podRev)
		case r < 73: // a write under another prefix: a revision the cache never sees
			rev, err := st.Create(ctx, fmt.Sprint("/nodes/n", step), []byte("{}"))
			if err != nil {
				t.Fatal(err)
			}
			revs = append(revs, rev)
		default: // a watcher
			pw := &propWatcher{sel: randSel()}
			opts := pw.sel.options()
			switch rng.IntN(3) {
			case 0: // from a revision in the history
				pw.start = revs[rng.IntN(len(revs))]
				opts.ResourceVersion = fmt.Sprint(pw.start)
			case 1: // from the current state
				seen(c, podRev)
				pw.start, pw.initial = c.ResourceVersion(), true
				opts.ResourceVersion = []string{"", "0"}[rng.IntN(2)]
			default: // WatchList
				seen(c, podRev)
				pw.start, pw.initial = c.ResourceVersion(), true
				yes := true
				opts.ResourceVersion, opts.ResourceVersionMatch = "0", metav1.ResourceVersionMatchNotOlderThan
				opts.SendInitialEvents, opts.AllowBookmarks = &yes, true
				pw.bookmk = -1
			}
			w, err := c.Watch(ctx, opts)
			if err != nil {
				t.Fatalf("Watch(%+v): %v", opts, err)
			}
			watchers = append(watchers, pw)
			dones[pw] = make(chan int64, 1)
			collect(pw, w, dones[pw])
		}
	}
	// Markers in every namespace, of every app and phase: each selection
	// matches some, and the last it matches ends its stream.
	var markers []*corev1.Pod
	for _, ns := range namespaces {
		for _, app := range apps {
			for _, ph := range phases {
				rev := put(t, st, ns, fmt.Sprintf("zz-%s-%s", app, ph), map[string]string{"app": app}, ph)
				p := &corev1.Pod{}
				p.UID = types.UID(fmt.Sprintf("uid-%s-zz-%s-%s", ns, app, ph))
				p.Namespace, p.Labels, p.Status.Phase, p.ResourceVersion = ns, map[string]string{"app": app}, ph, fmt.Sprint(rev)
				markers = append(markers, p)
			}
		}
	}
	last, _ := st.Revision(ctx)
	hist := decodeHistory(t, storageHistory(t, st, first-1, last))
	for _, pw := range watchers {
		var end int64
		for _, m := range markers {
			if pw.sel.matches(m) {
				fmt.Sscan(m.ResourceVersion, &end)
			}
		}
		if pw.sel.shard != nil {
			// No marker may be in its shard: its stream ends with
			// the last event the model expects of it.
			end = 0
			if want := expectedStream(t, hist, pw); len(want) > 0 {
				fmt.Sscan(want[len(want)-1].RV, &end)
			}
		}
		dones[pw] <- end
	}
	wg.Wait()
	for i, pw := range watchers {
		if pw.err != nil {
			t.Fatalf("watcher %d %+v: %v", i, pw.sel, pw.err)
		}
		want := expectedStream(t, hist, pw)
		if !slices.Equal(pw.events, want) {
			t.Fatalf("watcher %d %+v from %d (initial %v):\n got %v\nwant %v", i, pw.sel, pw.start, pw.initial, pw.events, want)
		}
		if pw.bookmk != 0 && pw.bookmk != pw.start {
			t.Fatalf("watcher %d: initial-events-end bookmark at %d, want %d", i, pw.bookmk, pw.start)
		}
	}
}

// expectedStream computes, from storage's history alone, what pw must
// receive.
func expectedStream(t *testing.T, hist []change, pw *propWatcher) []ev {
	t.Helper()
	state := map[string]*corev1.Pod{}
	var out []ev
	name := func(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }
	emitState := func() {
		keys := make([]string, 0, len(state))
		for k := range state {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p := state[k]; pw.sel.matches(p) {
				out = append(out, ev{watch.Added, name(p), p.ResourceVersion})
			}
		}
	}
	emitted := false
	for _, e := range hist {
		if e.rev > pw.start && pw.initial && !emitted {
			emitState()
			emitted = true
		}
		cur, prev := e.cur, state[e.key]
		if cur != nil {
			state[e.key] = cur
		} else {
			delete(state, e.key)
		}
		if e.rev <= pw.start {
			continue
		}
		rv := fmt.Sprint(e.rev)
		now, before := pw.sel.matches(cur), pw.sel.matches(prev)
		switch {
		case now && !before:
			out = append(out, ev{watch.Added, name(cur), rv})
		case now:
			out = append(out, ev{watch.Modified, name(cur), rv})
		case before:
			out = append(out, ev{watch.Deleted, name(prev), rv})
		}
	}
	if pw.initial && !emitted {
		emitState()
	}
	return out
}

// change is one decoded storage event; cur is nil for a delete.
type change struct {
	rev int64
	key string
	cur *corev1.Pod
}

// decodeHistory decodes storage events once for every watcher's model.
func decodeHistory(t *testing.T, hist []storage.Event) []change {
	t.Helper()
	out := make([]change, len(hist))
	for i, e := range hist {
		out[i] = change{rev: e.KV.Revision, key: e.KV.Key}
		if e.Type == storage.EventPut {
			p, err := decodePod(e.KV)
			if err != nil {
				t.Fatal(err)
			}
			out[i].cur = p
		}
	}
	return out
}
