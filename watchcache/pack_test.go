package watchcache

import (
	"bytes"
	"encoding/json"
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

// TestColdVersionsPacked: the current versions of objects written
// plainVersions or more versions ago are packed too, whether the cache
// took them in from its watch or from its first list, and every read
// (Get, a list at the current revision, a watch's initial events, a
// prefix of the bytes) sees them unchanged.
func TestColdVersionsPacked(t *testing.T) {
	const extra = 10
	for _, tc := range []struct {
		name   string
		listed bool // written before the cache starts
	}{
		{"written while cached", false},
		{"listed at start", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := newStore(t)
				var c *Cache[*corev1.Pod]
				if !tc.listed {
					c = newPodCache(t, st, nil)
				}
				var rev int64
				for i := range plainVersions + extra {
					rev = put(t, st, "ns", fmt.Sprintf("p-%04d", i), map[string]string{"app": "web"}, corev1.PodRunning)
				}
				if tc.listed {
					c = newPodCache(t, st, nil)
				}
				seen(c, rev)
				synctest.Wait()
				c.mu.Lock()
				state := make(map[string]*Item[*corev1.Pod], len(c.state))
				for k, v := range c.state {
					state[k] = v
				}
				c.mu.Unlock()
				packed := 0
				for key, it := range state {
					var i int
					if _, err := fmt.Sscanf(key, prefix+"ns/p-%04d", &i); err != nil {
						t.Fatal(err)
					}
					if it.Packed() != (i < extra) {
						t.Errorf("%s packed: %v, want %v", key, it.Packed(), i < extra)
					}
					if it.Packed() {
						packed++
					}
					want := podValue("ns", fmt.Sprintf("p-%04d", i), map[string]string{"app": "web"}, corev1.PodRunning)
					if got := it.Value(); !bytes.Equal(got, want) {
						t.Fatalf("%s unpacks to %s, want %s", key, got, want)
					}
					if got := it.AppendValue([]byte("x"), 20); string(got) != "x"+string(want[:20]) {
						t.Fatalf("%s's first 20 bytes are %q, want %q", key, got[1:], want[:20])
					}
					// A list reads the opening of each packed version
					// into a buffer of its own.
					buf := make([]byte, 0, 20)
					if n := testing.AllocsPerRun(10, func() { it.AppendValue(buf, 20) }); n != 0 {
						t.Errorf("reading %s's first 20 bytes into a buffer that holds them allocated %v times", key, n)
					}
				}
				if packed != extra {
					t.Errorf("%d versions packed, want %d", packed, extra)
				}
				if pod, ok := c.Get(podKey("ns", "p-0000")); !ok || pod.Name != "p-0000" || pod.Status.Phase != corev1.PodRunning {
					t.Errorf("Get of a packed version: %v, %v", pod, ok)
				}
				res, err := c.List(t.Context(), ListOptions{})
				if err != nil || len(res.Items) != plainVersions+extra || res.Items[0].Object().Name != "p-0000" {
					t.Fatalf("list: %d items, %v", len(res.Items), err)
				}
				w, err := c.Watch(t.Context(), WatchOptions{ResourceVersion: "0"})
				if err != nil {
					t.Fatal(err)
				}
				defer w.Stop()
				if got := collectUntil(t, w, rev); len(got) != plainVersions+extra {
					t.Errorf("a watch from 0 got %d initial events, want %d", len(got), plainVersions+extra)
				}
			})
		})
	}
}

// TestDictionaryExtends: a version of another shape than the dictionary
// knows (a pod with its status, after pods without) packs poorly against
// it and well against the dictionary it extends, and the versions packed
// before still unpack against theirs.
func TestDictionaryExtends(t *testing.T) {
	created := benchpods.Pod(1)
	withStatus := func(i int) []byte {
		var pod corev1.Pod
		if err := json.Unmarshal([]byte(benchpods.Pod(i)), &pod); err != nil {
			t.Fatal(err)
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.0.0.%d", i), HostIP: "192.168.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Image: "registry.example/app:1.2.3", ImageID: "registry.example/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
				ContainerID: "containerd://fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
		b, err := json.Marshal(&pod)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	d := newDictionary([]byte(created))
	before := d.pack([]byte(benchpods.Pod(2)))
	first, second := withStatus(3), withStatus(4)
	if ops := d.pack(second); len(ops) <= len(second)/poorPacking {
		t.Fatalf("a pod with its status packs to %d of %d bytes against pods without", len(ops), len(second))
	}
	e := d.extend(first)
	if ops := e.pack(second); len(ops) > len(second)/poorPacking {
		t.Errorf("a pod with its status packs to %d of %d bytes against a dictionary extended by another", len(ops), len(second))
	}
	if got, err := d.unpack(before, len(benchpods.Pod(2))); err != nil || string(got) != benchpods.Pod(2) {
		t.Errorf("a version packed before the extension unpacks to %q, %v", got, err)
	}
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
// same bytes, whole or any prefix of them after any bytes already held,
// and unpacks any bytes to an error or to size bytes, never a panic.
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
		n := len(ops) % (len(value) + 1)
		prefix, err := d.unpackTo([]byte("held"), d.pack(value), len(value), n)
		if err != nil || string(prefix) != "held"+string(value[:n]) {
			t.Fatalf("unpacked the first %d bytes after 4 held as %q, %v; want %q", n, prefix, err, value[:n])
		}
		if b, err := d.unpack(ops, len(value)); err == nil && len(b) != len(value) {
			t.Fatalf("unpacked %d bytes with no error, want %d", len(b), len(value))
		}
	})
}
