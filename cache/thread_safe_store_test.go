package cache

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Index functions the tests use.

// appIndex files a pod under its "app" label, if it has one.
func appIndex(p *corev1.Pod) ([]string, error) {
	if v, ok := p.Labels["app"]; ok {
		return []string{v}, nil
	}
	return nil, nil
}

// labelsIndex files a pod under every "key=value" label pair it has: a
// multi-valued index.
func labelsIndex(p *corev1.Pod) ([]string, error) {
	out := make([]string, 0, len(p.Labels))
	for k, v := range p.Labels {
		out = append(out, k+"="+v)
	}
	return out, nil
}

// tagsIndex files a pod under each "."-separated word of its "tags" label,
// duplicates included, so one key can be filed twice under one value.
func tagsIndex(p *corev1.Pod) ([]string, error) {
	v, ok := p.Labels["tags"]
	if !ok || v == "" {
		return nil, nil
	}
	return strings.Split(v, "."), nil
}

var errBadPod = errors.New("pod labelled bad")

// strictIndex fails on a pod labelled bad=true.
func strictIndex(p *corev1.Pod) ([]string, error) {
	if p.Labels["bad"] == "true" {
		return nil, errBadPod
	}
	return []string{p.Labels["tier"]}, nil
}

// nameKey keys pods by name only, so that one key can move between
// namespaces and exercise the namespace index on Update.
func nameKey(p *corev1.Pod) (string, error) {
	if p.Name == "" {
		return "", ErrNoName
	}
	return p.Name, nil
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// objKeys returns the sorted MetaNamespaceKeyFunc keys of objs.
func objKeys[T Object](t testing.TB, objs []T) []string {
	t.Helper()
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		k, err := metaKey(o)
		if err != nil {
			t.Fatalf("key: %v", err)
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func eqStrings(t testing.TB, what string, got, want []string) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got  %q\n want %q", what, got, want)
	}
}

func mustAdd[T Object](t testing.TB, s Store[T], objs ...T) {
	t.Helper()
	for _, o := range objs {
		if err := s.Add(o); err != nil {
			t.Fatalf("Add: %v", err)
		}
	}
}

func mustByIndex[T Object](t testing.TB, s Indexer[T], name, value string) []string {
	t.Helper()
	objs, err := s.ByIndex(name, value)
	if err != nil {
		t.Fatalf("ByIndex(%q, %q): %v", name, value, err)
	}
	return objKeys(t, objs)
}

func mustIndexKeys[T Object](t testing.TB, s Indexer[T], name, value string) []string {
	t.Helper()
	keys, err := s.IndexKeys(name, value)
	if err != nil {
		t.Fatalf("IndexKeys(%q, %q): %v", name, value, err)
	}
	return sorted(keys)
}

// recomputeIndices builds, from List() alone, what every index should hold.
func recomputeIndices[T Object](t testing.TB, s Indexer[T]) map[string]map[string][]string {
	t.Helper()
	out := map[string]map[string][]string{}
	keyFn := s.(*threadSafeStore[T]).keyFunc
	objs := s.List()
	for name, fn := range s.GetIndexers() {
		idx := map[string][]string{}
		for _, obj := range objs {
			key, err := keyFn(obj)
			if err != nil {
				t.Fatalf("key of stored object: %v", err)
			}
			vals, err := fn(obj)
			if err != nil {
				t.Fatalf("index %q of stored %q: %v", name, key, err)
			}
			for _, v := range vals {
				if !slices.Contains(idx[v], key) {
					idx[v] = append(idx[v], key)
				}
			}
		}
		for v := range idx {
			slices.Sort(idx[v])
		}
		out[name] = idx
	}
	return out
}

// checkIndices verifies that every index of s is exactly what recomputing
// it from List() gives, through the public API and in the internal maps (no
// empty value set anywhere).
func checkIndices[T Object](t testing.TB, s Indexer[T]) {
	t.Helper()
	checkIndicesAgainst(t, s, recomputeIndices(t, s))
}

func checkIndicesAgainst[T Object](t testing.TB, s Indexer[T], want map[string]map[string][]string) {
	t.Helper()
	for name, idx := range want {
		eqStrings(t, "values of index "+name, sorted(s.ListIndexFuncValues(name)), sorted(slices.Collect(maps.Keys(idx))))
		for v, keys := range idx {
			if got := mustIndexKeys(t, s, name, v); !slices.Equal(got, keys) {
				t.Fatalf("IndexKeys(%q, %q):\n got  %q\n want %q", name, v, got, keys)
			}
			objs, err := s.ByIndex(name, v)
			if err != nil || len(objs) != len(keys) {
				t.Fatalf("ByIndex(%q, %q) = %d objects, %v; want %d", name, v, len(objs), err, len(keys))
			}
		}
	}
	ts := s.(*threadSafeStore[T])
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	all := map[string]index{}
	if ts.nsIndex {
		// The namespace index keeps key lists: each key once, at the
		// position its entry records.
		nsSets := index{}
		for ns, keys := range ts.ns {
			for i, k := range *keys {
				if e, ok := ts.items[k]; ok && int(e.nsPos) != i {
					t.Fatalf("namespace %q: key %q at position %d records position %d", ns, k, i, e.nsPos)
				}
				if _, dup := nsSets[ns][k]; dup {
					t.Fatalf("namespace %q lists key %q twice", ns, k)
				}
				nsSets.add(ns, k)
			}
			if len(*keys) == 0 {
				nsSets[ns] = map[string]struct{}{}
			}
		}
		all[NamespaceIndex] = nsSets
	}
	for _, ix := range ts.user {
		all[ix.name] = ix.idx
	}
	for name, idx := range all {
		for v, set := range idx {
			if len(set) == 0 {
				t.Fatalf("index %q keeps an empty set for value %q", name, v)
			}
			for k := range set {
				if _, ok := ts.items[k]; !ok {
					t.Fatalf("index %q value %q files key %q that is not stored", name, v, k)
				}
			}
		}
		if len(idx) != len(want[name]) {
			t.Fatalf("index %q has %d values, want %d", name, len(idx), len(want[name]))
		}
	}
}

// --- Store ---

func TestStore_AddGetUpdateDelete(t *testing.T) {
	s := NewStore[*corev1.Pod](nil)
	v1 := testPodRV("ns", "p", "1")
	if err := s.Add(v1); err != nil {
		t.Fatalf("Add: %v", err)
	}
	if got, ok, err := s.Get(testPod("ns", "p")); err != nil || !ok || got != v1 {
		t.Fatalf("Get = %v, %v, %v; want v1", got, ok, err)
	}
	v2 := testPodRV("ns", "p", "2")
	if err := s.Update(v2); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if got, ok, err := s.GetByKey("ns/p"); err != nil || !ok || got != v2 {
		t.Fatalf("GetByKey after Update = %v, %v, %v; want v2", got, ok, err)
	}
	if n := len(s.List()); n != 1 {
		t.Fatalf("List has %d objects after Add+Update of one key, want 1", n)
	}
	// Delete needs only the key: a different object with the same key works.
	if err := s.Delete(testPod("ns", "p")); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, ok, err := s.GetByKey("ns/p"); ok || err != nil {
		t.Fatalf("GetByKey after Delete = %v, %v; want absent", ok, err)
	}
}

func TestStore_AddOfExistingKeyReplaces(t *testing.T) {
	s := NewStore[*corev1.Pod](nil)
	v1, v2 := testPodRV("ns", "p", "1"), testPodRV("ns", "p", "2")
	mustAdd(t, s, v1, v2)
	if got, _, _ := s.GetByKey("ns/p"); got != v2 {
		t.Fatalf("second Add did not replace: got rv %s", got.ResourceVersion)
	}
	eqStrings(t, "keys", s.ListKeys(), []string{"ns/p"})
}

func TestStore_GetOfMissing(t *testing.T) {
	s := NewStore[*corev1.Pod](nil)
	if got, ok, err := s.GetByKey("ns/none"); ok || err != nil || got != nil {
		t.Fatalf("GetByKey(missing) = %v, %v, %v; want nil, false, nil", got, ok, err)
	}
	if got, ok, err := s.Get(testPod("ns", "none")); ok || err != nil || got != nil {
		t.Fatalf("Get(missing) = %v, %v, %v; want nil, false, nil", got, ok, err)
	}
}

func TestStore_DeleteOfMissingIsANoop(t *testing.T) {
	s := NewIndexer[*corev1.Pod](nil, Indexers[*corev1.Pod]{"app": appIndex})
	mustAdd(t, s, testPod("ns", "a", "app=x"))
	if err := s.Delete(testPod("ns", "b", "app=x")); err != nil {
		t.Fatalf("Delete(missing): %v", err)
	}
	eqStrings(t, "keys", s.ListKeys(), []string{"ns/a"})
	eqStrings(t, "app=x", mustIndexKeys(t, s, "app", "x"), []string{"ns/a"})
}

func TestStore_ListAndListKeys(t *testing.T) {
	s := NewStore[*corev1.Pod](nil)
	eqStrings(t, "empty ListKeys", s.ListKeys(), nil)
	if l := s.List(); len(l) != 0 {
		t.Fatalf("empty List = %v", l)
	}
	pods := []*corev1.Pod{testPod("a", "1"), testPod("a", "2"), testPod("b", "1"), testPod("", "cluster")}
	mustAdd(t, s, pods...)
	want := []string{"a/1", "a/2", "b/1", "cluster"}
	eqStrings(t, "ListKeys", sorted(s.ListKeys()), want)
	eqStrings(t, "List", objKeys(t, s.List()), want)
}

func TestStore_ReplaceSwapsWholeContent(t *testing.T) {
	s := NewStore[*corev1.Pod](nil)
	mustAdd(t, s, testPod("ns", "old1"), testPod("ns", "old2"), testPodRV("ns", "kept", "1"))
	kept := testPodRV("ns", "kept", "2")
	if err := s.Replace([]*corev1.Pod{kept, testPod("ns", "new")}, "42"); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	eqStrings(t, "keys", sorted(s.ListKeys()), []string{"ns/kept", "ns/new"})
	if got, _, _ := s.GetByKey("ns/kept"); got != kept {
		t.Fatalf("kept = rv %s, want the listed version", got.ResourceVersion)
	}
	if err := s.Replace(nil, ""); err != nil {
		t.Fatalf("Replace(nil): %v", err)
	}
	eqStrings(t, "keys after Replace(nil)", s.ListKeys(), nil)
}

func TestStore_ReplaceWithDuplicateKeysKeepsLast(t *testing.T) {
	s := NewIndexer[*corev1.Pod](nil, Indexers[*corev1.Pod]{"app": appIndex})
	a, b := testPod("ns", "p", "app=a"), testPod("ns", "p", "app=b")
	if err := s.Replace([]*corev1.Pod{a, b}, "1"); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	if got, _, _ := s.GetByKey("ns/p"); got != b {
		t.Fatalf("Replace kept the first of two duplicates")
	}
	eqStrings(t, "app values", sorted(s.ListIndexFuncValues("app")), []string{"b"})
	checkIndices(t, s)
}

func TestStore_ReplaceWithUnkeyableObjectLeavesStoreUnchanged(t *testing.T) {
	s := NewStore[*corev1.Pod](nil)
	mustAdd(t, s, testPod("ns", "a"))
	for _, tc := range []struct {
		name string
		list []*corev1.Pod
	}{
		{"nameless", []*corev1.Pod{testPod("ns", "b"), testPod("ns", "")}},
		{"nil", []*corev1.Pod{testPod("ns", "b"), nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.Replace(tc.list, "1"); err == nil {
				t.Fatalf("Replace succeeded")
			}
			eqStrings(t, "keys", s.ListKeys(), []string{"ns/a"})
		})
	}
}

func TestStore_KeyFuncErrors(t *testing.T) {
	errKey := errors.New("no key for you")
	failing := func(p *corev1.Pod) (string, error) { return "", errKey }
	for _, tc := range []struct {
		name    string
		keyFunc KeyFunc[*corev1.Pod]
		obj     *corev1.Pod
		want    error
	}{
		{"nameless pod", nil, testPod("ns", ""), ErrNoName},
		{"typed nil pod", nil, nil, ErrNoName},
		{"failing key func", failing, testPod("ns", "p"), errKey},
		{"nil pod with custom key func", failing, nil, ErrNoName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewIndexer(tc.keyFunc, Indexers[*corev1.Pod]{"app": appIndex})
			ops := map[string]func() error{
				"Add":    func() error { return s.Add(tc.obj) },
				"Update": func() error { return s.Update(tc.obj) },
				"Delete": func() error { return s.Delete(tc.obj) },
				"Get":    func() error { _, _, err := s.Get(tc.obj); return err },
				"Replace": func() error {
					return s.Replace([]*corev1.Pod{tc.obj}, "1")
				},
			}
			for op, f := range ops {
				if err := f(); !errors.Is(err, tc.want) {
					t.Errorf("%s = %v, want %v", op, err, tc.want)
				}
			}
			if keys := s.ListKeys(); len(keys) != 0 {
				t.Fatalf("store holds %q after failed operations", keys)
			}
			checkIndices(t, s)
		})
	}
}

