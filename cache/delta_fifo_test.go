package cache

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

type podFIFO = DeltaFIFO[*corev1.Pod]

// summary spells a delta "Type ns/name@rv", with "(tombstone)" for a
// Deleted delta whose final state is unknown.
func summary(d Delta[*corev1.Pod]) string {
	s := fmt.Sprintf("%s %s/%s@%s", d.Type, d.Object.Namespace, d.Object.Name, d.Object.ResourceVersion)
	if d.FinalStateUnknown {
		s += " (tombstone)"
	}
	return s
}

func summaries(ds Deltas[*corev1.Pod]) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = summary(d)
	}
	return out
}

// queued returns the deltas queued for key, summarised.
func queued(t testing.TB, f *podFIFO, key string) []string {
	t.Helper()
	ds, ok := f.GetByKey(key)
	if !ok {
		return nil
	}
	return summaries(ds)
}

// popped is what one Pop handed to its process function.
type popped struct {
	key     string
	deltas  Deltas[*corev1.Pod]
	initial bool
}

// popOne pops one key; the queue must not be empty. The deltas are copied:
// the queue reuses its slice once process returns.
func popOne(t testing.TB, f *podFIFO) popped {
	t.Helper()
	if f.Len() == 0 {
		t.Fatalf("popOne on an empty queue would block")
	}
	var p popped
	if err := f.Pop(func(key string, deltas Deltas[*corev1.Pod], initial bool) error {
		p = popped{key, slices.Clone(deltas), initial}
		return nil
	}); err != nil {
		t.Fatalf("Pop: %v", err)
	}
	return p
}

// drainKeys pops everything queued and returns the keys in pop order.
func drainKeys(t testing.TB, f *podFIFO) []string {
	t.Helper()
	var keys []string
	for f.Len() > 0 {
		keys = append(keys, popOne(t, f).key)
	}
	return keys
}

// applyTo is a PopProcessFunc that does to store what the deltas say, as an
// informer does.
func applyTo(store Store[*corev1.Pod]) PopProcessFunc[*corev1.Pod] {
	return func(_ string, deltas Deltas[*corev1.Pod], _ bool) error {
		for _, d := range deltas {
			var err error
			switch d.Type {
			case Deleted:
				err = store.Delete(d.Object)
			default:
				err = store.Update(d.Object)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// knownFIFO returns a DeltaFIFO whose KnownObjects is an indexer holding
// objs.
func knownFIFO(t testing.TB, objs ...*corev1.Pod) (*podFIFO, Indexer[*corev1.Pod]) {
	t.Helper()
	known := NewIndexer[*corev1.Pod](nil, nil)
	mustAdd(t, known, objs...)
	return NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{KnownObjects: known}), known
}

// errKnown is a KeyListerGetter that fails GetByKey.
type errKnown struct{ err error }

func (e errKnown) ListKeys() []string { return []string{"ns/a"} }
func (e errKnown) GetByKey(string) (*corev1.Pod, bool, error) {
	return nil, false, e.err
}

func TestDeltaFIFO_DeltaTypePerOperation(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   func(f *podFIFO) error
		want []string
	}{
		{"Add", func(f *podFIFO) error { return f.Add(testPodRV("ns", "a", "2")) }, []string{"Added ns/a@2"}},
		{"Update", func(f *podFIFO) error { return f.Update(testPodRV("ns", "a", "2")) }, []string{"Updated ns/a@2"}},
		{"Delete", func(f *podFIFO) error { return f.Delete(testPodRV("ns", "a", "2")) }, []string{"Deleted ns/a@2"}},
		{"Replace", func(f *podFIFO) error { return f.Replace([]*corev1.Pod{testPodRV("ns", "a", "2")}, "2") }, []string{"Replaced ns/a@2"}},
		{"Resync", func(f *podFIFO) error { return f.Resync() }, []string{"Sync ns/a@1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := knownFIFO(t, testPodRV("ns", "a", "1"))
			if err := tc.op(f); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			eqStrings(t, "deltas", queued(t, f, "ns/a"), tc.want)
			eqStrings(t, "queue", f.ListKeys(), []string{"ns/a"})
		})
	}
}

func TestDeltaFIFO_OneEntryPerKeyOldestFirst(t *testing.T) {
	f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{})
	for i, op := range []func(*corev1.Pod) error{f.Add, f.Update, f.Update, f.Delete} {
		if err := op(testPodRV("ns", "a", strconv.Itoa(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	if f.Len() != 1 {
		t.Fatalf("Len = %d, want 1 entry for one key", f.Len())
	}
	p := popOne(t, f)
	eqStrings(t, "deltas", summaries(p.deltas), []string{"Added ns/a@1", "Updated ns/a@2", "Updated ns/a@3", "Deleted ns/a@4"})
	if oldest, _ := p.deltas.Oldest(); oldest.Type != Added {
		t.Fatalf("Oldest = %s", oldest.Type)
	}
	if newest, _ := p.deltas.Newest(); newest.Type != Deleted {
		t.Fatalf("Newest = %s", newest.Type)
	}
}

func TestDeltaFIFO_DeltasOldestNewestOfEmpty(t *testing.T) {
	var d Deltas[*corev1.Pod]
	if _, ok := d.Oldest(); ok {
		t.Fatalf("Oldest of empty Deltas reported a delta")
	}
	if _, ok := d.Newest(); ok {
		t.Fatalf("Newest of empty Deltas reported a delta")
	}
}

func TestDeltaFIFO_FIFOOrderAcrossKeys(t *testing.T) {
	f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{})
	for _, name := range []string{"c", "a", "b"} {
		if err := f.Add(testPod("ns", name)); err != nil {
			t.Fatal(err)
		}
	}
	// A later change to a queued key keeps its place.
	if err := f.Update(testPod("ns", "c")); err != nil {
		t.Fatal(err)
	}
	eqStrings(t, "ListKeys", f.ListKeys(), []string{"ns/c", "ns/a", "ns/b"})
	if p := popOne(t, f); p.key != "ns/c" || len(p.deltas) != 2 {
		t.Fatalf("popped %s with %d deltas, want ns/c with 2", p.key, len(p.deltas))
	}
	// Once popped, a key queued again goes to the back.
	if err := f.Update(testPod("ns", "c")); err != nil {
		t.Fatal(err)
	}
	eqStrings(t, "pop order", drainKeys(t, f), []string{"ns/a", "ns/b", "ns/c"})
}

func TestDeltaFIFO_QueueOrderMatchesModelAcrossGrowth(t *testing.T) {
	// Random pushes and pops across the ring buffer's wrap-around and growth
	// keep first-in first-out order.
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 1))
	f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{})
	var model []string
	for i := range 5000 {
		if r.IntN(5) < 3 || len(model) == 0 {
			name := "p" + strconv.Itoa(r.IntN(200))
			if err := f.Update(testPod("ns", name)); err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(model, "ns/"+name) {
				model = append(model, "ns/"+name)
			}
			continue
		}
		if got := popOne(t, f).key; got != model[0] {
			t.Fatalf("seed %d step %d: popped %s, want %s", seed, i, got, model[0])
		}
		model = model[1:]
		if i%500 == 0 {
			eqStrings(t, fmt.Sprintf("seed %d step %d ListKeys", seed, i), f.ListKeys(), model)
		}
	}
	eqStrings(t, "final", drainKeys(t, f), model)
}

func TestDeltaFIFO_DeleteOfUnknownKeyIsIgnored(t *testing.T) {
	for _, tc := range []struct {
		name   string
		known  []*corev1.Pod
		noKO   bool // no KnownObjects at all
		queue  *corev1.Pod
		delete *corev1.Pod
		want   []string
	}{
		{name: "no known objects, not queued", noKO: true, delete: testPod("ns", "a"), want: nil},
		{name: "no known objects, queued", noKO: true, queue: testPodRV("ns", "a", "1"), delete: testPodRV("ns", "a", "2"),
			want: []string{"Added ns/a@1", "Deleted ns/a@2"}},
		{name: "unknown to cache, not queued", known: []*corev1.Pod{testPod("ns", "other")}, delete: testPod("ns", "a"), want: nil},
		{name: "known to cache", known: []*corev1.Pod{testPodRV("ns", "a", "1")}, delete: testPodRV("ns", "a", "2"),
			want: []string{"Deleted ns/a@2"}},
		{name: "unknown to cache, queued", known: nil, queue: testPodRV("ns", "a", "1"), delete: testPodRV("ns", "a", "2"),
			want: []string{"Added ns/a@1", "Deleted ns/a@2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := knownFIFO(t, tc.known...)
			if tc.noKO {
				f = NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{})
			}
			if tc.queue != nil {
				if err := f.Add(tc.queue); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.Delete(tc.delete); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			eqStrings(t, "deltas", queued(t, f, "ns/a"), tc.want)
			if tc.want == nil && f.Len() != 0 {
				t.Fatalf("ignored Delete queued %q", f.ListKeys())
			}
		})
	}
}

func TestDeltaFIFO_DeleteReportsKnownObjectsError(t *testing.T) {
	boom := errors.New("boom")
	f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{KnownObjects: errKnown{boom}})
	if err := f.Delete(testPod("ns", "a")); !errors.Is(err, boom) {
		t.Fatalf("Delete = %v, want the KnownObjects error", err)
	}
	if f.Len() != 0 {
		t.Fatalf("failed Delete queued %q", f.ListKeys())
	}
}

