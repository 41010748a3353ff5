package cachetest

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/listwatch/listwatch/cache"
)

func TestWrites(t *testing.T) {
	type step struct {
		name    string
		do      func(s *podSource) (*corev1.Pod, error)
		wantRV  string // resourceVersion of the returned object; "" for errors
		wantErr func(error) bool
	}
	var nilPod *corev1.Pod
	steps := []step{
		{"create a", func(s *podSource) (*corev1.Pod, error) { return s.Create(pod("ns", "a", nil)) }, "1", nil},
		{"create cluster-scoped", func(s *podSource) (*corev1.Pod, error) { return s.Create(pod("", "node", nil)) }, "2", nil},
		{"create ignores given rv", func(s *podSource) (*corev1.Pod, error) {
			p := pod("ns", "b", nil)
			p.ResourceVersion = "77"
			return s.Create(p)
		}, "3", nil},
		{"create existing", func(s *podSource) (*corev1.Pod, error) { return s.Create(pod("ns", "a", nil)) }, "", apierrors.IsAlreadyExists},
		{"create typed nil", func(s *podSource) (*corev1.Pod, error) { return s.Create(nilPod) }, "", apierrors.IsBadRequest},
		{"create no name", func(s *podSource) (*corev1.Pod, error) { return s.Create(pod("ns", "", nil)) }, "", apierrors.IsBadRequest},
		{"update without rv", func(s *podSource) (*corev1.Pod, error) { return s.Update(pod("ns", "a", map[string]string{"v": "2"})) }, "4", nil},
		{"update with current rv", func(s *podSource) (*corev1.Pod, error) {
			p := pod("ns", "a", map[string]string{"v": "3"})
			p.ResourceVersion = "4"
			return s.Update(p)
		}, "5", nil},
		{"update with stale rv", func(s *podSource) (*corev1.Pod, error) {
			p := pod("ns", "a", nil)
			p.ResourceVersion = "4"
			return s.Update(p)
		}, "", apierrors.IsConflict},
		{"update absent", func(s *podSource) (*corev1.Pod, error) { return s.Update(pod("ns", "zz", nil)) }, "", apierrors.IsNotFound},
		{"update typed nil", func(s *podSource) (*corev1.Pod, error) { return s.Update(nilPod) }, "", apierrors.IsBadRequest},
		{"upsert new", func(s *podSource) (*corev1.Pod, error) { return s.Upsert(pod("ns", "c", nil)) }, "6", nil},
		{"upsert existing ignores rv", func(s *podSource) (*corev1.Pod, error) {
			p := pod("ns", "c", map[string]string{"x": "y"})
			p.ResourceVersion = "1"
			return s.Upsert(p)
		}, "7", nil},
		{"upsert typed nil", func(s *podSource) (*corev1.Pod, error) { return s.Upsert(nilPod) }, "", apierrors.IsBadRequest},
		{"delete", func(s *podSource) (*corev1.Pod, error) { return s.Delete("ns", "b") }, "8", nil},
		{"delete absent", func(s *podSource) (*corev1.Pod, error) { return s.Delete("ns", "b") }, "", apierrors.IsNotFound},
		{"delete cluster-scoped", func(s *podSource) (*corev1.Pod, error) { return s.Delete("", "node") }, "9", nil},
	}
	s := New[*corev1.Pod]()
	for _, st := range steps {
		got, err := st.do(s)
		if st.wantErr != nil {
			if !st.wantErr(err) {
				t.Fatalf("%s: err = %v", st.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got.ResourceVersion != st.wantRV {
			t.Fatalf("%s: rv = %q, want %q", st.name, got.ResourceVersion, st.wantRV)
		}
	}
	if s.Revision() != 9 {
		t.Fatalf("Revision = %d, want 9", s.Revision())
	}
	if got, want := keys(s.Items()), []string{"ns/a@5", "ns/c@7"}; !slices.Equal(got, want) {
		t.Fatalf("Items = %v, want %v", got, want)
	}

	type hc struct {
		Rev  int64
		Type cache.EventType
		Key  string
		RV   string
		Old  string
	}
	var hist []hc
	for _, c := range s.History() {
		h := hc{c.Revision, c.Type, c.Key, c.Object.ResourceVersion, ""}
		if c.Old != nil {
			h.Old = c.Old.ResourceVersion
		}
		hist = append(hist, h)
	}
	want := []hc{
		{1, cache.EventAdded, "ns/a", "1", ""},
		{2, cache.EventAdded, "node", "2", ""},
		{3, cache.EventAdded, "ns/b", "3", ""},
		{4, cache.EventModified, "ns/a", "4", "1"},
		{5, cache.EventModified, "ns/a", "5", "4"},
		{6, cache.EventAdded, "ns/c", "6", ""},
		{7, cache.EventModified, "ns/c", "7", "6"},
		{8, cache.EventDeleted, "ns/b", "8", "3"},
		{9, cache.EventDeleted, "node", "9", "2"},
	}
	if !slices.Equal(hist, want) {
		t.Fatalf("History:\n got  %v\n want %v", hist, want)
	}
}

func TestWritesDoNotAlias(t *testing.T) {
	s := New[*corev1.Pod]()
	in := pod("ns", "a", map[string]string{"k": "v"})
	out := mustCreate(t, s, in)
	if in.ResourceVersion != "" {
		t.Fatalf("Create mutated its argument: rv %q", in.ResourceVersion)
	}
	in.Labels["k"] = "changed"
	out.Labels["k"] = "changed too"
	stored, ok := s.Get("ns", "a")
	if !ok || stored.Labels["k"] != "v" {
		t.Fatalf("stored object aliased a caller's object: %v", stored.Labels)
	}
	// The usual read-modify-write loop works on the returned copy.
	out.Labels["k"] = "v2"
	upd := mustUpdate(t, s, out)
	if out.ResourceVersion != "1" || upd.ResourceVersion != "2" {
		t.Fatalf("rvs: arg %q, result %q", out.ResourceVersion, upd.ResourceVersion)
	}
	if stored.Labels["k"] != "v" || stored.ResourceVersion != "1" {
		t.Fatalf("an Update changed an earlier stored state: %v", stored)
	}
	del := mustDelete(t, s, "ns", "a")
	if del.ResourceVersion != "3" || del.Labels["k"] != "v2" {
		t.Fatalf("Delete returned %v, want the last state at rv 3", del.ObjectMeta)
	}
	if _, ok := s.Get("ns", "a"); ok {
		t.Fatalf("Get after Delete found the object")
	}
	h := s.History()
	if h[2].Old.ResourceVersion != "2" || h[2].Object.ResourceVersion != "3" {
		t.Fatalf("deleted change: old rv %s, object rv %s", h[2].Old.ResourceVersion, h[2].Object.ResourceVersion)
	}
}

func TestCompactClamps(t *testing.T) {
	s := New[*corev1.Pod]()
	mustCreate(t, s, pod("ns", "a", nil))
	mustCreate(t, s, pod("ns", "b", nil))
	s.Compact(10)
	if got := s.CompactedRevision(); got != 2 {
		t.Fatalf("Compact(10) at revision 2: compacted = %d", got)
	}
	s.Compact(1)
	if got := s.CompactedRevision(); got != 2 {
		t.Fatalf("Compact(1) after Compact(2): compacted = %d", got)
	}
	if len(s.History()) != 2 {
		t.Fatalf("Compact shrank History")
	}
}

// An interface T has no default bookmark object: Bookmark does nothing and a
// streaming watch is an internal error, never a panic.
func TestInterfaceType(t *testing.T) {
	s := New[cache.Object]()
	if _, err := s.Create(pod("ns", "a", nil)); err != nil {
		t.Fatal(err)
	}
	var nilObj cache.Object
	if _, err := s.Create(nilObj); !apierrors.IsBadRequest(err) {
		t.Fatalf("Create(nil) = %v", err)
	}
	w, err := s.Watch(t.Context(), listOpts{RV: "0", Bookmarks: true}.opts())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	s.Bookmark()
	evs := takeAll(t, w)
	if len(evs) != 1 || evs[0].Type != cache.EventAdded {
		t.Fatalf("events %v", shortAll(evs))
	}
	_, err = s.Watch(t.Context(), listOpts{Bookmarks: true, Match: "NotOlderThan", Initial: ptr(true)}.opts())
	if !apierrors.IsInternalError(err) {
		t.Fatalf("streaming watch without NewObject: %v", err)
	}
}