func TestStore_NilObjectsAreErrorsNotPanics(t *testing.T) {
	s := NewIndexer[*corev1.Pod](nil, Indexers[*corev1.Pod]{"app": appIndex})
	mustAdd(t, s, testPod("ns", "a", "app=x"))
	var nilPod *corev1.Pod
	if _, err := s.Index("app", nilPod); !errors.Is(err, ErrNoName) {
		t.Fatalf("Index(nil) = %v, want ErrNoName", err)
	}
	if _, _, err := s.(*threadSafeStore[*corev1.Pod]).put("ns/a", nilPod); !errors.Is(err, ErrNoName) {
		t.Fatalf("put(nil) = %v, want ErrNoName", err)
	}
	if got, ok, _ := s.GetByKey("ns/a"); !ok || got == nil {
		t.Fatalf("put(nil) changed the stored object")
	}
}

func TestStore_CustomKeyFunc(t *testing.T) {
	s := NewStore(nameKey)
	mustAdd(t, s, testPod("a", "p"), testPod("b", "p"))
	eqStrings(t, "keys", s.ListKeys(), []string{"p"})
	if got, _, _ := s.GetByKey("p"); got.Namespace != "b" {
		t.Fatalf("GetByKey(p) namespace = %q, want b (the later Add)", got.Namespace)
	}
}

