package cache_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/internal/proptest"
)

// TestSharedInformerProperty runs the random histories of
// TestInformerProperty through a SharedIndexInformer while handlers join,
// leave, stall and resume at random, and checks, once the source is quiet:
//   - the cache equals the source;
//   - for every handler and key, the states it saw are a subsequence of the
//     source's history for that key (merging may skip states, never reorder
//     or invent them), with adds only of keys it does not hold and updates
//     and deletes only of keys it does, each update starting from the state
//     it last saw;
//   - every handler still registered ends holding exactly the source's
//     state.
//
// A failing seed is printed; LISTWATCH_SEED=N replays just that one.
func TestSharedInformerProperty(t *testing.T) {
	var joins, stalls, leaves int
	seeds := proptest.ForEachSeed(t, 1000, func(t *testing.T, seed uint64) {
		st := runSharedHistory(t, seed)
		joins += st.joins
		stalls += st.stalls
		leaves += st.leaves
	})
	if joins == 0 || stalls == 0 || leaves == 0 {
		t.Errorf("the generator does not cover late joins (%d), stalls (%d) and leaves (%d)", joins, stalls, leaves)
	}
	t.Logf("%d histories: %d late joins, %d stalls, %d leaves", seeds, joins, stalls, leaves)
}

type sharedStats struct{ joins, stalls, leaves int }

// stallable records notifications and, while stalled, blocks in each call.
type stallable struct {
	recorder
	gateMu sync.Mutex
	gate   chan struct{} // nil when not stalled
	reg    *cache.Registration[*corev1.Pod]
	left   bool
}

func (s *stallable) wait() {
	s.gateMu.Lock()
	g := s.gate
	s.gateMu.Unlock()
	if g != nil {
		<-g
	}
}

func (s *stallable) stall() {
	s.gateMu.Lock()
	defer s.gateMu.Unlock()
	if s.gate == nil {
		s.gate = make(chan struct{})
	}
}

func (s *stallable) resume() {
	s.gateMu.Lock()
	defer s.gateMu.Unlock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
}

func (s *stallable) OnAdd(p *corev1.Pod, initial bool) { s.wait(); s.recorder.OnAdd(p, initial) }
func (s *stallable) OnUpdate(old, p *corev1.Pod)       { s.wait(); s.recorder.OnUpdate(old, p) }
func (s *stallable) OnDelete(p *corev1.Pod, unk bool)  { s.wait(); s.recorder.OnDelete(p, unk) }

func runSharedHistory(t *testing.T, seed uint64) sharedStats {
	var st sharedStats
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

	var resync time.Duration
	if rng.IntN(2) == 0 {
		resync = time.Duration(10+rng.IntN(50)) * time.Second
	}
	inf := cache.NewSharedIndexInformer[*corev1.Pod](src, cache.SharedInformerOptions{
		ResyncPeriod: resync,
		Reflector: cache.ReflectorOptions{
			Logger:            quiet,
			WatchErrorHandler: func(context.Context, error) {},
			DisableWatchList:  rng.IntN(4) != 0,
		},
	})
	var handlers []*stallable
	join := func() {
		h := &stallable{}
		period := time.Duration(0)
		if rng.IntN(2) == 0 {
			period = time.Duration(1+rng.IntN(90)) * time.Second
		}
		reg, err := inf.AddEventHandlerWithResyncPeriod(h, period)
		if err != nil {
			t.Fatal(err)
		}
		h.reg = reg
		handlers = append(handlers, h)
	}
	for range 1 + rng.IntN(3) {
		join()
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.Run(ctx)
	}()
	defer func() {
		for _, h := range handlers {
			h.resume()
		}
		cancel()
		<-done
	}()

	boom := apierrors.NewInternalError(errors.New("injected"))
	for range 20 + rng.IntN(60) {
		switch op := rng.IntN(100); {
		case op < 40:
			write()
		case op < 45:
			src.DropWatches()
		case op < 50:
			src.SetDelay(cachetest.OpWatch, time.Second)
			src.DropWatches()
			for range 1 + rng.IntN(5) {
				write()
			}
			src.Compact(src.Revision())
			time.Sleep(2 * time.Second)
			src.SetDelay(cachetest.OpWatch, 0)
		case op < 54:
			ops := []cachetest.Op{cachetest.OpList, cachetest.OpWatch}
			src.FailNext(ops[rng.IntN(2)], 1+rng.IntN(3), boom)
			if rng.IntN(2) == 0 {
				src.BreakWatches(errors.New("connection reset"))
			}
		case op < 57:
			src.BreakWatches(errors.New("connection reset"))
		case op < 60:
			src.Bookmark()
		case op < 66:
			join()
			st.joins++
		case op < 72:
			h := handlers[rng.IntN(len(handlers))]
			if !h.left {
				h.stall()
				st.stalls++
			}
		case op < 78:
			handlers[rng.IntN(len(handlers))].resume()
		case op < 81:
			h := handlers[rng.IntN(len(handlers))]
			if !h.left {
				if err := inf.RemoveEventHandler(h.reg); err != nil {
					t.Fatalf("RemoveEventHandler: %v", err)
				}
				h.left = true
				h.resume()
				st.leaves++
			}
		default:
			time.Sleep(time.Duration(rng.IntN(3000)) * time.Millisecond)
		}
		if rng.IntN(2) == 0 {
			synctest.Wait()
		}
	}
	for _, h := range handlers {
		h.resume()
	}
	// Long enough for any backoff to end: up to six injected failures may
	// still be pending, each retried after up to a minute (the 30 s cap,
	// stretched by jitter).
	time.Sleep(10 * time.Minute)
	synctest.Wait()

	if !inf.HasSynced() {
		t.Errorf("informer never synced")
	}
	checkCacheEqualsSource(t, inf.GetIndexer(), src)
	for i, h := range handlers {
		if !h.left && !h.reg.HasSynced() {
			t.Errorf("handler %d: registration not synced", i)
		}
		checkMergedSubsequence(t, i, h.all(), src, !h.left)
	}
	return st
}

