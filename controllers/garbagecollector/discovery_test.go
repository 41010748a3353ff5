package garbagecollector

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/informers"
)

// widgets is a custom resource of the discovery tests, served only while
// the test says so.
var widgets = Resource{
	GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"},
	GVK: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, Namespaced: true,
}

// served is what the fake discovery answers, changed by the test.
type served struct {
	mu   sync.Mutex
	list []Resource
	err  error
}

func (s *served) set(err error, rs ...Resource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list, s.err = rs, err
}

func (s *served) discover(context.Context) ([]Resource, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.list), s.err
}

// TestDiscovery runs a collector that starts watching RCs alone and
// re-syncs what it watches from a discovery that the test changes, each
// change taking effect at the next resync period: RCs owned by a widget
// deleted before widgets were watched (one referencing it at another
// version than the one watched) are kept until widgets are, then
// collected; a widget no longer served stops being
// watched, its informer and every goroutine of it gone, without its
// dependents being taken for garbage; a failing discovery changes nothing.
func TestDiscovery(t *testing.T) {
	const period = time.Hour
	synctest.Test(t, func(t *testing.T) {
		disc := &served{list: []Resource{rcs}}
		e := newEnvWith(t, []Resource{rcs, widgets}, []Resource{rcs}, Options{Discover: disc.discover, ResyncPeriod: period})
		watching := func(want ...schema.GroupVersionResource) {
			t.Helper()
			got := e.gc.Watched()
			slices.SortFunc(got, func(a, b schema.GroupVersionResource) int { return cmpString(a.String(), b.String()) })
			slices.SortFunc(want, func(a, b schema.GroupVersionResource) int { return cmpString(a.String(), b.String()) })
			if !slices.Equal(got, want) {
				t.Errorf("watching %v, want %v", got, want)
			}
		}
		// An RC owned by a widget the collector does not know of yet,
		// whose owner goes before widgets are watched.
		w := e.api.create(t, widgets, newObj(widgets, "w"))
		e.api.create(t, rcs, newObj(rcs, "rc", ownerRef(w, false)))
		// Another references it at a version discovery does not prefer.
		beta := ownerRef(w, false)
		beta.APIVersion = "example.com/v1beta1"
		e.api.create(t, rcs, newObj(rcs, "rc-beta", beta))
		e.start()
		before := goleak.IgnoreCurrent()
		e.delete(widgets, "w", "")
		e.settle()
		e.mustGet(rcs, "rc") // an owner of unknown kind is never absent
		e.mustGet(rcs, "rc-beta")
		watching(rcs.GVR)

		// Served from now on; watched from the next resync on.
		disc.set(nil, rcs, widgets)
		e.settle() // two minutes, less than the period
		e.mustGet(rcs, "rc")
		watching(rcs.GVR)
		time.Sleep(period)
		e.settle()
		watching(rcs.GVR, widgets.GVR)
		for _, name := range []string{"rc", "rc-beta"} {
			if _, ok := e.api.get(rcs, name); ok {
				t.Errorf("%s, of a widget deleted before widgets were watched, is kept", name)
			}
		}

		// A widget owning an RC, while watched; then widgets are no
		// longer served, and the widget goes unseen.
		w2 := e.api.create(t, widgets, newObj(widgets, "w2"))
		e.api.create(t, rcs, newObj(rcs, "rc2", ownerRef(w2, true)))
		e.settle()
		disc.set(errors.New("discovery down"))
		time.Sleep(period)
		e.settle()
		watching(rcs.GVR, widgets.GVR) // a failed discovery changes nothing
		disc.set(nil, rcs)
		time.Sleep(period)
		e.settle()
		watching(rcs.GVR)
		if err := goleak.Find(before); err != nil {
			t.Errorf("goroutines left by the widgets' informer: %v", err)
		}
		e.delete(widgets, "w2", "")
		e.settle()
		e.mustGet(rcs, "rc2") // not watched: not known to be gone

		// Served again: the widget is found gone, its RC collected.
		disc.set(nil, rcs, widgets)
		time.Sleep(period)
		e.settle()
		watching(rcs.GVR, widgets.GVR)
		if _, ok := e.api.get(rcs, "rc2"); ok {
			t.Errorf("the RC of a widget deleted while widgets were not watched is kept once they are")
		}
		if n := e.api.informers[widgets.GVR]; n != 2 {
			t.Errorf("%d widget informers made, want 2 (one per time watched)", n)
		}
	})
}