func TestStore_ResyncIsANoop(t *testing.T) {
	s := NewStore[*corev1.Pod](nil)
	mustAdd(t, s, testPod("ns", "a"))
	if err := s.Resync(); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	eqStrings(t, "keys", s.ListKeys(), []string{"ns/a"})
}

func TestStore_PlainStoreHasNoNamespaceIndex(t *testing.T) {
	s := NewStore[*corev1.Pod](nil)
	mustAdd(t, s, testPod("ns", "a"))
	ix := s.(Indexer[*corev1.Pod])
	if _, err := ix.ByIndex(NamespaceIndex, "ns"); err == nil {
		t.Fatalf("a plain Store answered ByIndex(namespace)")
	}
	if len(ix.GetIndexers()) != 0 {
		t.Fatalf("a plain Store has indexers %v", slices.Collect(maps.Keys(ix.GetIndexers())))
	}
}

func TestStore_PutReturnsReplacedObject(t *testing.T) {
	s := newThreadSafeStore[*corev1.Pod](nil, nil, true)
	v1, v2 := testPodRV("ns", "p", "1"), testPodRV("ns", "p", "2")
	if old, had, err := s.put("ns/p", v1); err != nil || had || old != nil {
		t.Fatalf("first put = %v, %v, %v; want nothing replaced", old, had, err)
	}
	if old, had, err := s.put("ns/p", v2); err != nil || !had || old != v1 {
		t.Fatalf("second put = %v, %v, %v; want v1 replaced", old, had, err)
	}
}

func TestStore_Unstructured(t *testing.T) {
	mk := func(ns, name, color string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("example.com/v1")
		u.SetKind("Widget")
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetLabels(map[string]string{"color": color})
		return u
	}
	colorIndex := func(u *unstructured.Unstructured) ([]string, error) {
		return []string{u.GetLabels()["color"]}, nil
	}
	s := NewIndexer(nil, Indexers[*unstructured.Unstructured]{"color": colorIndex})
	mustAdd(t, s, mk("a", "w1", "red"), mk("a", "w2", "blue"), mk("", "global", "red"))
	eqStrings(t, "red", mustByIndex(t, s, "color", "red"), []string{"a/w1", "global"})
	eqStrings(t, "namespace a", mustByIndex(t, s, NamespaceIndex, "a"), []string{"a/w1", "a/w2"})
	eqStrings(t, "cluster-scoped", mustByIndex(t, s, NamespaceIndex, ""), []string{"global"})
	if err := s.Update(mk("a", "w1", "green")); err != nil {
		t.Fatalf("Update: %v", err)
	}
	eqStrings(t, "colors", sorted(s.ListIndexFuncValues("color")), []string{"blue", "green", "red"})
	var nilU *unstructured.Unstructured
	if err := s.Add(nilU); !errors.Is(err, ErrNoName) {
		t.Fatalf("Add(nil unstructured) = %v, want ErrNoName", err)
	}
	if err := s.Delete(mk("", "global", "red")); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	eqStrings(t, "colors after delete", sorted(s.ListIndexFuncValues("color")), []string{"blue", "green"})
	checkIndices(t, s)
}

// --- Indexer ---

