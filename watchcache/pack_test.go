package watchcache

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/internal/benchpods"
)

// TestPackRoundTrip packs values against dictionaries, related and not,
// and unpacks them to the same bytes.
func TestPackRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	}
	pod := podValue("ns", "web-1", map[string]string{"app": "web", "tier": "front"}, corev1.PodRunning)
	other := podValue("team-a", "api-7f9", map[string]string{"app": "api"}, corev1.PodPending)
	tests := []struct {
		name        string
		dict, value []byte
		// smaller: the packed form must be smaller than value by at least a half.
		smaller bool
	}{
		{"same", pod, pod, true},
		{"related", pod, other, true},
		{"unrelated", random(300), other, false},
		{"empty", pod, nil, false},
		{"short", pod, pod[:7], false},
		{"dictionary short", pod[:9], pod, false},
		{"repeats", bytes.Repeat([]byte("abcdefgh"), 40), bytes.Repeat([]byte("abcdefgh"), 100), true},
	}
	for i := range 200 {
		// Values made of runs of the dictionary and random bytes.
		d := random(1 + rng.IntN(2000))
		var v []byte
		for range rng.IntN(10) {
			if rng.IntN(2) == 0 {
				v = append(v, random(rng.IntN(20))...)
			} else {
				s := rng.IntN(len(d))
				v = append(v, d[s:s+rng.IntN(len(d)-s+1)]...)
			}
		}
		tests = append(tests, struct {
			name        string
			dict, value []byte
			smaller     bool
		}{fmt.Sprint("random-", i), d, v, false})
	}
	for _, tc := range tests {
		d := newDictionary(tc.dict)
		ops := d.pack(tc.value)
		got, err := d.unpack(ops, len(tc.value))
		if err != nil || !bytes.Equal(got, tc.value) {
			t.Fatalf("%s: unpacked %q, %v; want %q", tc.name, got, err, tc.value)
		}
		if tc.smaller && len(ops) > len(tc.value)/2 {
			t.Errorf("%s: packed %d bytes into %d", tc.name, len(tc.value), len(ops))
		}
		// Anything else unpacks to an error, never a panic.
		for i := range ops {
			for _, bad := range [][]byte{ops[:i], append(bytes.Clone(ops[:i]), 0xff^ops[i])} {
				if b, err := d.unpack(bad, len(tc.value)); err == nil && !bytes.Equal(b, tc.value) {
					t.Fatalf("%s: corrupt %x unpacked to %q with no error", tc.name, bad, b)
				}
			}
		}
	}
}

// TestReplacedVersionsPacked checks that a version replaced in the state
// is packed once the cache has applied the replacing event, and that
// lists at its revision and watches replaying it serve its bytes as they
// were.
func TestReplacedVersionsPacked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t)
		c := newPodCache(t, st, nil)
		lbls := map[string]string{"app": "web"}
		seed := put(t, st, "other", "seed", lbls, corev1.PodPending)
		first := put(t, st, "ns", "a", lbls, corev1.PodPending)
		second := put(t, st, "ns", "b", lbls, corev1.PodPending)
		rev := put(t, st, "ns", "a", lbls, corev1.PodRunning)
		seen(c, rev)
		// The replaced version is packed after the revision is
		// published, outside the cache's lock.
		synctest.Wait()
		c.mu.Lock()
		last := c.window.at(c.window.n - 1)
		c.mu.Unlock()
		if last.prev.plain.Load() != nil || last.prev.packed.Load() == nil {
			t.Fatal("the replaced version is not packed")
		}
		if last.cur.plain.Load() == nil {
			t.Fatal("the current version is packed")
		}
		if want := podValue("ns", "a", lbls, corev1.PodPending); !bytes.Equal(last.prev.Value(), want) {
			t.Errorf("the packed version unpacks to %s, want %s", last.prev.Value(), want)
		}
		res, err := c.List(t.Context(), ListOptions{ResourceVersion: fmt.Sprint(first), ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		if err != nil || len(res.Items) != 2 || res.Items[0].Object().Status.Phase != corev1.PodPending {
			t.Fatalf("list at %d: %v, %v", first, res.Items, err)
		}
		w, err := c.Watch(t.Context(), WatchOptions{ResourceVersion: fmt.Sprint(seed)})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		got := collectUntil(t, w, rev)
		want := []ev{{"ADDED", "ns/a", fmt.Sprint(first)}, {"ADDED", "ns/b", fmt.Sprint(second)}, {"MODIFIED", "ns/a", fmt.Sprint(rev)}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("replayed %v, want %v", got, want)
		}
	})
}

// BenchmarkPack packs and unpacks a pod's version against another pod's,
// pods of benchpods (the pods of BenchmarkCachedPodHeap).
func BenchmarkPack(b *testing.B) {
	d := newDictionary([]byte(benchpods.Pod(1)))
	v := []byte(benchpods.Pod(2))
	ops := d.pack(v)
	b.Run("pack", func(b *testing.B) {
		b.SetBytes(int64(len(v)))
		for b.Loop() {
			d.pack(v)
		}
		b.ReportMetric(float64(len(ops)), "packed-B")
	})
	b.Run("unpack", func(b *testing.B) {
		b.SetBytes(int64(len(v)))
		for b.Loop() {
			if _, err := d.unpack(ops, len(v)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzPack packs any value against any dictionary and unpacks it to the
// same bytes, and unpacks any bytes to an error or to size bytes, never a
// panic.
func FuzzPack(f *testing.F) {
	pod := podValue("ns", "web-1", map[string]string{"app": "web"}, corev1.PodRunning)
	f.Add(pod, podValue("ns", "web-2", nil, corev1.PodPending), []byte{3, 'a', 'b', 'c', 0})
	f.Add([]byte("abcdefgh"), []byte("xxabcdefghyy"), []byte{0, 8, 0, 0})
	f.Fuzz(func(t *testing.T, dict, value, ops []byte) {
		d := newDictionary(dict)
		got, err := d.unpack(d.pack(value), len(value))
		if err != nil || !bytes.Equal(got, value) {
			t.Fatalf("unpacked %q, %v; want %q", got, err, value)
		}
		if b, err := d.unpack(ops, len(value)); err == nil && len(b) != len(value) {
			t.Fatalf("unpacked %d bytes with no error, want %d", len(b), len(value))
		}
	})
}
