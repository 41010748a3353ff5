package cache_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
)

// note is one notification a handler received.
type note struct {
	Op        string // add, update, delete
	Key       string
	RV        string
	OldRV     string
	Initial   bool
	FinalUnkn bool
}

func (n note) String() string {
	s := fmt.Sprintf("%s %s@%s", n.Op, n.Key, n.RV)
	if n.Initial {
		s += " initial"
	}
	if n.FinalUnkn {
		s += " final-state-unknown"
	}
	return s
}

// recorder is a handler that records every notification.
type recorder struct {
	mu    sync.Mutex
	notes []note
}

func key(p *corev1.Pod) string {
	k, _ := cache.MetaNamespaceKeyFunc(p)
	return k
}

func (r *recorder) add(n note) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, n)
}

func (r *recorder) OnAdd(p *corev1.Pod, initial bool) {
	r.add(note{Op: "add", Key: key(p), RV: p.ResourceVersion, Initial: initial})
}

func (r *recorder) OnUpdate(old, p *corev1.Pod) {
	r.add(note{Op: "update", Key: key(p), RV: p.ResourceVersion, OldRV: old.ResourceVersion})
}

func (r *recorder) OnDelete(p *corev1.Pod, unknown bool) {
	r.add(note{Op: "delete", Key: key(p), RV: p.ResourceVersion, FinalUnkn: unknown})
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.notes))
	for i, n := range r.notes {
		out[i] = n.String()
	}
	r.notes = nil
	return out
}

func (r *recorder) all() []note {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.notes)
}

// runInformer runs c until the test ends.
func runInformer(t *testing.T, c *cache.Controller[*corev1.Pod]) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	synctest.Wait()
	return stop
}

func TestNewIndexerInformer_ProcessSemantics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		mustCreate(t, src, "ns", "a")
		mustCreate(t, src, "ns", "b")
		rec := &recorder{}
		idx, c := cache.NewIndexerInformer[*corev1.Pod](src, rec, cache.InformerOptions{})
		if c.HasSynced() {
			t.Fatal("synced before Run")
		}
		runInformer(t, c)
		if !c.HasSynced() {
			t.Fatal("not synced after the first list was processed")
		}
		got := rec.take()
		slices.Sort(got)
		if want := []string{"add ns/a@1 initial", "add ns/b@2 initial"}; !slices.Equal(got, want) {
			t.Errorf("initial notes = %v, want %v", got, want)
		}

		// Watch events: Added → add, Modified → update, Deleted → delete.
		mustCreate(t, src, "ns", "c")
		p, _ := src.Get("ns", "a")
		p = p.DeepCopy()
		p.Labels = map[string]string{"v": "2"}
		src.Update(p)
		src.Delete("ns", "b")
		synctest.Wait()
		want := []string{"add ns/c@3", "update ns/a@4", "delete ns/b@5"}
		if got := rec.take(); !slices.Equal(got, want) {
			t.Errorf("watch notes = %v, want %v", got, want)
		}

		// A relist after history was lost: existing keys get updates
		// (Replaced), keys gone while the watch was down get deletes with
		// an unknown final state, new keys get adds.
		src.SetDelay(cachetest.OpWatch, time.Second)
		src.DropWatches()
		src.Delete("ns", "c")
		mustCreate(t, src, "ns", "d")
		src.Compact(src.Revision())
		time.Sleep(3 * time.Second)
		synctest.Wait()
		got = rec.take()
		slices.Sort(got)
		want = []string{"add ns/d@7", "delete ns/c@3 final-state-unknown", "update ns/a@4"}
		if !slices.Equal(got, want) {
			t.Errorf("relist notes = %v, want %v", got, want)
		}
		keys := idx.ListKeys()
		slices.Sort(keys)
		if !slices.Equal(keys, []string{"ns/a", "ns/d"}) {
			t.Errorf("cache keys = %v", keys)
		}
		if byNS, _ := idx.ByIndex(cache.NamespaceIndex, "ns"); len(byNS) != 2 {
			t.Errorf("namespace index has %d, want 2", len(byNS))
		}
	})
}

func TestNewInformer_ResyncReplaysCachedObjectsAsUpdates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		mustCreate(t, src, "ns", "a")
		rec := &recorder{}
		_, c := cache.NewInformer[*corev1.Pod](src, rec, cache.InformerOptions{ResyncPeriod: time.Minute})
		runInformer(t, c)
		rec.take()
		time.Sleep(61 * time.Second)
		synctest.Wait()
		if got, want := rec.take(), []string{"update ns/a@1"}; !slices.Equal(got, want) {
			t.Errorf("notes after a resync period = %v, want %v", got, want)
		}
	})
}

func TestNewInformer_TransformAppliesBeforeCaching(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		p := newPod("ns", "a")
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
		src.Create(p)
		store, c := cache.NewInformer(src, nil, cache.InformerOptions{},
			cache.WithTransform(func(p *corev1.Pod) (*corev1.Pod, error) {
				p = p.DeepCopy()
				p.ManagedFields = nil
				return p, nil
			}))
		runInformer(t, c)
		got, ok, _ := store.GetByKey("ns/a")
		if !ok || got.ManagedFields != nil {
			t.Errorf("cached %+v, want managedFields dropped", got)
		}
	})
}