func podIndexer(t testing.TB) Indexer[*corev1.Pod] {
	t.Helper()
	s := NewIndexer[*corev1.Pod](nil, Indexers[*corev1.Pod]{"app": appIndex, "labels": labelsIndex})
	mustAdd(t, s,
		testPod("ns1", "web-1", "app=web", "tier=front"),
		testPod("ns1", "web-2", "app=web", "tier=front"),
		testPod("ns2", "db-1", "app=db", "tier=back"),
		testPod("ns2", "plain"),
	)
	return s
}

func TestIndexer_ByIndex(t *testing.T) {
	s := podIndexer(t)
	for _, tc := range []struct {
		index, value string
		want         []string
	}{
		{"app", "web", []string{"ns1/web-1", "ns1/web-2"}},
		{"app", "db", []string{"ns2/db-1"}},
		{"app", "none", nil},
		{"labels", "tier=front", []string{"ns1/web-1", "ns1/web-2"}},
		{"labels", "app=db", []string{"ns2/db-1"}},
		{NamespaceIndex, "ns2", []string{"ns2/db-1", "ns2/plain"}},
		{NamespaceIndex, "ns3", nil},
	} {
		t.Run(tc.index+"/"+tc.value, func(t *testing.T) {
			eqStrings(t, "ByIndex", mustByIndex(t, s, tc.index, tc.value), tc.want)
		})
	}
}

func TestIndexer_IndexKeys(t *testing.T) {
	s := podIndexer(t)
	for _, tc := range []struct {
		index, value string
		want         []string
	}{
		{"app", "web", []string{"ns1/web-1", "ns1/web-2"}},
		{"labels", "tier=back", []string{"ns2/db-1"}},
		{NamespaceIndex, "ns1", []string{"ns1/web-1", "ns1/web-2"}},
		{"app", "", nil},
	} {
		t.Run(tc.index+"/"+tc.value, func(t *testing.T) {
			eqStrings(t, "IndexKeys", mustIndexKeys(t, s, tc.index, tc.value), tc.want)
		})
	}
}

func TestIndexer_ListIndexFuncValues(t *testing.T) {
	s := podIndexer(t)
	for _, tc := range []struct {
		index string
		want  []string
	}{
		{"app", []string{"db", "web"}},
		{"labels", []string{"app=db", "app=web", "tier=back", "tier=front"}},
		{NamespaceIndex, []string{"ns1", "ns2"}},
		{"no-such-index", nil},
	} {
		t.Run(tc.index, func(t *testing.T) {
			eqStrings(t, "values", sorted(s.ListIndexFuncValues(tc.index)), tc.want)
		})
	}
}

func TestIndexer_IndexMultiValued(t *testing.T) {
	s := podIndexer(t)
	for _, tc := range []struct {
		name  string
		index string
		obj   *corev1.Pod
		want  []string
	}{
		// Shares tier=front with the web pods and app=db with db-1; each
		// object comes back once even though web pods match no second value.
		{"union of values", "labels", testPod("x", "probe", "app=db", "tier=front"), []string{"ns1/web-1", "ns1/web-2", "ns2/db-1"}},
		// Shares both values with each web pod: still once each.
		{"no duplicates", "labels", testPod("x", "probe", "app=web", "tier=front"), []string{"ns1/web-1", "ns1/web-2"}},
		{"single value", "app", testPod("x", "probe", "app=db"), []string{"ns2/db-1"}},
		{"no values", "labels", testPod("x", "probe"), nil},
		{"namespace index", NamespaceIndex, testPod("ns2", "probe"), []string{"ns2/db-1", "ns2/plain"}},
		// The probe need not be stored, and a stored object finds itself.
		{"stored object", "app", testPod("ns1", "web-1", "app=web"), []string{"ns1/web-1", "ns1/web-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := s.Index(tc.index, tc.obj)
			if err != nil {
				t.Fatalf("Index: %v", err)
			}
			eqStrings(t, "Index", objKeys(t, objs), tc.want)
		})
	}
}

func TestIndexer_IndexWithFailingIndexFunc(t *testing.T) {
	s := NewIndexer[*corev1.Pod](nil, Indexers[*corev1.Pod]{"strict": strictIndex})
	if _, err := s.Index("strict", testPod("ns", "p", "bad=true")); !errors.Is(err, errBadPod) {
		t.Fatalf("Index with failing IndexFunc = %v, want errBadPod", err)
	}
}

func TestIndexer_UnknownIndexIsAnError(t *testing.T) {
	s := podIndexer(t)
	if _, err := s.ByIndex("nope", "x"); err == nil {
		t.Errorf("ByIndex(unknown) succeeded")
	}
	if _, err := s.IndexKeys("nope", "x"); err == nil {
		t.Errorf("IndexKeys(unknown) succeeded")
	}
	if _, err := s.Index("nope", testPod("ns1", "web-1")); err == nil {
		t.Errorf("Index(unknown) succeeded")
	}
	if v := s.ListIndexFuncValues("nope"); len(v) != 0 {
		t.Errorf("ListIndexFuncValues(unknown) = %q", v)
	}
}

func TestIndexer_UpdateRemovesStaleIndexEntries(t *testing.T) {
	s := podIndexer(t)
	// web-1 leaves app=web for app=api, keeps tier=front, drops nothing else.
	if err := s.Update(testPod("ns1", "web-1", "app=api", "tier=front")); err != nil {
		t.Fatalf("Update: %v", err)
	}
	eqStrings(t, "app=web", mustByIndex(t, s, "app", "web"), []string{"ns1/web-2"})
	eqStrings(t, "app=api", mustByIndex(t, s, "app", "api"), []string{"ns1/web-1"})
	eqStrings(t, "labels app=web", mustByIndex(t, s, "labels", "app=web"), []string{"ns1/web-2"})
	eqStrings(t, "labels tier=front", mustByIndex(t, s, "labels", "tier=front"), []string{"ns1/web-1", "ns1/web-2"})
	// An update to no labels at all removes every entry.
	if err := s.Update(testPod("ns2", "db-1")); err != nil {
		t.Fatalf("Update: %v", err)
	}
	for _, v := range []string{"app=db", "tier=back"} {
		eqStrings(t, "labels "+v, mustByIndex(t, s, "labels", v), nil)
	}
	checkIndices(t, s)
}