func TestDeltaFIFO_DedupDeltas(t *testing.T) {
	obs := func(rv string) Delta[*corev1.Pod] {
		return Delta[*corev1.Pod]{Type: Deleted, Object: testPodRV("ns", "a", rv)}
	}
	tomb := func(rv string) Delta[*corev1.Pod] {
		return Delta[*corev1.Pod]{Type: Deleted, Object: testPodRV("ns", "a", rv), FinalStateUnknown: true}
	}
	upd := func(rv string) Delta[*corev1.Pod] {
		return Delta[*corev1.Pod]{Type: Updated, Object: testPodRV("ns", "a", rv)}
	}
	for _, tc := range []struct {
		name string
		in   Deltas[*corev1.Pod]
		want []string
	}{
		{"observed then tombstone keeps observed", Deltas[*corev1.Pod]{obs("1"), tomb("2")}, []string{"Deleted ns/a@1"}},
		{"tombstone then observed keeps observed", Deltas[*corev1.Pod]{tomb("1"), obs("2")}, []string{"Deleted ns/a@2"}},
		{"two observed keep the newer", Deltas[*corev1.Pod]{obs("1"), obs("2")}, []string{"Deleted ns/a@2"}},
		{"two tombstones keep the newer", Deltas[*corev1.Pod]{tomb("1"), tomb("2")}, []string{"Deleted ns/a@2 (tombstone)"}},
		{"not consecutive", Deltas[*corev1.Pod]{obs("1"), upd("2"), obs("3")}, []string{"Deleted ns/a@1", "Updated ns/a@2", "Deleted ns/a@3"}},
		{"only the tail collapses", Deltas[*corev1.Pod]{upd("1"), obs("2"), tomb("3")}, []string{"Updated ns/a@1", "Deleted ns/a@2"}},
		{"single", Deltas[*corev1.Pod]{obs("1")}, []string{"Deleted ns/a@1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eqStrings(t, "dedup", summaries(dedupDeltas(tc.in)), tc.want)
		})
	}
}

func TestDeltaFIFO_ConsecutiveDeletesCollapseKeepingObserved(t *testing.T) {
	t.Run("tombstone then observed delete", func(t *testing.T) {
		f, _ := knownFIFO(t, testPodRV("ns", "a", "1"))
		// A relist without ns/a queues a tombstone...
		if err := f.Replace(nil, "5"); err != nil {
			t.Fatal(err)
		}
		eqStrings(t, "after Replace", queued(t, f, "ns/a"), []string{"Deleted ns/a@1 (tombstone)"})
		// ...and the watch's real Deleted replaces it.
		if err := f.Delete(testPodRV("ns", "a", "4")); err != nil {
			t.Fatal(err)
		}
		eqStrings(t, "after Delete", queued(t, f, "ns/a"), []string{"Deleted ns/a@4"})
	})
	t.Run("observed delete then relist", func(t *testing.T) {
		f, _ := knownFIFO(t, testPodRV("ns", "a", "1"))
		if err := f.Delete(testPodRV("ns", "a", "4")); err != nil {
			t.Fatal(err)
		}
		if err := f.Replace(nil, "5"); err != nil {
			t.Fatal(err)
		}
		eqStrings(t, "deltas", queued(t, f, "ns/a"), []string{"Deleted ns/a@4"})
	})
	t.Run("two observed deletes", func(t *testing.T) {
		f, _ := knownFIFO(t, testPodRV("ns", "a", "1"))
		for _, rv := range []string{"4", "5"} {
			if err := f.Delete(testPodRV("ns", "a", rv)); err != nil {
				t.Fatal(err)
			}
		}
		eqStrings(t, "deltas", queued(t, f, "ns/a"), []string{"Deleted ns/a@5"})
	})
}

