package storagetest

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/listwatch/listwatch/storage"
)

// SeedEnv names the environment variable that replays one run of the random
// operations test: set it to the seed a failed run logged.
const SeedEnv = "LISTWATCH_SEED"

// randomOps is the length of one random sequence.
const randomOps = 400

// model is the simplest store that could work: the list of every write.
// Every question is answered by replaying it.
type model struct {
	base      int64 // the store's revision before the first write
	writes    []storage.Event
	compacted int64
}

// latest returns the revision of the last write.
func (m *model) latest() int64 {
	if len(m.writes) == 0 {
		return m.base
	}
	return m.writes[len(m.writes)-1].KV.Revision
}

// at returns the keys as they were at rev.
func (m *model) at(rev int64) map[string]storage.KeyValue {
	state := map[string]storage.KeyValue{}
	for _, w := range m.writes {
		if w.KV.Revision > rev {
			break
		}
		if w.Type == storage.EventDelete {
			delete(state, w.KV.Key)
		} else {
			state[w.KV.Key] = w.KV
		}
	}
	return state
}

// record adds a write the store acknowledged.
func (m *model) record(typ storage.EventType, key string, value []byte, rev int64) {
	cur, exists := m.at(m.latest())[key]
	ev := storage.Event{Type: typ, KV: storage.KeyValue{Key: key, Revision: rev}}
	if typ == storage.EventPut {
		ev.KV.Value = value
		ev.KV.CreateRevision = rev
		if exists {
			ev.KV.CreateRevision = cur.CreateRevision
		}
	}
	if exists {
		ev.Prev = cur
	}
	m.writes = append(m.writes, ev)
}

// since returns the writes under prefix after rev.
func (m *model) since(prefix string, rev int64) []storage.Event {
	var out []storage.Event
	for _, w := range m.writes {
		if w.KV.Revision > rev && len(w.KV.Key) >= len(prefix) && w.KV.Key[:len(prefix)] == prefix {
			out = append(out, w)
		}
	}
	return out
}

// collector reads a watch in the background so the test can compare what
// it saw with the model.
type collector struct {
	prefix string
	from   int64
	w      storage.Watcher

	mu      sync.Mutex
	events  []storage.Event
	ended   bool
	changed chan struct{} // closed and replaced when events or ended change
}

func collect(w storage.Watcher, prefix string, from int64) *collector {
	c := &collector{prefix: prefix, from: from, w: w, changed: make(chan struct{})}
	go func() {
		for ev := range w.Events() {
			c.mu.Lock()
			c.events = append(c.events, ev)
			close(c.changed)
			c.changed = make(chan struct{})
			c.mu.Unlock()
		}
		c.mu.Lock()
		c.ended = true
		close(c.changed)
		c.mu.Unlock()
	}()
	return c
}

// waitFor waits until the collector has seen n events.
func (c *collector) waitFor(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		c.mu.Lock()
		got, ended, changed := len(c.events), c.ended, c.changed
		c.mu.Unlock()
		if got >= n {
			return
		}
		if ended {
			t.Fatalf("watch %q from %d ended after %d of %d events: %v", c.prefix, c.from, got, n, c.w.Err())
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("watch %q from %d: %d of %d events within %v", c.prefix, c.from, got, n, waitTimeout)
		}
	}
}

// check compares everything the collector saw with the model's history.
func (c *collector) check(t *testing.T, m *model) {
	t.Helper()
	want := m.since(c.prefix, c.from)
	c.waitFor(t, len(want))
	c.w.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.events) != len(want) {
		t.Errorf("watch %q from %d: %d events, want %d", c.prefix, c.from, len(c.events), len(want))
	}
	for i := range min(len(c.events), len(want)) {
		if got := c.events[i]; !sameEvent(got, want[i]) {
			t.Errorf("watch %q from %d: event %d = %s, want %s", c.prefix, c.from, i, formatEvent(got), formatEvent(want[i]))
			return
		}
	}
}

func sameKV(a, b storage.KeyValue) bool {
	return a.Key == b.Key && bytes.Equal(a.Value, b.Value) && (a.Value == nil) == (b.Value == nil) &&
		a.Revision == b.Revision && a.CreateRevision == b.CreateRevision
}

func sameEvent(a, b storage.Event) bool {
	return a.Type == b.Type && sameKV(a.KV, b.KV) && (a.Prev.Value == nil) == (b.Prev.Value == nil) &&
		(b.Prev.Value == nil || sameKV(a.Prev, b.Prev))
}

func formatEvent(e storage.Event) string {
	return fmt.Sprintf("{%v %q=%q rev %d created %d prev %q@%d}", e.Type, e.KV.Key, e.KV.Value, e.KV.Revision, e.KV.CreateRevision, e.Prev.Value, e.Prev.Revision)
}

// seed returns the seed of this run: SeedEnv's value if set.
func seed(t *testing.T) uint64 {
	if v := os.Getenv(SeedEnv); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", SeedEnv, v, err)
		}
		return s
	}
	return uint64(time.Now().UnixNano())
}