func TestIndexer_EmptyIndexSetsAreDropped(t *testing.T) {
	s := podIndexer(t)
	// Last object with app=db changes away: the value disappears.
	if err := s.Update(testPod("ns2", "db-1", "app=cache")); err != nil {
		t.Fatalf("Update: %v", err)
	}
	eqStrings(t, "app after update", sorted(s.ListIndexFuncValues("app")), []string{"cache", "web"})
	eqStrings(t, "labels after update", sorted(s.ListIndexFuncValues("labels")), []string{"app=cache", "app=web", "tier=front"})
	// Deleting the last objects with a value or namespace drops it too.
	for _, p := range []*corev1.Pod{testPod("ns2", "db-1"), testPod("ns2", "plain"), testPod("ns1", "web-1")} {
		if err := s.Delete(p); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	eqStrings(t, "app after deletes", sorted(s.ListIndexFuncValues("app")), []string{"web"})
	eqStrings(t, "namespaces after deletes", sorted(s.ListIndexFuncValues(NamespaceIndex)), []string{"ns1"})
	if err := s.Delete(testPod("ns1", "web-2")); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	for _, name := range []string{"app", "labels", NamespaceIndex} {
		eqStrings(t, name+" when empty", s.ListIndexFuncValues(name), nil)
	}
	checkIndices(t, s)
}

func TestIndexer_ManyUpdatesDoNotGrowIndices(t *testing.T) {
	s := NewIndexer[*corev1.Pod](nil, Indexers[*corev1.Pod]{"labels": labelsIndex})
	for i := range 1000 {
		if err := s.Update(testPod("ns", "p", "gen="+strconv.Itoa(i))); err != nil {
			t.Fatalf("Update: %v", err)
		}
	}
	eqStrings(t, "values", s.ListIndexFuncValues("labels"), []string{"gen=999"})
	checkIndices(t, s)
}

func TestIndexer_DuplicateValuesFromOneObject(t *testing.T) {
	s := NewIndexer[*corev1.Pod](nil, Indexers[*corev1.Pod]{"tags": tagsIndex})
	mustAdd(t, s, testPod("ns", "p", "tags=a.a.b"))
	eqStrings(t, "a", mustByIndex(t, s, "tags", "a"), []string{"ns/p"})
	objs, _ := s.Index("tags", testPod("x", "probe", "tags=a.b.a"))
	eqStrings(t, "Index", objKeys(t, objs), []string{"ns/p"})
	if err := s.Update(testPod("ns", "p", "tags=b.b")); err != nil {
		t.Fatalf("Update: %v", err)
	}
	eqStrings(t, "values after update", sorted(s.ListIndexFuncValues("tags")), []string{"b"})
	if err := s.Delete(testPod("ns", "p")); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	eqStrings(t, "values after delete", s.ListIndexFuncValues("tags"), nil)
}

func TestIndexer_NamespaceIndexAlwaysPresent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		indexers Indexers[*corev1.Pod]
	}{
		{"nil indexers", nil},
		{"other indexers", Indexers[*corev1.Pod]{"app": appIndex}},
		// A user entry for the namespace index is ignored: the built-in wins.
		{"user namespace entry", Indexers[*corev1.Pod]{NamespaceIndex: appIndex}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewIndexer(nil, tc.indexers)
			mustAdd(t, s, testPod("a", "1", "app=x"), testPod("b", "1", "app=x"))
			eqStrings(t, "a", mustByIndex(t, s, NamespaceIndex, "a"), []string{"a/1"})
			eqStrings(t, "namespaces", sorted(s.ListIndexFuncValues(NamespaceIndex)), []string{"a", "b"})
			if _, ok := s.GetIndexers()[NamespaceIndex]; !ok {
				t.Fatalf("GetIndexers lacks the namespace index")
			}
			checkIndices(t, s)
		})
	}
}

func TestIndexer_NamespaceIndexFollowsNamespaceChange(t *testing.T) {
	// Keyed by name, the same key can move between namespaces.
	s := NewIndexer(nameKey, nil)
	mustAdd(t, s, testPod("a", "p"), testPod("a", "q"))
	if err := s.Update(testPod("b", "p")); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if keys := mustIndexKeys(t, s, NamespaceIndex, "b"); !slices.Equal(keys, []string{"p"}) {
		t.Fatalf("namespace b keys = %q", keys)
	}
	if keys := mustIndexKeys(t, s, NamespaceIndex, "a"); !slices.Equal(keys, []string{"q"}) {
		t.Fatalf("namespace a keys = %q", keys)
	}
	if err := s.Update(testPod("b", "q")); err != nil {
		t.Fatalf("Update: %v", err)
	}
	eqStrings(t, "namespaces", s.ListIndexFuncValues(NamespaceIndex), []string{"b"})
	checkIndices(t, s)
}

func TestIndexer_GetIndexers(t *testing.T) {
	s := NewIndexer[*corev1.Pod](nil, Indexers[*corev1.Pod]{"app": appIndex, "skipped": nil})
	got := sorted(slices.Collect(maps.Keys(s.GetIndexers())))
	eqStrings(t, "indexers", got, []string{"app", NamespaceIndex})
	// The returned map is a copy: changing it changes nothing.
	s.GetIndexers()["extra"] = labelsIndex
	if _, ok := s.GetIndexers()["extra"]; ok {
		t.Fatalf("GetIndexers returned the store's own map")
	}
}