func TestDeltaFIFO_SyncDroppedAfterDeleted(t *testing.T) {
	// Resync never queues a Sync behind queued deltas, so this drives the
	// queue's own rule directly, as a Resync racing a Delete would.
	f, _ := knownFIFO(t, testPodRV("ns", "a", "1"))
	if err := f.Delete(testPodRV("ns", "a", "2")); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	err := f.queueActionLocked("ns/a", Delta[*corev1.Pod]{Type: Sync, Object: testPodRV("ns", "a", "1")})
	f.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	eqStrings(t, "deltas", queued(t, f, "ns/a"), []string{"Deleted ns/a@2"})
	// A Sync for a key not queued at all is queued.
	f.mu.Lock()
	err = f.queueActionLocked("ns/b", Delta[*corev1.Pod]{Type: Sync, Object: testPodRV("ns", "b", "1")})
	f.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	eqStrings(t, "deltas of b", queued(t, f, "ns/b"), []string{"Sync ns/b@1"})
}

func TestDeltaFIFO_ReplaceQueuesReplacedPerListedObject(t *testing.T) {
	f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{})
	if err := f.Add(testPodRV("ns", "b", "1")); err != nil {
		t.Fatal(err)
	}
	list := []*corev1.Pod{testPodRV("ns", "a", "3"), testPodRV("ns", "b", "3"), testPodRV("", "c", "3")}
	if err := f.Replace(list, "3"); err != nil {
		t.Fatal(err)
	}
	eqStrings(t, "queue", f.ListKeys(), []string{"ns/b", "ns/a", "c"})
	eqStrings(t, "a", queued(t, f, "ns/a"), []string{"Replaced ns/a@3"})
	eqStrings(t, "b", queued(t, f, "ns/b"), []string{"Added ns/b@1", "Replaced ns/b@3"})
	eqStrings(t, "c", queued(t, f, "c"), []string{"Replaced /c@3"})
}

func TestDeltaFIFO_ReplaceQueuesTombstonesForKnownAndQueuedKeys(t *testing.T) {
	f, _ := knownFIFO(t,
		testPodRV("ns", "listed", "1"),
		testPodRV("ns", "gone", "1"),
		testPodRV("ns", "gone-and-updated", "1"),
		testPodRV("ns", "deleted", "1"),
	)
	for _, op := range []error{
		f.Add(testPodRV("ns", "queued-only", "2")),                    // queued, not cached
		f.Update(testPodRV("ns", "gone-and-updated", "2")),            // cached and queued
		f.Delete(testPodRV("ns", "deleted", "2")),                     // already being deleted
		f.Replace([]*corev1.Pod{testPodRV("ns", "listed", "5")}, "5"), // the relist
	} {
		if op != nil {
			t.Fatal(op)
		}
	}
	for key, want := range map[string][]string{
		"ns/listed": {"Replaced ns/listed@5"},
		// Known to the cache only: tombstone with the cached object.
		"ns/gone": {"Deleted ns/gone@1 (tombstone)"},
		// Queued only: tombstone with the newest queued state.
		"ns/queued-only": {"Added ns/queued-only@2", "Deleted ns/queued-only@2 (tombstone)"},
		// Both: the queued state is newer than the cached one.
		"ns/gone-and-updated": {"Updated ns/gone-and-updated@2", "Deleted ns/gone-and-updated@2 (tombstone)"},
		// Already ending in an observed Deleted: nothing more.
		"ns/deleted": {"Deleted ns/deleted@2"},
	} {
		eqStrings(t, key, queued(t, f, key), want)
	}
	if f.Len() != 5 {
		t.Fatalf("Len = %d, want 5", f.Len())
	}
}

func TestDeltaFIFO_ReplaceWithoutKnownObjectsTombstonesQueuedKeys(t *testing.T) {
	f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{})
	if err := f.Add(testPodRV("ns", "a", "1")); err != nil {
		t.Fatal(err)
	}
	if err := f.Replace([]*corev1.Pod{testPodRV("ns", "b", "2")}, "2"); err != nil {
		t.Fatal(err)
	}
	eqStrings(t, "a", queued(t, f, "ns/a"), []string{"Added ns/a@1", "Deleted ns/a@1 (tombstone)"})
	eqStrings(t, "b", queued(t, f, "ns/b"), []string{"Replaced ns/b@2"})
}

func TestDeltaFIFO_ReplaceTombstoneCarriesTheCachedObject(t *testing.T) {
	cached := testPodRV("ns", "a", "1")
	f, _ := knownFIFO(t, cached)
	if err := f.Replace(nil, "2"); err != nil {
		t.Fatal(err)
	}
	p := popOne(t, f)
	if d := p.deltas[0]; d.Object != cached || !d.FinalStateUnknown || d.Type != Deleted {
		t.Fatalf("tombstone = %+v, want the cached object with FinalStateUnknown", d)
	}
}

func TestDeltaFIFO_ReplaceKeyErrorQueuesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  *corev1.Pod
	}{
		{"nameless", testPod("ns", "")},
		{"nil", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := knownFIFO(t, testPod("ns", "cached"))
			err := f.Replace([]*corev1.Pod{testPod("ns", "ok"), tc.bad}, "3")
			if !errors.Is(err, ErrNoName) {
				t.Fatalf("Replace = %v, want ErrNoName", err)
			}
			if f.Len() != 0 || f.HasSynced() {
				t.Fatalf("failed Replace queued %q (HasSynced %v)", f.ListKeys(), f.HasSynced())
			}
		})
	}
}

func TestDeltaFIFO_HasSyncedFalseWhenNothingHappened(t *testing.T) {
	f, _ := knownFIFO(t, testPod("ns", "a"))
	if f.HasSynced() {
		t.Fatalf("HasSynced before any Replace or Add")
	}
	// Resync is not a population.
	if err := f.Resync(); err != nil {
		t.Fatal(err)
	}
	if f.HasSynced() {
		t.Fatalf("HasSynced after only a Resync")
	}
}