func TestNewInformer_HandlerPanicIsRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		rec := &recorder{}
		store, c := cache.NewInformer[*corev1.Pod](src, cache.ResourceEventHandlerFuncs[*corev1.Pod]{
			AddFunc: func(p *corev1.Pod, initial bool) {
				if p.Name == "bad" {
					panic("handler bug")
				}
				rec.OnAdd(p, initial)
			},
		}, cache.InformerOptions{})
		runInformer(t, c)
		mustCreate(t, src, "ns", "bad")
		mustCreate(t, src, "ns", "good")
		synctest.Wait()
		if got := rec.take(); !slices.Equal(got, []string{"add ns/good@2"}) {
			t.Errorf("notes = %v", got)
		}
		if n := len(store.ListKeys()); n != 2 {
			t.Errorf("cache has %d objects, want 2", n)
		}
	})
}

func TestController_RunTwiceAndStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		_, c := cache.NewInformer[*corev1.Pod](src, nil, cache.InformerOptions{})
		stop := runInformer(t, c)
		c.Run(t.Context()) // returns at once
		if c.LastSyncResourceVersion() != "0" && c.LastSyncResourceVersion() != "" {
			t.Errorf("LastSyncResourceVersion = %q", c.LastSyncResourceVersion())
		}
		stop()
		if n := src.Watchers(); n != 0 {
			t.Errorf("%d watches open after Run returned", n)
		}
	})
}

func TestController_RetryOnErrorRequeues(t *testing.T) {
	for _, retry := range []bool{false, true} {
		t.Run(fmt.Sprintf("RetryOnError=%v", retry), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := cachetest.New[*corev1.Pod]()
				mustCreate(t, src, "ns", "a")
				var mu sync.Mutex
				calls := 0
				c := cache.NewController(cache.Config[*corev1.Pod]{
					Queue:         cache.NewDeltaFIFO(cache.DeltaFIFOOptions[*corev1.Pod]{}),
					ListerWatcher: src,
					RetryOnError:  retry,
					Reflector:     cache.ReflectorOptions{Logger: quiet},
					Process: func(key string, d cache.Deltas[*corev1.Pod], _ bool) error {
						mu.Lock()
						defer mu.Unlock()
						calls++
						if calls == 1 {
							return fmt.Errorf("transient failure for %s", key)
						}
						return nil
					},
				})
				runInformer(t, c)
				want := 1
				if retry {
					want = 2
				}
				mu.Lock()
				defer mu.Unlock()
				if calls != want {
					t.Errorf("Process called %d times, want %d", calls, want)
				}
			})
		})
	}
}

func TestNewInformer_KeyFuncErrorIsReportedAndRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		mustCreate(t, src, "ns", "a")
		errs := &errLog{}
		store, c := cache.NewInformer(src, nil, cache.InformerOptions{Reflector: cache.ReflectorOptions{WatchErrorHandler: errs.handle, DisableWatchList: true}},
			cache.WithKeyFunc(func(p *corev1.Pod) (string, error) {
				if p.Labels["unkeyable"] != "" {
					return "", fmt.Errorf("cannot key %s", p.Name)
				}
				return cache.MetaNamespaceKeyFunc(p)
			}))
		runInformer(t, c)
		bad := newPod("ns", "b")
		bad.Labels = map[string]string{"unkeyable": "yes"}
		if _, err := src.Create(bad); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := errs.all(); len(got) != 1 {
			t.Fatalf("handler errors = %v, want one for the key func", got)
		}
		if keys := store.ListKeys(); len(keys) != 1 {
			t.Errorf("cache = %v, want only ns/a", keys)
		}

		// The watch is retried after the backoff, from before the event it
		// could not apply, so the failure repeats while the source has it.
		time.Sleep(2 * time.Second)
		synctest.Wait()
		watches := src.Requests(cachetest.OpWatch)
		if len(watches) < 2 || watches[len(watches)-1].ResourceVersion != "1" {
			t.Fatalf("watches = %+v, want a retry from resourceVersion 1", watches)
		}
		if got := errs.all(); len(got) < 2 {
			t.Errorf("handler errors = %v, want the retry's failure reported too", got)
		}

		// The object is fixed and the bad write compacted away: the next
		// retry is refused as expired, relists and the cache comes right.
		update(t, src, "ns", "b", "fixed")
		src.Compact(src.Revision())
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		mustCreate(t, src, "ns", "c")
		synctest.Wait()
		if n := src.ListCalls(); n != 2 {
			t.Errorf("list calls = %d, want a relist", n)
		}
		keys := store.ListKeys()
		slices.Sort(keys)
		if !slices.Equal(keys, []string{"ns/a", "ns/b", "ns/c"}) {
			t.Errorf("cache = %v, want ns/a, ns/b, ns/c", keys)
		}
		if p, ok, _ := store.GetByKey("ns/b"); !ok || p.Labels["unkeyable"] != "" {
			t.Errorf("ns/b in cache = %v, want the fixed object", p)
		}
	})
}