func TestIndexer_NilIndexFuncInNewIndexerIsSkipped(t *testing.T) {
	s := NewIndexer[*corev1.Pod](nil, Indexers[*corev1.Pod]{"nil": nil})
	mustAdd(t, s, testPod("ns", "p"))
	if _, err := s.ByIndex("nil", "x"); err == nil {
		t.Fatalf("an index with a nil IndexFunc exists")
	}
	// So the name is free for AddIndexers.
	if err := s.AddIndexers(Indexers[*corev1.Pod]{"nil": appIndex}); err != nil {
		t.Fatalf("AddIndexers: %v", err)
	}
}

func TestIndexer_AddIndexersAfterFillBuildsFromExistingContent(t *testing.T) {
	s := NewIndexer[*corev1.Pod](nil, nil)
	mustAdd(t, s, testPod("a", "1", "app=web"), testPod("a", "2", "app=db"), testPod("b", "3", "app=web"))
	if err := s.AddIndexers(Indexers[*corev1.Pod]{"app": appIndex, "labels": labelsIndex}); err != nil {
		t.Fatalf("AddIndexers: %v", err)
	}
	eqStrings(t, "app=web", mustByIndex(t, s, "app", "web"), []string{"a/1", "b/3"})
	eqStrings(t, "labels", sorted(s.ListIndexFuncValues("labels")), []string{"app=db", "app=web"})
	// And the new index is maintained from then on.
	if err := s.Update(testPod("a", "2", "app=web")); err != nil {
		t.Fatalf("Update: %v", err)
	}
	eqStrings(t, "app after update", s.ListIndexFuncValues("app"), []string{"web"})
	mustAdd(t, s, testPod("c", "4", "app=web"))
	eqStrings(t, "app=web", mustByIndex(t, s, "app", "web"), []string{"a/1", "a/2", "b/3", "c/4"})
	checkIndices(t, s)
}

func TestIndexer_AddIndexersConflictIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		added Indexers[*corev1.Pod]
	}{
		{"user index", Indexers[*corev1.Pod]{"app": labelsIndex}},
		{"namespace index", Indexers[*corev1.Pod]{NamespaceIndex: labelsIndex}},
		// The conflict fails the whole call: "fresh" is not added either.
		{"one of several", Indexers[*corev1.Pod]{"fresh": labelsIndex, "app": labelsIndex}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewIndexer[*corev1.Pod](nil, Indexers[*corev1.Pod]{"app": appIndex})
			mustAdd(t, s, testPod("ns", "p", "app=web"))
			if err := s.AddIndexers(tc.added); err == nil {
				t.Fatalf("AddIndexers succeeded")
			}
			eqStrings(t, "indexers", sorted(slices.Collect(maps.Keys(s.GetIndexers()))), []string{"app", NamespaceIndex})
			// The existing index is the original one.
			eqStrings(t, "app values", s.ListIndexFuncValues("app"), []string{"web"})
			checkIndices(t, s)
		})
	}
}

func TestIndexer_AddIndexersNilFuncIsAnError(t *testing.T) {
	s := NewIndexer[*corev1.Pod](nil, nil)
	if err := s.AddIndexers(Indexers[*corev1.Pod]{"nil": nil}); err == nil {
		t.Fatalf("AddIndexers with a nil IndexFunc succeeded")
	}
	if _, ok := s.GetIndexers()["nil"]; ok {
		t.Fatalf("nil IndexFunc was registered")
	}
}

func TestIndexer_AddIndexersFailingOnStoredObjectAddsNothing(t *testing.T) {
	s := NewIndexer[*corev1.Pod](nil, nil)
	mustAdd(t, s, testPod("ns", "ok", "tier=a"), testPod("ns", "bad", "bad=true"))
	err := s.AddIndexers(Indexers[*corev1.Pod]{"strict": strictIndex, "app": appIndex})
	if !errors.Is(err, errBadPod) {
		t.Fatalf("AddIndexers = %v, want errBadPod", err)
	}
	eqStrings(t, "indexers", sorted(slices.Collect(maps.Keys(s.GetIndexers()))), []string{NamespaceIndex})
}

func TestIndexer_FailingIndexFuncLeavesStoreUnchanged(t *testing.T) {
	s := NewIndexer[*corev1.Pod](nil, Indexers[*corev1.Pod]{"strict": strictIndex, "labels": labelsIndex})
	orig := testPodRV("ns", "p", "1", "tier=a")
	mustAdd(t, s, orig)
	for _, tc := range []struct {
		name string
		op   func() error
	}{
		{"Add of new key", func() error { return s.Add(testPod("ns", "new", "bad=true")) }},
		{"Update of existing key", func() error { return s.Update(testPodRV("ns", "p", "2", "bad=true", "tier=b")) }},
		{"Replace", func() error {
			return s.Replace([]*corev1.Pod{testPod("ns", "other", "tier=c"), testPod("ns", "x", "bad=true")}, "9")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.op(); !errors.Is(err, errBadPod) {
				t.Fatalf("error = %v, want errBadPod", err)
			}
			eqStrings(t, "keys", s.ListKeys(), []string{"ns/p"})
			if got, _, _ := s.GetByKey("ns/p"); got != orig {
				t.Fatalf("stored object changed")
			}
			eqStrings(t, "strict values", s.ListIndexFuncValues("strict"), []string{"a"})
			eqStrings(t, "labels values", s.ListIndexFuncValues("labels"), []string{"tier=a"})
			checkIndices(t, s)
		})
	}
}

func TestIndexer_ReplaceRebuildsIndices(t *testing.T) {
	s := podIndexer(t)
	if err := s.Replace([]*corev1.Pod{
		testPod("ns1", "web-1", "app=api"),
		testPod("ns3", "new", "app=web", "tier=back"),
	}, "7"); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	eqStrings(t, "app", sorted(s.ListIndexFuncValues("app")), []string{"api", "web"})
	eqStrings(t, "app=web", mustByIndex(t, s, "app", "web"), []string{"ns3/new"})
	eqStrings(t, "labels", sorted(s.ListIndexFuncValues("labels")), []string{"app=api", "app=web", "tier=back"})
	eqStrings(t, "namespaces", sorted(s.ListIndexFuncValues(NamespaceIndex)), []string{"ns1", "ns3"})
	checkIndices(t, s)
	// Indices added later survive a Replace and are rebuilt by it.
	if err := s.AddIndexers(Indexers[*corev1.Pod]{"tags": tagsIndex}); err != nil {
		t.Fatalf("AddIndexers: %v", err)
	}
	if err := s.Replace([]*corev1.Pod{testPod("ns1", "t", "tags=x.y")}, "8"); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	eqStrings(t, "tags", sorted(s.ListIndexFuncValues("tags")), []string{"x", "y"})
	eqStrings(t, "app", s.ListIndexFuncValues("app"), nil)
	checkIndices(t, s)
}

