package cache_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/internal/proptest"
)

// TestInformerProperty drives an informer through thousands of random
// histories (writes, dropped and broken watches, compactions that force
// relists, failing requests, resyncs) and checks, once the source is quiet:
//   - the cache equals the source;
//   - for each key, the states the handler saw are a subsequence of the
//     source's history for that key, ending in its final state;
//   - a delete the watch missed reaches the handler as a delete with an
//     unknown final state carrying the last state the handler saw.
//
// A failing seed is printed; LISTWATCH_SEED=N replays just that one.
func TestInformerProperty(t *testing.T) {
	tombstones := 0
	seeds := proptest.ForEachSeed(t, 2000, func(t *testing.T, seed uint64) {
		tombstones += runHistory(t, seed).tombstones
	})
	if tombstones == 0 {
		t.Errorf("no history produced a delete with an unknown final state: the generator does not cover the case")
	}
	t.Logf("%d histories, %d deletes with unknown final state", seeds, tombstones)
}

type historyStats struct{ tombstones int }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func runHistory(t *testing.T, seed uint64) historyStats {
	rng := rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15))
	src := cachetest.New[*corev1.Pod]()
	var names []string
	for _, ns := range []string{"a", "b"} {
		for i := range 5 {
			names = append(names, ns+"/p"+strconv.Itoa(i))
		}
	}
	write := func() {
		k := names[rng.IntN(len(names))]
		ns, name, _ := strings.Cut(k, "/")
		cur, ok := src.Get(ns, name)
		switch {
		case !ok:
			src.Create(newPod(ns, name))
		case rng.IntN(3) == 0:
			src.Delete(ns, name)
		default:
			p := cur.DeepCopy()
			p.Labels = map[string]string{"gen": strconv.Itoa(rng.IntN(1000))}
			src.Update(p)
		}
	}
	for range rng.IntN(8) {
		write()
	}

	rec := &recorder{}
	var resync time.Duration
	if rng.IntN(2) == 0 {
		resync = time.Duration(10+rng.IntN(50)) * time.Second
	}
	opts := cache.InformerOptions{
		ResyncPeriod: resync,
		Reflector: cache.ReflectorOptions{
			Logger:            quiet,
			WatchErrorHandler: func(context.Context, error) {},
			DisableWatchList:  rng.IntN(4) != 0,
		},
	}
	idx, c := cache.NewIndexerInformer[*corev1.Pod](src, rec, opts)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	defer func() { cancel(); <-done }()

	boom := apierrors.NewInternalError(errors.New("injected"))
	for range 20 + rng.IntN(60) {
		switch op := rng.IntN(100); {
		case op < 45:
			write()
		case op < 52:
			src.DropWatches()
		case op < 60:
			// An outage: the watch is down while writes happen and history
			// is compacted, so the reflector must relist.
			src.SetDelay(cachetest.OpWatch, time.Second)
			src.DropWatches()
			for range 1 + rng.IntN(5) {
				write()
			}
			src.Compact(src.Revision())
			time.Sleep(2 * time.Second)
			src.SetDelay(cachetest.OpWatch, 0)
		case op < 66:
			ops := []cachetest.Op{cachetest.OpList, cachetest.OpWatch}
			src.FailNext(ops[rng.IntN(2)], 1+rng.IntN(3), boom)
			if rng.IntN(2) == 0 {
				src.BreakWatches(errors.New("connection reset"))
			}
		case op < 70:
			src.BreakWatches(errors.New("connection reset"))
		case op < 74:
			src.Bookmark()
		default:
			time.Sleep(time.Duration(rng.IntN(3000)) * time.Millisecond)
		}
		if rng.IntN(2) == 0 {
			synctest.Wait()
		}
	}
	// Quiet: long enough for any backoff to end and any resync to run. Up
	// to six injected failures may still be pending, each retried after up
	// to a minute (the 30 s cap, stretched by jitter).
	time.Sleep(10 * time.Minute)
	synctest.Wait()

	if !c.HasSynced() {
		t.Errorf("informer never synced")
	}
	checkCacheEqualsSource(t, idx, src)
	return checkHandlerSawSubsequence(t, rec.all(), src)
}

func checkCacheEqualsSource(t *testing.T, idx cache.Indexer[*corev1.Pod], src *podSource) {
	t.Helper()
	want := map[string]string{}
	for _, p := range src.Items() {
		want[key(p)] = p.ResourceVersion
	}
	got := map[string]string{}
	for _, p := range idx.List() {
		got[key(p)] = p.ResourceVersion
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("cache %v != source %v", got, want)
	}
}

// state is one state of one key in the source's history.
type state struct {
	rv      string
	deleted bool
}

func checkHandlerSawSubsequence(t *testing.T, notes []note, src *podSource) historyStats {
	t.Helper()
	var st historyStats
	hist := map[string][]state{}
	for _, ch := range src.History() {
		hist[ch.Key] = append(hist[ch.Key], state{rv: strconv.FormatInt(ch.Revision, 10), deleted: ch.Type == cache.EventDeleted})
	}
	seen := map[string][]note{}
	for _, n := range notes {
		seen[n.Key] = append(seen[n.Key], n)
	}
	final := map[string]string{}
	for _, p := range src.Items() {
		final[key(p)] = p.ResourceVersion
	}
	for k, ns := range seen {
		h := hist[k]
		pos := -1
		present := func() bool { return pos >= 0 && !h[pos].deleted }
		find := func(from int, match func(state) bool) int {
			for j := max(from, 0); j < len(h); j++ {
				if match(h[j]) {
					return j
				}
			}
			return -1
		}
		for i, n := range ns {
			var j int
			switch {
			case n.Op == "add":
				if present() {
					t.Errorf("%s: note %d %v: add of a key the handler holds (history %v, notes %v)", k, i, n, h, ns)
					return st
				}
				j = find(pos+1, func(s state) bool { return !s.deleted && s.rv == n.RV })
			case n.Op == "update":
				if !present() || h[pos].rv != n.OldRV {
					t.Errorf("%s: note %d %v: update whose old state is not the one last seen (history %v, notes %v)", k, i, n, h, ns)
					return st
				}
				j = find(pos, func(s state) bool { return !s.deleted && s.rv == n.RV })
			case n.FinalUnkn:
				st.tombstones++
				if !present() || h[pos].rv != n.RV {
					t.Errorf("%s: note %d %v: tombstone does not carry the last state seen (history %v, notes %v)", k, i, n, h, ns)
					return st
				}
				j = find(pos+1, func(s state) bool { return s.deleted })
			default:
				if !present() {
					t.Errorf("%s: note %d %v: delete of a key the handler does not hold (history %v, notes %v)", k, i, n, h, ns)
					return st
				}
				j = find(pos+1, func(s state) bool { return s.deleted && s.rv == n.RV })
			}
			if j < 0 {
				t.Errorf("%s: note %d %v is not a later state of the history %v (notes %v)", k, i, n, h, ns)
				return st
			}
			pos = j
		}
		if rv, ok := final[k]; ok {
			if !present() || h[pos].rv != rv {
				t.Errorf("%s: handler ended at %v, source at %s (notes %v)", k, h[pos], rv, ns)
			}
		} else if present() {
			t.Errorf("%s: handler ended with the key present, source deleted it (history %v, notes %v)", k, h, ns)
		}
	}
	for k, rv := range final {
		if _, ok := seen[k]; !ok {
			t.Errorf("%s@%s: in the source, never reached the handler", k, rv)
		}
	}
	return st
}