func TestDeltaFIFO_HasSyncedAfterInitialBatchPopped(t *testing.T) {
	f, _ := knownFIFO(t, testPod("ns", "cached"))
	if err := f.Replace([]*corev1.Pod{testPod("ns", "a"), testPod("ns", "b")}, "1"); err != nil {
		t.Fatal(err)
	}
	// The batch: a, b and the tombstone for cached.
	for i := range 3 {
		if f.HasSynced() {
			t.Fatalf("HasSynced with %d of 3 initial items popped", i)
		}
		if p := popOne(t, f); !p.initial {
			t.Fatalf("initial item %d (%s) popped with isInInitialList false", i, p.key)
		}
	}
	if !f.HasSynced() {
		t.Fatalf("not HasSynced after the initial batch was popped")
	}
	if err := f.Add(testPod("ns", "later")); err != nil {
		t.Fatal(err)
	}
	if p := popOne(t, f); p.initial {
		t.Fatalf("item after the initial batch popped with isInInitialList true")
	}
	// A second Replace does not reopen the initial list.
	if err := f.Replace([]*corev1.Pod{testPod("ns", "x")}, "2"); err != nil {
		t.Fatal(err)
	}
	if !f.HasSynced() {
		t.Fatalf("a second Replace reset HasSynced")
	}
	if p := popOne(t, f); p.initial {
		t.Fatalf("item of a second Replace popped with isInInitialList true")
	}
}

func TestDeltaFIFO_HasSyncedCountsKeysQueuedBeforeFirstReplace(t *testing.T) {
	// Keys queued by a Resync before the first Replace are popped with the
	// batch and so count in it.
	f, _ := knownFIFO(t, testPod("ns", "cached"))
	if err := f.Resync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Replace([]*corev1.Pod{testPod("ns", "a")}, "1"); err != nil {
		t.Fatal(err)
	}
	popOne(t, f)
	if f.HasSynced() {
		t.Fatalf("HasSynced with one of two queued keys popped")
	}
	popOne(t, f)
	if !f.HasSynced() {
		t.Fatalf("not HasSynced with the queue drained")
	}
}

func TestDeltaFIFO_HasSyncedByEmptyReplace(t *testing.T) {
	f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{})
	if err := f.Replace(nil, "1"); err != nil {
		t.Fatal(err)
	}
	if !f.HasSynced() {
		t.Fatalf("an empty first list leaves nothing to pop, so the queue has synced")
	}
}

func TestDeltaFIFO_HasSyncedByAddBeforeReplace(t *testing.T) {
	// An Add, Update, Delete or AddIfNotPresent before the first Replace
	// marks the queue populated with no initial batch to wait for, so
	// HasSynced is true at once, and a later Replace does not make it false.
	for _, tc := range []struct {
		name string
		op   func(f *podFIFO) error
	}{
		{"Add", func(f *podFIFO) error { return f.Add(testPod("ns", "a")) }},
		{"Update", func(f *podFIFO) error { return f.Update(testPod("ns", "a")) }},
		{"Delete", func(f *podFIFO) error { return f.Delete(testPod("ns", "a")) }},
		{"Delete of unknown", func(f *podFIFO) error { return f.Delete(testPod("ns", "unknown")) }},
		{"AddIfNotPresent", func(f *podFIFO) error {
			f.AddIfNotPresent("ns/a", Deltas[*corev1.Pod]{{Type: Added, Object: testPod("ns", "a")}})
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := knownFIFO(t, testPod("ns", "a"))
			if err := tc.op(f); err != nil {
				t.Fatal(err)
			}
			if !f.HasSynced() {
				t.Fatalf("not HasSynced after %s before any Replace", tc.name)
			}
			if err := f.Replace([]*corev1.Pod{testPod("ns", "b"), testPod("ns", "c")}, "1"); err != nil {
				t.Fatal(err)
			}
			if !f.HasSynced() {
				t.Fatalf("Replace after %s reset HasSynced", tc.name)
			}
			for f.Len() > 0 {
				if p := popOne(t, f); p.initial {
					t.Fatalf("%s popped with isInInitialList true", p.key)
				}
			}
		})
	}
}

func TestDeltaFIFO_ResyncQueuesSyncForEveryKnownKey(t *testing.T) {
	a, b := testPodRV("ns", "a", "1"), testPodRV("", "b", "1")
	f, _ := knownFIFO(t, a, b)
	if err := f.Resync(); err != nil {
		t.Fatal(err)
	}
	eqStrings(t, "queue", sorted(f.ListKeys()), []string{"b", "ns/a"})
	p := popOne(t, f)
	if d := p.deltas[0]; d.Type != Sync || (d.Object != a && d.Object != b) {
		t.Fatalf("Sync delta %+v does not carry the cached object", d)
	}
}

func TestDeltaFIFO_ResyncSkipsQueuedKeys(t *testing.T) {
	f, _ := knownFIFO(t, testPodRV("ns", "a", "1"), testPodRV("ns", "b", "1"), testPodRV("ns", "c", "1"))
	if err := f.Update(testPodRV("ns", "a", "2")); err != nil {
		t.Fatal(err)
	}
	if err := f.Delete(testPodRV("ns", "b", "2")); err != nil {
		t.Fatal(err)
	}
	if err := f.Resync(); err != nil {
		t.Fatal(err)
	}
	eqStrings(t, "a", queued(t, f, "ns/a"), []string{"Updated ns/a@2"})
	eqStrings(t, "b", queued(t, f, "ns/b"), []string{"Deleted ns/b@2"})
	eqStrings(t, "c", queued(t, f, "ns/c"), []string{"Sync ns/c@1"})
	// A second Resync adds nothing: c is queued now.
	if err := f.Resync(); err != nil {
		t.Fatal(err)
	}
	eqStrings(t, "c after second Resync", queued(t, f, "ns/c"), []string{"Sync ns/c@1"})
}

func TestDeltaFIFO_ResyncWithoutKnownObjectsIsANoop(t *testing.T) {
	f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{})
	if err := f.Resync(); err != nil || f.Len() != 0 {
		t.Fatalf("Resync = %v, Len %d; want nothing", err, f.Len())
	}
}

func TestDeltaFIFO_ResyncReportsKnownObjectsError(t *testing.T) {
	boom := errors.New("boom")
	f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{KnownObjects: errKnown{boom}})
	if err := f.Resync(); !errors.Is(err, boom) {
		t.Fatalf("Resync = %v, want the KnownObjects error", err)
	}
	if err := f.Replace(nil, "1"); !errors.Is(err, boom) {
		t.Fatalf("Replace = %v, want the KnownObjects error", err)
	}
}

