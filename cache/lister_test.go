package cache_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
)

func labelled(ns, name, app string) *corev1.Pod {
	p := newPod(ns, name)
	p.Labels = map[string]string{"app": app}
	return p
}

func names(ps []*corev1.Pod) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = key(p)
	}
	slices.Sort(out)
	return out
}

func TestLister(t *testing.T) {
	// The label index deliberately leaves out "b/skip", so a list that
	// returns it did not use the index.
	appIndex := func(p *corev1.Pod) ([]string, error) {
		if p.Name == "skip" {
			return nil, nil
		}
		return cache.LabelIndexFunc[*corev1.Pod]("app")(p)
	}
	for _, withIndex := range []bool{false, true} {
		idx := cache.NewIndexer[*corev1.Pod](nil, nil)
		if withIndex {
			idx.AddIndexers(cache.Indexers[*corev1.Pod]{cache.LabelIndexName("app"): appIndex})
		}
		for _, p := range []*corev1.Pod{labelled("a", "web1", "web"), labelled("a", "db", "db"), labelled("b", "web2", "web"), labelled("b", "skip", "web")} {
			idx.Add(p)
		}
		l := cache.NewLister(idx, schema.GroupResource{Resource: "pods"})
		webInB := []string{"b/skip", "b/web2"}
		allWeb := []string{"a/web1", "b/skip", "b/web2"}
		if withIndex {
			webInB = []string{"b/web2"}
			allWeb = []string{"a/web1", "b/web2"}
		}
		tests := []struct {
			name string
			list func() ([]*corev1.Pod, error)
			want []string
		}{
			{"everything", func() ([]*corev1.Pod, error) { return l.List(labels.Everything()) }, []string{"a/db", "a/web1", "b/skip", "b/web2"}},
			{"nil selector", func() ([]*corev1.Pod, error) { return l.List(nil) }, []string{"a/db", "a/web1", "b/skip", "b/web2"}},
			{"by label", func() ([]*corev1.Pod, error) { return l.List(labels.SelectorFromSet(labels.Set{"app": "web"})) }, allWeb},
			{"namespace", func() ([]*corev1.Pod, error) { return l.Namespace("a").List(labels.Everything()) }, []string{"a/db", "a/web1"}},
			{"namespace and label", func() ([]*corev1.Pod, error) {
				return l.Namespace("b").List(labels.SelectorFromSet(labels.Set{"app": "web"}))
			}, webInB},
			{"not-equals is filtered", func() ([]*corev1.Pod, error) {
				sel, _ := labels.Parse("app!=web")
				return l.List(sel)
			}, []string{"a/db"}},
		}
		for _, tt := range tests {
			got, err := tt.list()
			if err != nil || !slices.Equal(names(got), tt.want) {
				t.Errorf("index=%v %s: %v, %v; want %v", withIndex, tt.name, names(got), err, tt.want)
			}
		}
		if p, err := l.Namespace("a").Get("db"); err != nil || p.Name != "db" {
			t.Errorf("Get a/db = %v, %v", p, err)
		}
		if _, err := l.Namespace("a").Get("nope"); !apierrors.IsNotFound(err) {
			t.Errorf("Get of a missing pod = %v, want NotFound", err)
		}
	}
}

func TestEraseUnerase(t *testing.T) {
	src := cachetest.New[*corev1.Pod]()
	mustCreate(t, src, "ns", "a")
	erased := cache.Erase[*corev1.Pod](src)
	if back := cache.Unerase[*corev1.Pod](erased); back != cache.ListerWatcher[*corev1.Pod](src) {
		t.Error("Unerase of an Erase did not give the original back")
	}
	// Through a foreign ListerWatcher[Object], items are checked.
	foreign := cache.ListWatch[cache.Object]{ListFunc: erased.List, WatchFunc: erased.Watch}
	l, err := cache.Unerase[*corev1.Pod](foreign).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != "a" {
		t.Errorf("typed list = %v, %v", l, err)
	}
	if _, err := cache.Unerase[*corev1.Service](foreign).List(context.Background(), metav1.ListOptions{}); err == nil {
		t.Error("a pod listed as a service was not an error")
	}
}