func TestIndexer_ObjectsAreSharedNotCopied(t *testing.T) {
	// The cache hands out the very objects it was given (callers must not
	// mutate them), so reads allocate no copies.
	s := podIndexer(t)
	p := testPod("ns9", "shared", "app=web")
	mustAdd(t, s, p)
	got, _, _ := s.GetByKey("ns9/shared")
	byIdx, _ := s.ByIndex(NamespaceIndex, "ns9")
	if got != p || len(byIdx) != 1 || byIdx[0] != p {
		t.Fatalf("the store does not hand out the stored pointer")
	}
}

func TestIndexer_ConcurrentReadersAndWriters(t *testing.T) {
	s := NewIndexer[*corev1.Pod](nil, Indexers[*corev1.Pod]{"labels": labelsIndex})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 300 {
				name := fmt.Sprintf("p%d", i%20)
				p := testPod(fmt.Sprintf("ns%d", w), name, "gen="+strconv.Itoa(i%3))
				switch i % 5 {
				case 0, 1, 2:
					_ = s.Update(p)
				case 3:
					_ = s.Delete(p)
				case 4:
					if i%50 == 4 {
						_ = s.Replace([]*corev1.Pod{p}, "")
					}
				}
			}
		})
		wg.Go(func() {
			for i := range 300 {
				_ = s.List()
				_ = s.ListKeys()
				_, _ = s.ByIndex("labels", "gen="+strconv.Itoa(i%3))
				_, _ = s.IndexKeys(NamespaceIndex, "ns0")
				_ = s.ListIndexFuncValues("labels")
				_, _ = s.Index("labels", testPod("x", "y", "gen=1"))
				if w == 0 && i == 100 {
					_ = s.AddIndexers(Indexers[*corev1.Pod]{"tags": tagsIndex})
				}
			}
		})
	}
	wg.Wait()
	checkIndices(t, s)
}

// --- property test ---

// propSeedBase returns the base seed of the property test: from
// LISTWATCH_PROP_SEED when set, else from the clock, and logs it.
func propSeedBase(t *testing.T) uint64 {
	if env := os.Getenv("LISTWATCH_PROP_SEED"); env != "" {
		v, err := strconv.ParseUint(env, 10, 64)
		if err != nil {
			t.Fatalf("LISTWATCH_PROP_SEED=%q: %v", env, err)
		}
		return v
	}
	return uint64(time.Now().UnixNano())
}

// TestIndexer_PropertyIndicesMatchRecomputation runs random sequences of
// Add/Update/Delete/Replace/AddIndexers over about 50 keys with random
// label-based, multi-valued (and sometimes failing) indices, and checks after
// every step that the stored objects are the model's and that every index is
// exactly what a recomputation from List() gives, with no empty value set.
// A failure names its seed; rerun it with LISTWATCH_PROP_SEED=<seed> and
// -run 'Indexer_Property'.
func TestIndexer_PropertyIndicesMatchRecomputation(t *testing.T) {
	seeds, steps := 500, 80
	if testing.Short() {
		seeds = 50
	}
	base := propSeedBase(t)
	t.Logf("base seed %d (set LISTWATCH_PROP_SEED to reproduce)", base)
	if os.Getenv("LISTWATCH_PROP_SEED") != "" {
		seeds = 1
	}
	for i := range seeds {
		seed := base + uint64(i)
		if !runIndexerProperty(t, seed, steps) {
			t.Fatalf("property failed for seed %d (LISTWATCH_PROP_SEED=%d)", seed, seed)
		}
	}
}