func TestDeltaFIFO_PopBlocksUntilAdd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{})
		got := make(chan string, 1)
		go func() {
			_ = f.Pop(func(key string, _ Deltas[*corev1.Pod], _ bool) error {
				got <- key
				return nil
			})
		}()
		synctest.Wait() // Pop is waiting
		select {
		case k := <-got:
			t.Fatalf("Pop returned %q from an empty queue", k)
		default:
		}
		if err := f.Add(testPod("ns", "a")); err != nil {
			t.Fatal(err)
		}
		if k := <-got; k != "ns/a" {
			t.Fatalf("Pop got %q", k)
		}
	})
}

func TestDeltaFIFO_PopHoldsLockDuringProcess(t *testing.T) {
	// Whatever process does is atomic with the pop: a concurrent Add (or
	// Replace, or Resync) waits until process returns.
	f, known := knownFIFO(t)
	if err := f.Add(testPodRV("ns", "a", "1")); err != nil {
		t.Fatal(err)
	}
	addDone := make(chan struct{})
	var processReturned atomic.Bool
	err := f.Pop(func(key string, deltas Deltas[*corev1.Pod], initial bool) error {
		go func() {
			_ = f.Add(testPodRV("ns", "a", "2"))
			if !processReturned.Load() {
				t.Errorf("Add returned while process was running")
			}
			close(addDone)
		}()
		select {
		case <-addDone:
			t.Errorf("Add completed while process held the queue")
		case <-time.After(100 * time.Millisecond):
		}
		if err := applyTo(known)(key, deltas, initial); err != nil {
			return err
		}
		processReturned.Store(true)
		return nil
	})
	if err != nil {
		t.Fatalf("Pop: %v", err)
	}
	<-addDone
	eqStrings(t, "requeued after pop", queued(t, f, "ns/a"), []string{"Added ns/a@2"})
}

func TestDeltaFIFO_PopRequeue(t *testing.T) {
	inner := errors.New("try again")
	for _, tc := range []struct {
		name       string
		processErr error
		newer      bool // a newer delta for the key arrives during process
		wantErr    error
		wantQueued []string
	}{
		{name: "requeue returns inner error", processErr: ErrRequeue{Err: inner}, wantErr: inner,
			wantQueued: []string{"Added ns/a@1", "Updated ns/a@2"}},
		{name: "requeue without inner error", processErr: ErrRequeue{}, wantErr: nil,
			wantQueued: []string{"Added ns/a@1", "Updated ns/a@2"}},
		{name: "wrapped requeue", processErr: fmt.Errorf("ctx: %w", ErrRequeue{Err: inner}), wantErr: inner,
			wantQueued: []string{"Added ns/a@1", "Updated ns/a@2"}},
		{name: "newer deltas win", processErr: ErrRequeue{Err: inner}, newer: true, wantErr: inner,
			wantQueued: []string{"Updated ns/a@3"}},
		{name: "other error drops", processErr: inner, wantErr: inner, wantQueued: nil},
		{name: "success drops", processErr: nil, wantErr: nil, wantQueued: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{})
			if err := f.Add(testPodRV("ns", "a", "1")); err != nil {
				t.Fatal(err)
			}
			if err := f.Update(testPodRV("ns", "a", "2")); err != nil {
				t.Fatal(err)
			}
			if err := f.Add(testPod("ns", "b")); err != nil {
				t.Fatal(err)
			}
			err := f.Pop(func(key string, _ Deltas[*corev1.Pod], _ bool) error {
				if tc.newer {
					// Pop holds the lock, so only the queue itself can add
					// here; this is what a newer delta would look like.
					if err := f.queueActionLocked(key, Delta[*corev1.Pod]{Type: Updated, Object: testPodRV("ns", "a", "3")}); err != nil {
						t.Fatal(err)
					}
				}
				return tc.processErr
			})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("Pop = %v, want %v", err, tc.wantErr)
			}
			var rq ErrRequeue
			if errors.As(err, &rq) {
				t.Fatalf("Pop returned the ErrRequeue wrapper %v, want its inner error", err)
			}
			eqStrings(t, "queued for a", queued(t, f, "ns/a"), tc.wantQueued)
			if tc.wantQueued != nil {
				// Requeued at the back.
				eqStrings(t, "queue", f.ListKeys(), []string{"ns/b", "ns/a"})
			}
		})
	}
}

func TestDeltaFIFO_ErrRequeueMessage(t *testing.T) {
	inner := errors.New("inner")
	if got := (ErrRequeue{Err: inner}).Error(); got != "inner" {
		t.Errorf("Error() = %q", got)
	}
	if got := (ErrRequeue{}).Error(); got == "" {
		t.Errorf("Error() of empty ErrRequeue is empty")
	}
	if !errors.Is(ErrRequeue{Err: inner}, inner) {
		t.Errorf("ErrRequeue does not unwrap to its Err")
	}
}

func TestDeltaFIFO_AddIfNotPresent(t *testing.T) {
	f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{})
	f.AddIfNotPresent("ns/a", Deltas[*corev1.Pod]{{Type: Added, Object: testPodRV("ns", "a", "1")}})
	eqStrings(t, "not queued: added", queued(t, f, "ns/a"), []string{"Added ns/a@1"})
	f.AddIfNotPresent("ns/a", Deltas[*corev1.Pod]{{Type: Updated, Object: testPodRV("ns", "a", "0")}})
	eqStrings(t, "queued: kept", queued(t, f, "ns/a"), []string{"Added ns/a@1"})
	f.AddIfNotPresent("ns/b", nil)
	if _, ok := f.GetByKey("ns/b"); ok || f.Len() != 1 {
		t.Fatalf("empty deltas were queued")
	}
}

func TestDeltaFIFO_PopPanicReleasesTheQueue(t *testing.T) {
	f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{})
	if err := f.Add(testPod("ns", "a")); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatalf("process panic was swallowed")
			}
		}()
		_ = f.Pop(func(string, Deltas[*corev1.Pod], bool) error { panic("handler bug") })
	}()
	// The lock is free again.
	if err := f.Add(testPod("ns", "b")); err != nil {
		t.Fatal(err)
	}
	eqStrings(t, "queue", f.ListKeys(), []string{"ns/b"})
}