// checkMergedSubsequence checks one handler's notifications against the
// source's history (see TestSharedInformerProperty). A delete with an
// unknown final state may carry any state at or after the one the handler
// last saw: the last state the cache knew.
func checkMergedSubsequence(t *testing.T, handler int, notes []note, src *podSource, checkFinal bool) {
	t.Helper()
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
					t.Errorf("handler %d: %s: note %d %v: add of a key it holds (history %v, notes %v)", handler, k, i, n, h, ns)
					return
				}
				j = find(pos+1, func(s state) bool { return !s.deleted && s.rv == n.RV })
			case n.Op == "update":
				if !present() || h[pos].rv != n.OldRV {
					t.Errorf("handler %d: %s: note %d %v: update from a state other than the last seen (history %v, notes %v)", handler, k, i, n, h, ns)
					return
				}
				j = find(pos, func(s state) bool { return !s.deleted && s.rv == n.RV })
			case n.FinalUnkn:
				if !present() {
					t.Errorf("handler %d: %s: note %d %v: delete of a key it does not hold (history %v, notes %v)", handler, k, i, n, h, ns)
					return
				}
				at := find(pos, func(s state) bool { return !s.deleted && s.rv == n.RV })
				if at < 0 {
					t.Errorf("handler %d: %s: note %d %v: tombstone carries a state before the last seen (history %v, notes %v)", handler, k, i, n, h, ns)
					return
				}
				j = find(at+1, func(s state) bool { return s.deleted })
			default:
				if !present() {
					t.Errorf("handler %d: %s: note %d %v: delete of a key it does not hold (history %v, notes %v)", handler, k, i, n, h, ns)
					return
				}
				j = find(pos+1, func(s state) bool { return s.deleted && s.rv == n.RV })
			}
			if j < 0 {
				t.Errorf("handler %d: %s: note %d %v is not a later state of the history %v (notes %v)", handler, k, i, n, h, ns)
				return
			}
			pos = j
		}
		if !checkFinal {
			continue
		}
		if rv, ok := final[k]; ok {
			if !present() || h[pos].rv != rv {
				t.Errorf("handler %d: %s: ended at %v, source at %s (notes %v)", handler, k, h[pos], rv, ns)
			}
		} else if present() {
			t.Errorf("handler %d: %s: ended holding the key, source deleted it (history %v, notes %v)", handler, k, h, ns)
		}
	}
	if !checkFinal {
		return
	}
	for k, rv := range final {
		if _, ok := seen[k]; !ok {
			t.Errorf("handler %d: %s@%s: in the source, never reached the handler", handler, k, rv)
		}
	}
}