// testRandomOperations applies a seeded random sequence of operations to the
// store and to the model, checks every answer against the model, and checks
// that watches opened along the way see exactly the model's history under
// their prefix, in revision order.
func testRandomOperations(t *testing.T, s storage.Interface) {
	sd := seed(t)
	t.Logf("seed %d (replay with %s=%d)", sd, SeedEnv, sd)
	rnd := rand.New(rand.NewPCG(sd, sd>>1))
	ctx := t.Context()

	keySpace := []string{"/a/1", "/a/2", "/a/3", "/a/1/x", "/ab/1", "/b/1", "/b/2"}
	prefixes := []string{"", "/a/", "/a", "/ab/", "/b/", "/a/1/"}
	m := &model{base: mustRevision(t, s)}
	var watches []*collector
	// readable picks a revision whose versions are still kept.
	readable := func() int64 {
		lo := max(m.base, m.compacted)
		return lo + rnd.Int64N(m.latest()-lo+1)
	}

	for op := range randomOps {
		key := keySpace[rnd.IntN(len(keySpace))]
		cur, exists := m.at(m.latest())[key]
		value := []byte(strconv.Itoa(op))
		if rnd.IntN(10) == 0 {
			value = []byte{}
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("op %d (seed %d): %s", op, sd, fmt.Sprintf(format, args...))
		}
		wantErr := func(what string, err, want error) {
			t.Helper()
			if want == nil && err != nil || want != nil && !errors.Is(err, want) {
				fail("%s: err = %v, want %v", what, err, want)
			}
		}
		switch r := rnd.IntN(100); {
		case r < 25: // create
			rev, err := s.Create(ctx, key, value)
			if exists {
				wantErr("Create "+key, err, storage.ErrKeyExists)
				break
			}
			wantErr("Create "+key, err, nil)
			if rev <= m.latest() {
				fail("Create revision %d after %d", rev, m.latest())
			}
			m.record(storage.EventPut, key, value, rev)
		case r < 45: // update, often with a stale revision
			expected := cur.Revision
			if rnd.IntN(3) == 0 {
				expected = rnd.Int64N(m.latest() + 2)
			}
			rev, err := s.Update(ctx, key, value, expected)
			switch {
			case !exists:
				wantErr("Update "+key, err, storage.ErrNotFound)
			case expected != cur.Revision:
				wantErr("Update "+key, err, storage.ErrConflict)
			default:
				wantErr("Update "+key, err, nil)
				m.record(storage.EventPut, key, value, rev)
			}
		case r < 57: // delete
			var expected int64
			switch rnd.IntN(3) {
			case 0:
				expected = cur.Revision
			case 1:
				expected = rnd.Int64N(m.latest() + 2)
			}
			deleted, rev, err := s.Delete(ctx, key, expected)
			switch {
			case !exists:
				wantErr("Delete "+key, err, storage.ErrNotFound)
			case expected != 0 && expected != cur.Revision:
				wantErr("Delete "+key, err, storage.ErrConflict)
			default:
				wantErr("Delete "+key, err, nil)
				if !sameKV(deleted, cur) {
					fail("Delete returned %+v, want %+v", deleted, cur)
				}
				m.record(storage.EventDelete, key, nil, rev)
			}
		case r < 67: // get
			kv, err := s.Get(ctx, key)
			if !exists {
				wantErr("Get "+key, err, storage.ErrNotFound)
				break
			}
			wantErr("Get "+key, err, nil)
			if !sameKV(kv, cur) {
				fail("Get = %+v, want %+v", kv, cur)
			}
		case r < 85: // list, paged, at a random revision
			prefix := prefixes[rnd.IntN(len(prefixes))]
			rev := readable()
			if rnd.IntN(4) == 0 {
				rev = 0
			}
			limit := rnd.Int64N(4)
			if m.compacted > m.base+1 && rnd.IntN(8) == 0 {
				old := m.base + 1 + rnd.Int64N(m.compacted-m.base-1)
				_, err := s.List(ctx, prefix, storage.ListOptions{Revision: old})
				wantErr(fmt.Sprintf("List at compacted %d", old), err, storage.ErrCompacted)
				break
			}
			if rnd.IntN(10) == 0 {
				_, err := s.List(ctx, prefix, storage.ListOptions{Revision: m.latest() + 1})
				wantErr("List at future", err, storage.ErrFutureRevision)
				break
			}
			got, at := listAll(t, s, prefix, rev, limit)
			if rev == 0 {
				rev = m.latest()
			}
			if at != rev {
				fail("List %q at %d read at %d", prefix, rev, at)
			}
			state := m.at(rev)
			var want []storage.KeyValue
			for _, k := range slices.Sorted(maps.Keys(state)) {
				if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
					want = append(want, state[k])
				}
			}
			if len(got) != len(want) {
				fail("List %q at %d: %q, want %q", prefix, rev, keys(got), keys(want))
			}
			for i := range got {
				if !sameKV(got[i], want[i]) {
					fail("List %q at %d: item %d = %+v, want %+v", prefix, rev, i, got[i], want[i])
				}
			}
		case r < 92: // watch from a random revision
			prefix := prefixes[rnd.IntN(len(prefixes))]
			from := readable()
			if m.compacted > m.base+1 && rnd.IntN(6) == 0 {
				old := m.base + 1 + rnd.Int64N(m.compacted-m.base-1)
				_, err := s.Watch(ctx, prefix, old)
				wantErr(fmt.Sprintf("Watch from compacted %d", old), err, storage.ErrCompacted)
				break
			}
			w, err := s.Watch(ctx, prefix, from)
			if err != nil {
				fail("Watch %q from %d: %v", prefix, from, err)
			}
			if from == 0 {
				from = m.latest() // Watch from 0 starts now.
			}
			t.Cleanup(w.Stop)
			watches = append(watches, collect(w, prefix, from))
		default: // compact
			rev := readable()
			// A watcher that a compaction overtakes may fail by contract
			// (and etcd fails those still catching up), while the model has
			// no notion of lag: check and retire the open watches first.
			for _, c := range watches {
				c.check(t, m)
			}
			watches = nil
			if err := s.Compact(ctx, rev); err != nil {
				fail("Compact(%d): %v", rev, err)
			}
			m.compacted = max(m.compacted, rev)
		}
	}
	for _, c := range watches {
		c.check(t, m)
	}
	if got := mustRevision(t, s); got != m.latest() {
		t.Errorf("Revision = %d, model's latest %d", got, m.latest())
	}
}