func TestDeltaFIFO_CloseUnblocksPop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{})
		errc := make(chan error, 2)
		for range 2 {
			go func() {
				errc <- f.Pop(func(string, Deltas[*corev1.Pod], bool) error {
					t.Errorf("process called on an empty queue")
					return nil
				})
			}()
		}
		synctest.Wait() // both Pops are waiting
		if f.IsClosed() {
			t.Fatalf("IsClosed before Close")
		}
		f.Close()
		for range 2 {
			if err := <-errc; !errors.Is(err, ErrFIFOClosed) {
				t.Fatalf("Pop after Close = %v, want ErrFIFOClosed", err)
			}
		}
		if !f.IsClosed() {
			t.Fatalf("not IsClosed after Close")
		}
		if err := f.Pop(func(string, Deltas[*corev1.Pod], bool) error { return nil }); !errors.Is(err, ErrFIFOClosed) {
			t.Fatalf("Pop on a closed empty queue = %v", err)
		}
	})
}

func TestDeltaFIFO_CloseDrainsQueuedItemsFirst(t *testing.T) {
	f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{})
	for _, n := range []string{"a", "b"} {
		if err := f.Add(testPod("ns", n)); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	eqStrings(t, "drained", drainKeys(t, f), []string{"ns/a", "ns/b"})
	if err := f.Pop(func(string, Deltas[*corev1.Pod], bool) error { return nil }); !errors.Is(err, ErrFIFOClosed) {
		t.Fatalf("Pop = %v, want ErrFIFOClosed", err)
	}
}

// countingTransform marks each object it sees with label transformed=true
// on a copy, and counts calls.
type countingTransform struct {
	calls atomic.Int32
}

func (c *countingTransform) fn(p *corev1.Pod) (*corev1.Pod, error) {
	c.calls.Add(1)
	if p.Labels["transformed"] == "true" {
		return nil, fmt.Errorf("%s/%s transformed twice", p.Namespace, p.Name)
	}
	out := p.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Labels["transformed"] = "true"
	out.ManagedFields = nil
	return out, nil
}

func TestDeltaFIFO_TransformAppliedOnceNotToSyncOrTombstones(t *testing.T) {
	tr := &countingTransform{}
	known := NewIndexer[*corev1.Pod](nil, nil)
	f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{KnownObjects: known, Transform: tr.fn})
	process := applyTo(known)
	pop := func() popped {
		t.Helper()
		var p popped
		if err := f.Pop(func(key string, ds Deltas[*corev1.Pod], initial bool) error {
			p = popped{key, slices.Clone(ds), initial}
			return process(key, ds, initial)
		}); err != nil {
			t.Fatalf("Pop: %v", err)
		}
		return p
	}
	checkAll := func(ds Deltas[*corev1.Pod]) {
		t.Helper()
		for _, d := range ds {
			if d.Object.Labels["transformed"] != "true" {
				t.Fatalf("%s delta carries an untransformed object", d.Type)
			}
		}
	}

	// Objects from the server are transformed once each.
	if err := f.Replace([]*corev1.Pod{testPod("ns", "a"), testPod("ns", "b")}, "1"); err != nil {
		t.Fatal(err)
	}
	if err := f.Add(testPod("ns", "c")); err != nil {
		t.Fatal(err)
	}
	if err := f.Update(testPod("ns", "c")); err != nil {
		t.Fatal(err)
	}
	if n := tr.calls.Load(); n != 4 {
		t.Fatalf("transform called %d times for 4 objects", n)
	}
	for f.Len() > 0 {
		checkAll(pop().deltas)
	}

	// Sync deltas carry the cached, already transformed, objects.
	if err := f.Resync(); err != nil {
		t.Fatal(err)
	}
	// Tombstones too.
	if err := f.Replace([]*corev1.Pod{testPod("ns", "a"), testPod("ns", "b")}, "2"); err != nil {
		t.Fatal(err)
	}
	if n := tr.calls.Load(); n != 6 {
		t.Fatalf("transform called %d times, want 6 (2 listed objects, no Sync, no tombstone)", n)
	}
	cachedC, _, _ := known.GetByKey("ns/c")
	eqStrings(t, "c", queued(t, f, "ns/c"), []string{"Sync ns/c@", "Deleted ns/c@ (tombstone)"})
	ds, _ := f.GetByKey("ns/c")
	for _, d := range ds {
		if d.Object != cachedC {
			t.Fatalf("%s delta does not carry the cached object", d.Type)
		}
	}
	// A requeue does not transform again.
	before := tr.calls.Load()
	if err := f.Pop(func(string, Deltas[*corev1.Pod], bool) error { return ErrRequeue{} }); err != nil {
		t.Fatal(err)
	}
	if tr.calls.Load() != before {
		t.Fatalf("requeue ran the transform")
	}
	// An observed Delete comes from the server and is transformed.
	if err := f.Delete(testPod("ns", "a")); err != nil {
		t.Fatal(err)
	}
	if n := tr.calls.Load(); n != before+1 {
		t.Fatalf("Delete ran the transform %d times", n-before)
	}
	for f.Len() > 0 {
		checkAll(pop().deltas)
	}
}

func TestDeltaFIFO_TransformErrors(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		fn   TransformFunc[*corev1.Pod]
		want error
	}{
		{"error", func(*corev1.Pod) (*corev1.Pod, error) { return nil, boom }, boom},
		{"nil result", func(*corev1.Pod) (*corev1.Pod, error) { return nil, nil }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{Transform: tc.fn})
			for op, call := range map[string]func() error{
				"Add":     func() error { return f.Add(testPod("ns", "a")) },
				"Update":  func() error { return f.Update(testPod("ns", "a")) },
				"Replace": func() error { return f.Replace([]*corev1.Pod{testPod("ns", "a")}, "1") },
			} {
				err := call()
				if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
					t.Errorf("%s = %v, want error %v", op, err, tc.want)
				}
			}
			if f.Len() != 0 {
				t.Fatalf("failed transforms queued %q", f.ListKeys())
			}
		})
	}
}