// TestRediscover: with a resync period of an hour, a collector told that
// the served resources changed (Rediscover) watches a new resource at once,
// with no time passing, and collects the dependents of its objects
// deleted; requests made together make at most two discoveries (the one
// under way and one after it); a resource no
// longer served is dropped the same way.
func TestRediscover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		disc := &served{list: []Resource{rcs}}
		var calls atomic.Int32
		count := func(ctx context.Context) ([]Resource, error) {
			calls.Add(1)
			return disc.discover(ctx)
		}
		e := newEnvWith(t, []Resource{rcs, widgets}, []Resource{rcs}, Options{Discover: count, ResyncPeriod: time.Hour})
		e.start()
		w := e.api.create(t, widgets, newObj(widgets, "w"))
		e.api.create(t, rcs, newObj(rcs, "rc", ownerRef(w, false)))
		synctest.Wait()

		steps := []struct {
			name   string
			served []Resource
			kicks  int
			want   []schema.GroupVersionResource
		}{
			{"widgets served", []Resource{rcs, widgets}, 10, []schema.GroupVersionResource{rcs.GVR, widgets.GVR}},
			{"widgets no longer served", []Resource{rcs}, 1, []schema.GroupVersionResource{rcs.GVR}},
		}
		for _, step := range steps {
			synctest.Wait() // the discovery made again after a step's ends
			disc.set(nil, step.served...)
			before, start := calls.Load(), time.Now()
			for range step.kicks {
				e.gc.Rediscover()
			}
			synctest.Wait()
			if d := time.Since(start); d != 0 {
				t.Errorf("%s: %v passed", step.name, d)
			}
			if n := calls.Load() - before; n < 1 || n > 2 {
				t.Errorf("%s: %d discoveries for %d requests, want 1 or 2", step.name, n, step.kicks)
			}
			got := e.gc.Watched()
			slices.SortFunc(got, func(a, b schema.GroupVersionResource) int { return cmpString(a.String(), b.String()) })
			if !slices.Equal(got, step.want) {
				t.Errorf("%s: watching %v, want %v", step.name, got, step.want)
			}
			if step.name == "widgets served" {
				// The widget's deletion is seen: its RC is collected.
				e.delete(widgets, "w", "")
				e.settle()
				if _, ok := e.api.get(rcs, "rc"); ok {
					t.Errorf("the RC of a deleted widget is kept")
				}
			}
		}
	})
}

// TestRediscoverAgain: a resource served only a moment after the change
// that asked for a discovery (the API server serves a definition once its
// Established status is stored) is watched by the discovery made again
// rediscoverAgain later, though the resync period is an hour.
func TestRediscoverAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		disc := &served{list: []Resource{rcs}}
		e := newEnvWith(t, []Resource{rcs, widgets}, []Resource{rcs}, Options{Discover: disc.discover, ResyncPeriod: time.Hour})
		e.start()
		e.gc.Rediscover()
		synctest.Wait()
		disc.set(nil, rcs, widgets)
		time.Sleep(rediscoverAgain)
		synctest.Wait()
		got := e.gc.Watched()
		if !slices.Contains(got, widgets.GVR) {
			t.Errorf("watching %v, want widgets too", got)
		}
	})
}

// TestResync_ReplacesAndValidates checks what a resync makes of what
// discovery names: a resource whose kind changed under the same GVR is
// replaced, a resource without a kind is ignored, a kind named twice is
// watched once.
func TestResync_ReplacesAndValidates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		renamed := widgets
		renamed.GVK.Kind = "Gizmo"
		twice := widgets
		twice.GVR.Resource = "widgets2"
		noKind := Resource{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "nokind"}}
		disc := &served{}
		e := newEnvWith(t, []Resource{rcs, widgets}, []Resource{rcs, widgets}, Options{Discover: disc.discover})
		e.start()
		for _, step := range []struct {
			served []Resource
			want   map[schema.GroupVersionResource]schema.GroupVersionKind
		}{
			{[]Resource{rcs, widgets, twice, noKind}, map[schema.GroupVersionResource]schema.GroupVersionKind{rcs.GVR: rcs.GVK, widgets.GVR: widgets.GVK}},
			{[]Resource{rcs, renamed}, map[schema.GroupVersionResource]schema.GroupVersionKind{rcs.GVR: rcs.GVK, widgets.GVR: renamed.GVK}},
			{nil, map[schema.GroupVersionResource]schema.GroupVersionKind{}},
		} {
			disc.set(nil, step.served...)
			if err := e.gc.resync(t.Context()); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			got := map[schema.GroupVersionResource]schema.GroupVersionKind{}
			e.gc.mu.RLock()
			for gvr, m := range e.gc.monitors {
				got[gvr] = m.res.GVK
			}
			if len(e.gc.byGVK) != len(got) {
				t.Errorf("%d kinds located, %d resources watched", len(e.gc.byGVK), len(got))
			}
			e.gc.mu.RUnlock()
			if len(got) != len(step.want) {
				t.Errorf("watching %v, want %v", got, step.want)
			}
			for gvr, gvk := range step.want {
				if got[gvr] != gvk {
					t.Errorf("%s watched as %v, want %v", gvr, got[gvr], gvk)
				}
			}
		}
	})
}

// newEnvWith is newEnv with a fake API serving all, a collector watching
// initial at first, and opts.
func newEnvWith(t testing.TB, all, initial []Resource, opts Options) *env {
	api := newFakeAPI(all)
	e := &env{t: t, api: api, client: &gcClient{api: api}}
	e.factory = informers.NewSharedInformerFactory(api, informers.Options{Reflector: cache.ReflectorOptions{Logger: quiet}})
	opts.Controller = controller.Options{Workers: 3, Logger: quiet}
	gc, err := New(e.factory, e.client, initial, opts)
	if err != nil {
		t.Fatal(err)
	}
	e.gc = gc
	return e
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestVirtualOwnerNeverShown is kubernetes/kubernetes#56121: an owner
// created and deleted while its informer is not watching is never shown
// by it, so the node its dependent's reference made stays virtual; the
// collector, having found it present once, looks again until it is gone,
// and then collects the dependent.
func TestVirtualOwnerNeverShown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, testResources)
		e.start()
		e.whileNotWatching(rcs, func() {
			rc := e.api.create(t, rcs, newObj(rcs, "rc"))
			e.api.create(t, pods, newObj(pods, "p", ownerRef(rc, false)))
			// The pod's informer shows it; its owner is found present.
			time.Sleep(time.Second)
			synctest.Wait()
			e.mustGet(pods, "p")
			e.delete(rcs, "rc", metav1.DeletePropagationBackground)
		})
		e.settle()
		if _, ok := e.api.get(pods, "p"); ok {
			t.Errorf("the pod of an owner its informer never showed is kept")
		}
	})
}
