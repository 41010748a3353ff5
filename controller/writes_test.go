package controller

import (
	"math/rand/v2"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func cm(uid string, rv int) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: types.UID(uid), ResourceVersion: strconv.Itoa(rv)}}
}

func TestWrites(t *testing.T) {
	type step struct {
		// replaced, when set, records base → newer; else latest asks with
		// cached and expects want.
		replaced     bool
		base, newer  *corev1.ConfigMap
		forget       bool
		cached, want *corev1.ConfigMap
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"nothing written: the cache", []step{{cached: cm("u", 1), want: cm("u", 1)}}},
		{"the cache behind a write: the write", []step{
			{replaced: true, base: cm("u", 1), newer: cm("u", 2)},
			{cached: cm("u", 1), want: cm("u", 2)},
			{cached: cm("u", 1), want: cm("u", 2)},
		}},
		{"the cache shows the write: the cache, and the write is forgotten", []step{
			{replaced: true, base: cm("u", 1), newer: cm("u", 2)},
			{cached: cm("u", 2), want: cm("u", 2)},
			{cached: cm("u", 1), want: cm("u", 1)},
		}},
		{"the cache shows someone else's later write: the cache", []step{
			{replaced: true, base: cm("u", 1), newer: cm("u", 2)},
			{cached: cm("u", 3), want: cm("u", 3)},
		}},
		{"writes built on writes: the last, whichever of them the cache shows", []step{
			{replaced: true, base: cm("u", 1), newer: cm("u", 2)},
			{replaced: true, base: cm("u", 2), newer: cm("u", 3)},
			{cached: cm("u", 1), want: cm("u", 3)},
			{cached: cm("u", 2), want: cm("u", 3)},
			{cached: cm("u", 3), want: cm("u", 3)},
		}},
		{"a conflict read back, then written over: both superseded", []step{
			{replaced: true, base: cm("u", 1), newer: cm("u", 5)},
			{replaced: true, base: cm("u", 5), newer: cm("u", 6)},
			{cached: cm("u", 1), want: cm("u", 6)},
		}},
		{"a write not built on the last: only its own base superseded", []step{
			{replaced: true, base: cm("u", 1), newer: cm("u", 2)},
			{replaced: true, base: cm("u", 4), newer: cm("u", 5)},
			{cached: cm("u", 1), want: cm("u", 1)},
		}},
		{"an object of the same name recreated: the cache", []step{
			{replaced: true, base: cm("u", 1), newer: cm("u", 2)},
			{cached: cm("other", 1), want: cm("other", 1)},
		}},
		{"forgotten: the cache", []step{
			{replaced: true, base: cm("u", 1), newer: cm("u", 2)},
			{forget: true},
			{cached: cm("u", 1), want: cm("u", 1)},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var w Writes[*corev1.ConfigMap] // the zero value is ready
			for i, s := range tc.steps {
				switch {
				case s.replaced:
					w.Replaced("ns/a", s.base, s.newer)
				case s.forget:
					w.Forget("ns/a")
				default:
					got := w.Latest("ns/a", s.cached)
					if got.UID != s.want.UID || got.ResourceVersion != s.want.ResourceVersion {
						t.Fatalf("step %d: Latest(%s@%s) = %s@%s, want %s@%s", i, s.cached.UID, s.cached.ResourceVersion,
							got.UID, got.ResourceVersion, s.want.UID, s.want.ResourceVersion)
					}
				}
			}
		})
	}
}

// TestWritesProperty drives Writes over random histories of one object:
// the controller writes (building on Latest, as a sync does, and after a
// conflict on what it reads back), others write, and the cache catches up
// by random steps, never lagging by more than maxSuperseded versions,
// what Writes remembers. Latest is never older than the cache; and when
// the cache shows a version the controller has seen (written on, written
// or read back) and lags the server only by the controller's own writes,
// Latest is the server's newest version: the controller's next write
// does not conflict. A version the controller never saw (another's
// write it skipped over by reading back a newer one) it cannot place:
// shown by the cache, it makes Writes forget, and costs a conflict.
func TestWritesProperty(t *testing.T) {
	held := 0 // how often the second property applied
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 1))
		var w Writes[*corev1.ConfigMap]
		server := []bool{false} // server[v-1]: whether version v is the controller's
		cacheAt := 1
		// seen holds the versions the controller wrote on, wrote or read.
		seen := map[string]bool{}
		for range 200 {
			cached := cm("u", cacheAt)
			step := r.IntN(3)
			if len(server)-cacheAt >= maxSuperseded {
				// The cache lags by no more than Writes remembers.
				step = 2
			}
			switch step {
			case 0: // the controller writes on what Latest gives it
				base := w.Latest("ns/a", cached)
				seen[base.ResourceVersion] = true
				if base.ResourceVersion != strconv.Itoa(len(server)) {
					// A conflict: the controller reads the server back and
					// writes over it, as the status writers do.
					fresh := cm("u", len(server))
					w.Replaced("ns/a", base, fresh)
					base = fresh
					seen[base.ResourceVersion] = true
				}
				server = append(server, true)
				w.Replaced("ns/a", base, cm("u", len(server)))
				seen[strconv.Itoa(len(server))] = true
			case 1: // someone else writes
				server = append(server, false)
			case 2: // the cache catches up some
				if lag := len(server) - cacheAt; lag > 0 {
					cacheAt += 1 + r.IntN(lag)
				}
			}
			cached = cm("u", cacheAt)
			got, _ := strconv.Atoi(w.Latest("ns/a", cached).ResourceVersion)
			if got < cacheAt {
				t.Fatalf("seed %d: Latest gives version %d, older than the cache's %d", seed, got, cacheAt)
			}
			lagOnlyOwn := true
			for v := cacheAt + 1; v <= len(server); v++ {
				lagOnlyOwn = lagOnlyOwn && server[v-1]
			}
			if !seen[cached.ResourceVersion] {
				// The cache showed a version the controller cannot place,
				// so Writes takes the cache for current and forgets.
				clear(seen)
			}
			if lagOnlyOwn && seen[cached.ResourceVersion] {
				held++
			}
			if lagOnlyOwn && seen[cached.ResourceVersion] && got != len(server) {
				t.Fatalf("seed %d: cache at %d behind only the controller's writes up to %d, Latest gives %d", seed, cacheAt, len(server), got)
			}
		}
	}
	if held < 1000 {
		t.Errorf("the cache lagged by the controller's own writes only %d times in 40,000 steps; the histories test too little", held)
	}
	t.Logf("property checked in %d states", held)
}