func TestDeltaFIFO_KeyFuncErrors(t *testing.T) {
	errKey := errors.New("no key")
	failing := func(*corev1.Pod) (string, error) { return "", errKey }
	for _, tc := range []struct {
		name    string
		keyFunc KeyFunc[*corev1.Pod]
		obj     *corev1.Pod
		want    error
	}{
		{"nameless pod", nil, testPod("ns", ""), ErrNoName},
		{"typed nil pod", nil, nil, ErrNoName},
		{"failing key func", failing, testPod("ns", "a"), errKey},
		{"typed nil with custom key func", failing, nil, ErrNoName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{KeyFunc: tc.keyFunc})
			if _, err := f.KeyOf(tc.obj); !errors.Is(err, tc.want) {
				t.Errorf("KeyOf = %v, want %v", err, tc.want)
			}
			for op, call := range map[string]func() error{
				"Add":     func() error { return f.Add(tc.obj) },
				"Update":  func() error { return f.Update(tc.obj) },
				"Delete":  func() error { return f.Delete(tc.obj) },
				"Replace": func() error { return f.Replace([]*corev1.Pod{tc.obj}, "1") },
			} {
				if err := call(); !errors.Is(err, tc.want) {
					t.Errorf("%s = %v, want %v", op, err, tc.want)
				}
			}
			if f.Len() != 0 {
				t.Fatalf("failed operations queued %q", f.ListKeys())
			}
		})
	}
}

func TestDeltaFIFO_CustomKeyFunc(t *testing.T) {
	f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{KeyFunc: nameKey})
	if err := f.Add(testPodRV("a", "p", "1")); err != nil {
		t.Fatal(err)
	}
	if err := f.Add(testPodRV("b", "p", "2")); err != nil {
		t.Fatal(err)
	}
	eqStrings(t, "queue", f.ListKeys(), []string{"p"})
	if k, err := f.KeyOf(testPod("x", "p")); err != nil || k != "p" {
		t.Fatalf("KeyOf = %q, %v", k, err)
	}
}

func TestDeltaFIFO_GetByKeyReturnsACopy(t *testing.T) {
	f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{})
	if err := f.Add(testPodRV("ns", "a", "1")); err != nil {
		t.Fatal(err)
	}
	ds, ok := f.GetByKey("ns/a")
	if !ok {
		t.Fatalf("GetByKey: not found")
	}
	ds[0].Type = Deleted
	_ = append(ds, Delta[*corev1.Pod]{Type: Sync, Object: testPod("ns", "a")})
	eqStrings(t, "queued", queued(t, f, "ns/a"), []string{"Added ns/a@1"})
	if _, ok := f.GetByKey("ns/none"); ok {
		t.Fatalf("GetByKey of an unqueued key reported deltas")
	}
}

func TestDeltaFIFO_Unstructured(t *testing.T) {
	mk := func(ns, name, rv string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("example.com/v1")
		u.SetKind("Widget")
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetResourceVersion(rv)
		return u
	}
	known := NewIndexer[*unstructured.Unstructured](nil, nil)
	mustAdd(t, known, mk("", "global", "1"), mk("ns", "old", "1"))
	f := NewDeltaFIFO(DeltaFIFOOptions[*unstructured.Unstructured]{KnownObjects: known})
	if err := f.Replace([]*unstructured.Unstructured{mk("", "global", "2"), mk("ns", "new", "2")}, "2"); err != nil {
		t.Fatal(err)
	}
	eqStrings(t, "queue", f.ListKeys(), []string{"global", "ns/new", "ns/old"})
	got := map[string]Delta[*unstructured.Unstructured]{}
	for f.Len() > 0 {
		if err := f.Pop(func(key string, ds Deltas[*unstructured.Unstructured], initial bool) error {
			if !initial {
				t.Errorf("%s not in the initial list", key)
			}
			got[key] = ds[0]
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if d := got["ns/old"]; d.Type != Deleted || !d.FinalStateUnknown || d.Object.GetResourceVersion() != "1" {
		t.Fatalf("ns/old = %+v, want a tombstone of rv 1", d)
	}
	if d := got["global"]; d.Type != Replaced || d.Object.GetResourceVersion() != "2" {
		t.Fatalf("global = %+v", d)
	}
	var nilU *unstructured.Unstructured
	if err := f.Add(nilU); !errors.Is(err, ErrNoName) {
		t.Fatalf("Add(nil unstructured) = %v", err)
	}
	if !f.HasSynced() {
		t.Fatalf("not HasSynced")
	}
}

func TestDeltaFIFO_ConcurrentProducerAndConsumerConverge(t *testing.T) {
	// A producer (as the Reflector) and a consumer (as processLoop applying
	// deltas to the cache) running at once end with the cache holding
	// exactly the producer's final state.
	known := NewIndexer[*corev1.Pod](nil, nil)
	f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{KnownObjects: known})
	final := map[string]string{}
	var wg sync.WaitGroup
	wg.Go(func() {
		r := rand.New(rand.NewPCG(1, 2))
		for i := range 3000 {
			name := "p" + strconv.Itoa(r.IntN(40))
			p := testPodRV("ns", name, strconv.Itoa(i))
			var err error
			switch n := r.IntN(10); {
			case n < 6:
				err = f.Update(p)
				final["ns/"+name] = p.ResourceVersion
			case n < 9:
				err = f.Delete(p)
				delete(final, "ns/"+name)
			default:
				// A relist of the producer's current state.
				var list []*corev1.Pod
				for k, rv := range final {
					_, n, _ := SplitMetaNamespaceKey(k)
					list = append(list, testPodRV("ns", n, rv))
				}
				err = f.Replace(list, strconv.Itoa(i))
				if i%7 == 0 {
					err = errors.Join(err, f.Resync())
				}
			}
			if err != nil {
				t.Error(err)
				return
			}
		}
		f.Close()
	})
	process := applyTo(known)
	for {
		err := f.Pop(process)
		if errors.Is(err, ErrFIFOClosed) {
			break
		}
		if err != nil {
			t.Fatalf("Pop: %v", err)
		}
	}
	wg.Wait()
	got := map[string]string{}
	for _, p := range known.List() {
		got[p.Namespace+"/"+p.Name] = p.ResourceVersion
	}
	if len(got) != len(final) {
		t.Fatalf("cache has %d objects, producer ended with %d", len(got), len(final))
	}
	for k, rv := range final {
		if got[k] != rv {
			t.Fatalf("%s: cache rv %q, want %q", k, got[k], rv)
		}
	}
}

func TestDeltaFIFO_ReusedDeltasStartEmpty(t *testing.T) {
	// Popped slices are reused for later keys: a new key must start with
	// only its own deltas.
	f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{})
	for i := range 50 {
		name := "p" + strconv.Itoa(i)
		for j := range 1 + i%4 {
			if err := f.Update(testPodRV("ns", name, strconv.Itoa(j))); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Add(testPodRV("ns", "fresh"+name, "0")); err != nil {
			t.Fatal(err)
		}
		eqStrings(t, "fresh key", queued(t, f, "ns/fresh"+name), []string{"Added ns/fresh" + name + "@0"})
		for f.Len() > 0 {
			p := popOne(t, f)
			for _, d := range p.deltas {
				if "ns/"+d.Object.Name != p.key {
					t.Fatalf("%s popped with a delta of %s", p.key, d.Object.Name)
				}
			}
		}
	}
}

func TestDeltaFIFO_RequeuedDeltasAreNotReused(t *testing.T) {
	f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{})
	if err := f.Add(testPodRV("ns", "a", "1")); err != nil {
		t.Fatal(err)
	}
	if err := f.Update(testPodRV("ns", "a", "2")); err != nil {
		t.Fatal(err)
	}
	if err := f.Pop(func(string, Deltas[*corev1.Pod], bool) error { return ErrRequeue{} }); err != nil {
		t.Fatal(err)
	}
	// New keys must not be handed a's slice.
	for _, n := range []string{"b", "c", "d"} {
		if err := f.Add(testPodRV("ns", n, "9")); err != nil {
			t.Fatal(err)
		}
	}
	eqStrings(t, "a", queued(t, f, "ns/a"), []string{"Added ns/a@1", "Updated ns/a@2"})
}

func TestDeltaFIFO_ReplacedKeysGrowIndependently(t *testing.T) {
	// The keys of one Replace share one allocation; a later delta for one of
	// them must not spill into its neighbour's.
	f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{})
	list := []*corev1.Pod{testPodRV("ns", "a", "1"), testPodRV("ns", "b", "1"), testPodRV("ns", "c", "1")}
	if err := f.Replace(list, "1"); err != nil {
		t.Fatal(err)
	}
	if err := f.Update(testPodRV("ns", "a", "2")); err != nil {
		t.Fatal(err)
	}
	if err := f.Delete(testPodRV("ns", "b", "2")); err != nil {
		t.Fatal(err)
	}
	eqStrings(t, "a", queued(t, f, "ns/a"), []string{"Replaced ns/a@1", "Updated ns/a@2"})
	eqStrings(t, "b", queued(t, f, "ns/b"), []string{"Replaced ns/b@1", "Deleted ns/b@2"})
	eqStrings(t, "c", queued(t, f, "ns/c"), []string{"Replaced ns/c@1"})
}

