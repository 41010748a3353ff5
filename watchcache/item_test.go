package watchcache

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/storage"
)

// TestWindowBytes checks that the window holds the most recent events
// whose versions' bytes fit in WindowBytes (and at least the last event),
// and that a watch from before the events it let go is 410 Expired while
// one from inside it replays them.
func TestWindowBytes(t *testing.T) {
	size := int64(len(podValue("ns", "p00", nil, corev1.PodRunning)))
	tests := []struct {
		name      string
		maxBytes  int64
		writes    int
		wantInWin int
	}{
		{"all fit", 100 * size, 10, 10},
		{"three fit", 3 * size, 10, 3},
		{"three and a half fit", 3*size + size/2, 10, 3},
		{"one larger than the bound", size / 2, 10, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t)
			c := newPodCache(t, st, func(cfg *Config[*corev1.Pod]) { cfg.WindowBytes = tc.maxBytes })
			revs := make([]int64, tc.writes)
			for i := range revs {
				revs[i] = put(t, st, "ns", fmt.Sprintf("p%02d", i), nil, corev1.PodRunning)
			}
			seen(c, revs[len(revs)-1])
			s := c.Stats()
			if s.WindowEvents != tc.wantInWin || s.WindowBytes != int64(tc.wantInWin)*size {
				t.Fatalf("window: %d events, %d bytes; want %d events of %d bytes", s.WindowEvents, s.WindowBytes, tc.wantInWin, size)
			}
			first := tc.writes - tc.wantInWin // the oldest write still in the window
			if first > 0 {
				if _, err := c.Watch(t.Context(), WatchOptions{ResourceVersion: fmt.Sprint(revs[first-1] - 1)}); !apierrors.IsResourceExpired(err) {
					t.Errorf("watch from before the window: %v, want 410 Expired", err)
				}
			}
			w, err := c.Watch(t.Context(), WatchOptions{ResourceVersion: fmt.Sprint(revs[first] - 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			got := collectUntil(t, w, revs[len(revs)-1])
			if len(got) != tc.wantInWin {
				t.Errorf("replayed %v, want %d events", got, tc.wantInWin)
			}
		})
	}
}

// TestEventsHeldWhileWatched checks that the window shares an event among
// the watchers that hold it (those the cache delivered it to, and one
// replaying the window meanwhile), keeps neither the event nor the object
// decoded for it once no watcher holds it, and makes it again, equal, for
// a watcher that replays the window later.
func TestEventsHeldWhileWatched(t *testing.T) {
	st := newStore(t)
	c := newPodCache(t, st, nil)
	from := put(t, st, "ns", "a", map[string]string{"v": "1"}, corev1.PodPending)
	seen(c, from)
	watchFrom := func(rev int64) *Watcher[*corev1.Pod] {
		w, err := c.Watch(t.Context(), WatchOptions{ResourceVersion: fmt.Sprint(rev)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		return w
	}
	w1, w2 := watchFrom(from), watchFrom(from)
	rev := put(t, st, "ns", "a", map[string]string{"v": "2"}, corev1.PodRunning)
	// The events are held in this function alone, and let go on return.
	want := func() ev {
		e1, e2 := <-w1.Events(), <-w2.Events()
		if e1 != e2 || e1.Type != watch.Modified || e1.Revision != rev {
			t.Fatalf("live watchers got %p %v and %p %v, want one shared MODIFIED at %d", e1, e1.Type, e2, e2.Type, rev)
		}
		if e3 := <-watchFrom(from).Events(); e3 != e1 {
			t.Error("a watcher replaying the window while the event is held got another")
		}
		return toEv(e1)
	}()
	seen(c, rev)
	runtime.GC()
	c.mu.Lock()
	rec := c.window.at(c.window.n - 1)
	c.mu.Unlock()
	rec.mu.Lock()
	held, decoded := rec.modified.Value(), rec.hasFresh
	rec.mu.Unlock()
	if held != nil || decoded {
		t.Errorf("the window holds the event (%v) or its decoded object (%v) that no watcher holds", held != nil, decoded)
	}
	if again := <-watchFrom(from).Events(); toEv(again) != want {
		t.Errorf("replayed %v, want %v", toEv(again), want)
	}
}

// TestAttrsShared checks the attributes selectors read: labels and fields
// as the Attrs function gave them, shared by consecutive versions of an
// object that did not change them.
func TestAttrsShared(t *testing.T) {
	st := newStore(t)
	c := newPodCache(t, st, nil)
	lbls := map[string]string{"app": "web", "tier": "front", "a": ""}
	put(t, st, "ns", "a", lbls, corev1.PodRunning)
	put(t, st, "ns", "a", lbls, corev1.PodFailed)
	// A change outside the labels and fields: an annotation.
	v := bytes.Replace(podValue("ns", "a", lbls, corev1.PodFailed), []byte(`"metadata":{`), []byte(`"metadata":{"annotations":{"x":"y"},`), 1)
	rev, err := storage.GuaranteedUpdate(t.Context(), st, podKey("ns", "a"), func(storage.KeyValue) ([]byte, error) { return v, nil })
	if err != nil {
		t.Fatal(err)
	}
	seen(c, rev)
	c.mu.Lock()
	v3, last, before := c.state[podKey("ns", "a")], c.window.at(c.window.n-1), c.window.at(c.window.n-2)
	c.mu.Unlock()
	if last.cur != v3 || last.prev != before.cur || before.prev == nil {
		t.Fatal("the window's versions are not the state's")
	}
	if before.cur.attrs == before.prev.attrs {
		t.Error("versions with different fields share attributes")
	}
	if last.cur.attrs != last.prev.attrs {
		t.Error("versions with the same labels and fields do not share attributes")
	}
	for _, tc := range []struct {
		label, field string
		want         bool
	}{
		{"app=web", "", true},
		{"app=web,tier=front", "status.phase=Failed", true},
		{"a", "", true},
		{"a=", "metadata.name=a", true},
		{"tier in (back)", "", false},
		{"!app", "", false},
		{"", "status.phase=Running", false},
		{"", "spec.nodeName=", true},
		{"", "metadata.namespace=other", false},
	} {
		l, err := labels.Parse(tc.label)
		if err != nil {
			t.Fatal(err)
		}
		f, err := fields.ParseSelector(tc.field)
		if err != nil {
			t.Fatal(err)
		}
		if got := newPredicate[*corev1.Pod](l, f, nil, prefix, "").matches(v3); got != tc.want {
			t.Errorf("%q %q matches = %v, want %v", tc.label, tc.field, got, tc.want)
		}
	}
	for ns, want := range map[string]bool{"ns": true, "n": false, "ns/a": false, "": true} {
		if got := newPredicate[*corev1.Pod](nil, nil, nil, prefix, ns).matches(v3); got != want {
			t.Errorf("namespace %q matches = %v, want %v", ns, got, want)
		}
	}
}

// TestAttrsAsMaps: over random labels and fields, of a few key sets, the
// attributes answer every lookup as the maps they were made from; the
// versions with the same field keys share them, and a version equal to
// the one it is given shares that one.
func TestAttrsAsMaps(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	pool := []string{"", "a", "app", "b.c", "metadata.name", "spec.nodeName", "status.phase", "z"}
	randSet := func(keys []string) map[string]string {
		m := map[string]string{}
		for _, k := range keys {
			if rng.IntN(3) > 0 {
				m[k] = pool[rng.IntN(len(pool))] + fmt.Sprint(rng.IntN(3))
			}
		}
		return m
	}
	var tables keyTables
	var prev *attrs
	byKeys := map[string]*fieldKeys{}
	for range 2000 {
		ls := randSet(pool)
		// Fields of one of three key sets, as resources have.
		fkeys := [][]string{pool[4:7], pool[3:6], nil}[rng.IntN(3)]
		fs := map[string]string{}
		for _, k := range fkeys {
			fs[k] = pool[rng.IntN(len(pool))]
		}
		same := prev
		if rng.IntN(4) == 0 && prev != nil {
			// The same attributes again: shared.
			ls, fs = map[string]string{}, map[string]string{}
			for i := range prev.nl {
				ls[prev.str(2*i)] = prev.str(2*i + 1)
			}
			if prev.fields != nil {
				for f, k := range *prev.fields {
					fs[k] = prev.str(2*prev.nl + f)
				}
			}
		}
		a := newAttrs(ls, fs, shardHashes{}, same, &tables)
		for _, k := range append(pool, "absent") {
			v, ok := (*labelsOf)(a).Lookup(k)
			if want, wantOK := ls[k]; v != want || ok != wantOK {
				t.Fatalf("label %q = %q %v, want %q %v (labels %v)", k, v, ok, want, wantOK, ls)
			}
			want, wantOK := fs[k]
			if (*fieldsOf)(a).Get(k) != want || (*fieldsOf)(a).Has(k) != wantOK {
				t.Fatalf("field %q = %q %v, want %q %v (fields %v)", k, (*fieldsOf)(a).Get(k), (*fieldsOf)(a).Has(k), want, wantOK, fs)
			}
			if v, ok := (&Item[*corev1.Pod]{attrs: a}).Field(k); v != want || ok != wantOK {
				t.Fatalf("Item.Field(%q) = %q %v, want %q %v (fields %v)", k, v, ok, want, wantOK, fs)
			}
		}
		if same != nil && maps(ls, labelsMap(same)) && maps(fs, fieldsMap(same)) && a != same {
			t.Fatal("equal attributes not shared")
		}
		if len(fs) > 0 {
			var keys []string
			for k := range fs {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			id := fmt.Sprint(keys)
			if byKeys[id] == nil {
				byKeys[id] = a.fields
			}
			if a.fields != byKeys[id] {
				t.Fatalf("fields %v do not share their keys", fs)
			}
		}
		prev = a
	}
}

func labelsMap(a *attrs) map[string]string {
	m := map[string]string{}
	for i := range a.nl {
		m[a.str(2*i)] = a.str(2*i + 1)
	}
	return m
}

func fieldsMap(a *attrs) map[string]string {
	m := map[string]string{}
	if a.fields != nil {
		for f, k := range *a.fields {
			m[k] = a.str(2*a.nl + f)
		}
	}
	return m
}

// TestItemObject checks that an item decodes to the object at its
// revision, anew for each caller, and that a failing decode gives an
// empty object at its revision rather than a nil one.
func TestItemObject(t *testing.T) {
	kv := storage.KeyValue{Key: podKey("ns", "a"), Value: podValue("ns", "a", nil, corev1.PodRunning), Revision: 7}
	it, err := NewItem(kv, decodePod)
	if err != nil {
		t.Fatal(err)
	}
	a, b := it.Object(), it.Object()
	if a == b || a.Name != "a" || a.ResourceVersion != "7" || it.Key() != kv.Key || it.Revision() != 7 {
		t.Errorf("Object = %p %s@%s and %p", a, a.Name, a.ResourceVersion, b)
	}
	bad, err := NewItem(storage.KeyValue{Key: kv.Key, Value: []byte("{"), Revision: 9}, decodePod)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := it.Field("status.phase"); ok || v != "" {
		t.Errorf("Field of an item made outside a cache = %q %v, want none", v, ok)
	}
	if _, err := bad.Decode(); err == nil {
		t.Error("Decode of bad bytes: no error")
	}
	if o := bad.Object(); o == nil || o.ResourceVersion != "9" {
		t.Errorf("Object of bad bytes = %v", o)
	}
}