func runIndexerProperty(t *testing.T, seed uint64, steps int) (ok bool) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	fail := func(format string, args ...any) {
		t.Errorf("seed %d: "+format, append([]any{seed}, args...)...)
		ok = false
	}
	ok = true

	all := Indexers[*corev1.Pod]{"app": appIndex, "labels": labelsIndex, "tags": tagsIndex, "strict": strictIndex}
	allNames := sorted(slices.Collect(maps.Keys(all)))
	initial := Indexers[*corev1.Pod]{}
	for _, n := range allNames {
		if r.IntN(2) == 0 {
			initial[n] = all[n]
		}
	}
	byName := r.IntN(2) == 0 // name-only keys let a key change namespace
	var keyFn KeyFunc[*corev1.Pod]
	if byName {
		keyFn = nameKey
	}
	s := NewIndexer(keyFn, initial)
	ts := s.(*threadSafeStore[*corev1.Pod])
	model := map[string]*corev1.Pod{}
	namespaces := []string{"ns-a", "ns-b", "ns-c", ""}

	randPod := func() *corev1.Pod {
		i := r.IntN(50)
		ns := namespaces[i%len(namespaces)]
		if byName {
			ns = namespaces[r.IntN(len(namespaces))]
		}
		var labels []string
		if r.IntN(3) > 0 {
			labels = append(labels, "app="+[]string{"web", "db", "cache", "api"}[r.IntN(4)])
		}
		if r.IntN(2) == 0 {
			labels = append(labels, "tier="+[]string{"front", "back"}[r.IntN(2)])
		}
		if r.IntN(2) == 0 {
			var tags []string
			for range 1 + r.IntN(3) {
				tags = append(tags, []string{"x", "y", "z", "w"}[r.IntN(4)])
			}
			labels = append(labels, "tags="+strings.Join(tags, "."))
		}
		if r.IntN(25) == 0 {
			labels = append(labels, "bad=true")
		}
		return testPodRV(ns, fmt.Sprintf("p%02d", i), strconv.Itoa(r.IntN(1000)), labels...)
	}
	keyOf := func(p *corev1.Pod) string {
		k, err := ts.keyFunc(p)
		if err != nil {
			t.Fatalf("seed %d: key: %v", seed, err)
		}
		return k
	}
	installed := func(name string) bool { _, ok := s.GetIndexers()[name]; return ok }
	isBad := func(p *corev1.Pod) bool { return p.Labels["bad"] == "true" }

	for step := 0; step < steps && ok; step++ {
		var op string
		var err error
		wantErr := false
		switch n := r.IntN(100); {
		case n < 35:
			p := randPod()
			op = "Add " + keyOf(p)
			err = s.Add(p)
			if wantErr = isBad(p) && installed("strict"); !wantErr {
				model[keyOf(p)] = p
			}
		case n < 60:
			p := randPod()
			if len(model) > 0 && r.IntN(4) > 0 {
				// Mostly update an existing key, possibly into another namespace.
				keys := sorted(slices.Collect(maps.Keys(model)))
				old := model[keys[r.IntN(len(keys))]]
				p.Name, p.Namespace = old.Name, old.Namespace
				if byName && r.IntN(3) == 0 {
					p.Namespace = namespaces[r.IntN(len(namespaces))]
				}
			}
			op = "Update " + keyOf(p)
			err = s.Update(p)
			if wantErr = isBad(p) && installed("strict"); !wantErr {
				model[keyOf(p)] = p
			}
		case n < 85:
			p := randPod()
			if len(model) > 0 && r.IntN(4) > 0 {
				keys := sorted(slices.Collect(maps.Keys(model)))
				old := model[keys[r.IntN(len(keys))]]
				p.Name, p.Namespace = old.Name, old.Namespace
			}
			op = "Delete " + keyOf(p)
			err = s.Delete(p)
			delete(model, keyOf(p))
		case n < 95:
			list := make([]*corev1.Pod, r.IntN(40))
			next := map[string]*corev1.Pod{}
			for j := range list {
				list[j] = randPod()
				next[keyOf(list[j])] = list[j]
			}
			// Of duplicate keys only the last is stored, hence indexed.
			for _, p := range next {
				wantErr = wantErr || (isBad(p) && installed("strict"))
			}
			op = fmt.Sprintf("Replace(%d)", len(list))
			err = s.Replace(list, strconv.Itoa(step))
			if !wantErr {
				model = next
			}
		default:
			name := allNames[r.IntN(len(allNames))]
			op = "AddIndexers " + name
			was := installed(name)
			hasBad := false
			for _, obj := range model {
				hasBad = hasBad || isBad(obj)
			}
			err = s.AddIndexers(Indexers[*corev1.Pod]{name: all[name]})
			// A name in use conflicts; a stored object the IndexFunc fails
			// on keeps the index out.
			wantErr = was || (name == "strict" && hasBad)
			if !was && installed(name) == wantErr {
				fail("step %d %s: installed=%v after error %v", step, op, installed(name), err)
			}
		}
		if (err != nil) != wantErr {
			fail("step %d %s: error %v, want error %v", step, op, err, wantErr)
			return ok
		}

		// The store holds exactly the model.
		gotKeys := sorted(s.ListKeys())
		wantKeys := sorted(slices.Collect(maps.Keys(model)))
		if !slices.Equal(gotKeys, wantKeys) {
			fail("step %d %s: keys\n got  %q\n want %q", step, op, gotKeys, wantKeys)
			return ok
		}
		for k, want := range model {
			if got, _, _ := s.GetByKey(k); got != want {
				fail("step %d %s: GetByKey(%q) is not the model's object", step, op, k)
				return ok
			}
		}
		// Every index equals its recomputation, with no empty set.
		sub := &recordingTB{TB: t}
		func() {
			defer func() {
				if r := recover(); r != nil && r != errStopCheck {
					panic(r)
				}
			}()
			want := recomputeIndices(sub, s)
			checkIndicesAgainst(sub, s, want)
			// Index() on a probe returns the union of its values' sets.
			probe := randPod()
			probe.Labels = map[string]string{"app": "web", "tier": "back", "tags": "x.z"}
			for name, idx := range want {
				fn := s.GetIndexers()[name]
				vals, _ := fn(probe)
				union := map[string]bool{}
				for _, v := range vals {
					for _, k := range idx[v] {
						union[k] = true
					}
				}
				objs, err := s.Index(name, probe)
				if err != nil {
					sub.Fatalf("Index(%q): %v", name, err)
				}
				var got []string
				for _, o := range objs {
					got = append(got, keyOf(o))
				}
				eqStrings(sub, "Index("+name+")", sorted(got), sorted(slices.Collect(maps.Keys(union))))
			}
		}()
		if sub.failed {
			fail("step %d %s: %s", step, op, sub.msg)
			return ok
		}
	}
	return ok
}

// recordingTB turns the check helpers' Fatalf into a recorded failure, so
// the property test can name the seed and step that broke.
type recordingTB struct {
	testing.TB
	failed bool
	msg    string
}

var errStopCheck = errors.New("check failed")

func (r *recordingTB) Helper() {}

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.failed = true
	r.msg = fmt.Sprintf(format, args...)
	panic(errStopCheck)
}

func TestIndexer_MetaNamespaceIndexFunc(t *testing.T) {
	for _, tc := range []struct {
		obj  *corev1.Pod
		want []string
	}{
		{testPod("ns", "p"), []string{"ns"}},
		{testPod("", "cluster"), []string{""}},
	} {
		got, err := MetaNamespaceIndexFunc(tc.obj)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Fatalf("MetaNamespaceIndexFunc(%s/%s) = %q, %v; want %q", tc.obj.Namespace, tc.obj.Name, got, err, tc.want)
		}
	}
}