func TestDeltaFIFO_LargeBatchDrainsAndQueueKeepsWorking(t *testing.T) {
	// A batch past the size at which an emptied queue drops its storage
	// drains in order, and the queue works as before afterwards.
	known := NewIndexer[*corev1.Pod](nil, nil)
	f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{KnownObjects: known})
	n := 3 * shrinkAbove
	list := make([]*corev1.Pod, n)
	want := make([]string, n)
	for i := range list {
		list[i] = testPod("ns", fmt.Sprintf("p%05d", i))
		want[i] = "ns/" + list[i].Name
	}
	if err := f.Replace(list, "1"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for f.Len() > 0 {
		if err := f.Pop(func(key string, ds Deltas[*corev1.Pod], initial bool) error {
			got = append(got, key)
			return applyTo(known)(key, ds, initial)
		}); err != nil {
			t.Fatal(err)
		}
	}
	eqStrings(t, "pop order", got, want)
	if !f.HasSynced() || len(known.ListKeys()) != n {
		t.Fatalf("HasSynced %v, cache holds %d of %d", f.HasSynced(), len(known.ListKeys()), n)
	}
	if err := f.Replace(list[:10], "2"); err != nil {
		t.Fatal(err)
	}
	if f.Len() != n {
		t.Fatalf("second Replace queued %d keys, want %d (10 listed, the rest tombstones)", f.Len(), n)
	}
	eqStrings(t, "first keys", f.ListKeys()[:3], want[:3])
	eqStrings(t, "a tombstone", queued(t, f, want[n-1]), []string{"Deleted ns/" + list[n-1].Name + "@ (tombstone)"})
}

// TestDeltaFIFO_InOrder: InOrder, every change takes its own place and is
// popped alone, in the order given across keys; by default a key is popped
// once with all its changes, at the place of its oldest.
func TestDeltaFIFO_InOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		inOrder bool
		keys    []string // ListKeys before popping
		want    []string // per pop: "key: delta, delta"
	}{
		{"per key", false, []string{"ns/a", "ns/b", "ns/c"}, []string{
			"ns/a: Added ns/a@1, Updated ns/a@3, Updated ns/a@6, Deleted ns/a@7",
			"ns/b: Added ns/b@2, Deleted ns/b@4",
			"ns/c: Added ns/c@5",
		}},
		{"in order", true, []string{"ns/a", "ns/b", "ns/c"}, []string{
			"ns/a: Added ns/a@1",
			"ns/b: Added ns/b@2",
			"ns/a: Updated ns/a@3",
			"ns/b: Deleted ns/b@4",
			"ns/c: Added ns/c@5",
			"ns/a: Updated ns/a@6",
			// The second delete of a folds into the first (dedupDeltas)
			// and takes no place of its own.
			"ns/a: Deleted ns/a@7",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{InOrder: tc.inOrder})
			for i, op := range []struct {
				do   func(*corev1.Pod) error
				name string
			}{{f.Add, "a"}, {f.Add, "b"}, {f.Update, "a"}, {f.Delete, "b"}, {f.Add, "c"}, {f.Update, "a"}, {f.Delete, "a"}, {f.Delete, "a"}} {
				rv := strconv.Itoa(min(i+1, 7))
				if err := op.do(testPodRV("ns", op.name, rv)); err != nil {
					t.Fatal(err)
				}
			}
			eqStrings(t, "ListKeys", f.ListKeys(), tc.keys)
			if f.Len() != len(tc.want) {
				t.Errorf("Len = %d, want %d", f.Len(), len(tc.want))
			}
			var got []string
			for f.Len() > 0 {
				p := popOne(t, f)
				got = append(got, p.key+": "+strings.Join(summaries(p.deltas), ", "))
			}
			eqStrings(t, "pops", got, tc.want)
			if rv := f.PoppedResourceVersion(); rv != "7" {
				t.Errorf("PoppedResourceVersion = %q, want 7", rv)
			}
		})
	}
}
