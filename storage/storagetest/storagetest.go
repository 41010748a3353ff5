// Package storagetest is the conformance suite every storage.Interface
// backend must pass.
//
// Keys in the suite follow the API server's convention: a prefix that
// selects a set of objects ends in "/" ("/pods/a/"), so that listing or
// watching it never picks up a sibling that merely shares leading bytes
// ("/pods/ab"). Backends themselves match prefixes bytewise; the suite
// checks both sides of that convention.
//
// Compaction as the suite checks it: after Compact(c), List at r and Watch
// from r fail with storage.ErrCompacted iff r < c — a watch from r fails iff
// writes after r may be gone — and CompactedRevision is at least c.
//
// The random operations test logs its seed; set LISTWATCH_SEED to replay a
// run. Bench holds the benchmarks every backend runs.
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/listwatch/listwatch/storage"
)

// Run runs the suite, one subtest per contract, each against a fresh store
// from newStore. A fresh store holds no keys, but its revision need not be
// 0: several stores may share one etcd, each under its own key prefix.
// Run closes every store it makes.
func Run(t *testing.T, newStore func(t *testing.T) storage.Interface) {
	tests := []struct {
		name string
		run  func(t *testing.T, s storage.Interface)
	}{
		{"CreateGet", testCreateGet},
		{"Update", testUpdate},
		{"Delete", testDelete},
		{"RevisionsIncrease", testRevisionsIncrease},
		{"ListPagedAtRevision", testListPagedAtRevision},
		{"ListStartKey", testListStartKey},
		{"PrefixIsolation", testPrefixIsolation},
		{"WatchReplayThenLive", testWatchReplayThenLive},
		{"WatchFromNow", testWatchFromNow},
		{"WatchPrevValues", testWatchPrevValues},
		{"WatchSlowConsumerDoesNotBlockWriters", testWatchSlowConsumer},
		{"RequestProgress", testRequestProgress},
		{"Compaction", testCompaction},
		{"CompactedRevision", testCompactedRevision},
		{"FutureRevision", testFutureRevision},
		{"StopIdempotent", testStopIdempotent},
		{"ContextEndsWatch", testContextEndsWatch},
		{"Close", testClose},
		{"GuaranteedUpdateConcurrent", testGuaranteedUpdateConcurrent},
		{"ConcurrentWritersAndWatchers", testConcurrentWritersAndWatchers},
		{"RandomOperations", testRandomOperations},
		{"ValueTooLarge", testValueTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() { _ = s.Close() })
			tt.run(t, s)
		})
	}
}

// waitTimeout bounds every wait for an event so that a broken backend fails
// the test instead of hanging it; it is not a performance assertion.
const waitTimeout = 30 * time.Second

func mustCreate(t *testing.T, s storage.Interface, key, value string) int64 {
	t.Helper()
	rev, err := s.Create(t.Context(), key, []byte(value))
	if err != nil {
		t.Fatalf("Create(%q): %v", key, err)
	}
	return rev
}

func mustUpdate(t *testing.T, s storage.Interface, key, value string, expected int64) int64 {
	t.Helper()
	rev, err := s.Update(t.Context(), key, []byte(value), expected)
	if err != nil {
		t.Fatalf("Update(%q, %d): %v", key, expected, err)
	}
	return rev
}

func mustDelete(t *testing.T, s storage.Interface, key string) int64 {
	t.Helper()
	_, rev, err := s.Delete(t.Context(), key, 0)
	if err != nil {
		t.Fatalf("Delete(%q): %v", key, err)
	}
	return rev
}

func mustRevision(t *testing.T, s storage.Interface) int64 {
	t.Helper()
	rev, err := s.Revision(t.Context())
	if err != nil {
		t.Fatalf("Revision: %v", err)
	}
	return rev
}

// startRevision writes a key outside every prefix the tests watch and
// returns its revision: a revision to replay from that is never 0, which
// Watch reads as "from now on".
func startRevision(t *testing.T, s storage.Interface) int64 {
	t.Helper()
	return mustCreate(t, s, "/~start", "")
}

func mustWatch(t *testing.T, s storage.Interface, prefix string, rev int64) storage.Watcher {
	t.Helper()
	w, err := s.Watch(t.Context(), prefix, rev)
	if err != nil {
		t.Fatalf("Watch(%q, %d): %v", prefix, rev, err)
	}
	t.Cleanup(w.Stop)
	return w
}

// next returns the next event of w, failing the test if the watch ends.
func next(t *testing.T, w storage.Watcher) storage.Event {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		if !ok {
			t.Fatalf("watch ended early: %v", w.Err())
		}
		return ev
	case <-time.After(waitTimeout):
		t.Fatalf("no event within %v", waitTimeout)
	}
	return storage.Event{}
}

// ended waits for the watch to end and returns its Err.
func ended(t *testing.T, w storage.Watcher) error {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		select {
		case _, ok := <-w.Events():
			if !ok {
				return w.Err()
			}
		case <-timeout:
			t.Fatalf("watch did not end within %v", waitTimeout)
		}
	}
}

// wantKV checks one key-value against what the test expects.
func wantKV(t *testing.T, what string, got storage.KeyValue, key, value string, rev, createRev int64) {
	t.Helper()
	if got.Key != key || string(got.Value) != value || got.Revision != rev || got.CreateRevision != createRev {
		t.Errorf("%s = {%q %q rev %d created %d}, want {%q %q rev %d created %d}",
			what, got.Key, got.Value, got.Revision, got.CreateRevision, key, value, rev, createRev)
	}
}

func testCreateGet(t *testing.T, s storage.Interface) {
	ctx := t.Context()
	before := mustRevision(t, s)
	rev := mustCreate(t, s, "/things/a", "one")
	if rev <= before {
		t.Fatalf("Create revision %d, want > %d", rev, before)
	}
	if got := mustRevision(t, s); got != rev {
		t.Errorf("Revision after Create = %d, want %d", got, rev)
	}
	kv, err := s.Get(ctx, "/things/a")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	wantKV(t, "Get", kv, "/things/a", "one", rev, rev)

	// Values are opaque: the store keeps its own copy of what it was given.
	buf := []byte("two")
	empty := mustCreate(t, s, "/things/empty", "")
	rev2, err := s.Create(ctx, "/things/b", buf)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, "xxx")
	for _, tc := range []struct{ key, value string }{{"/things/b", "two"}, {"/things/empty", ""}} {
		kv, err := s.Get(ctx, tc.key)
		if err != nil {
			t.Fatalf("Get(%q): %v", tc.key, err)
		}
		if !bytes.Equal(kv.Value, []byte(tc.value)) || kv.Value == nil {
			t.Errorf("Get(%q).Value = %q (nil %v), want %q", tc.key, kv.Value, kv.Value == nil, tc.value)
		}
	}
	if rev2 <= empty {
		t.Errorf("revisions %d then %d, want increasing", empty, rev2)
	}

	errCases := []struct {
		name string
		op   func() error
		want error
	}{
		{"create existing", func() error { _, err := s.Create(ctx, "/things/a", []byte("again")); return err }, storage.ErrKeyExists},
		{"get missing", func() error { _, err := s.Get(ctx, "/things/missing"); return err }, storage.ErrNotFound},
		{"get prefix of a key", func() error { _, err := s.Get(ctx, "/things/"); return err }, storage.ErrNotFound},
	}
	for _, tc := range errCases {
		if err := tc.op(); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	kv, err = s.Get(ctx, "/things/a")
	if err != nil || string(kv.Value) != "one" {
		t.Errorf("after failed Create, Get = %q, %v; want the original value", kv.Value, err)
	}
}

func testUpdate(t *testing.T, s storage.Interface) {
	ctx := t.Context()
	created := mustCreate(t, s, "/things/a", "v1")
	tests := []struct {
		name     string
		key      string
		expected func(cur int64) int64
		want     error
	}{
		{"current revision", "/things/a", func(cur int64) int64 { return cur }, nil},
		{"stale revision", "/things/a", func(cur int64) int64 { return cur - 1 }, storage.ErrConflict},
		{"future revision", "/things/a", func(cur int64) int64 { return cur + 100 }, storage.ErrConflict},
		{"zero revision", "/things/a", func(int64) int64 { return 0 }, storage.ErrConflict},
		{"current again", "/things/a", func(cur int64) int64 { return cur }, nil},
		{"missing key", "/things/missing", func(cur int64) int64 { return cur }, storage.ErrNotFound},
	}
	for i, tc := range tests {
		before, _ := s.Get(ctx, "/things/a")
		value := "v" + strconv.Itoa(i+2)
		rev, err := s.Update(ctx, tc.key, []byte(value), tc.expected(before.Revision))
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
		after, _ := s.Get(ctx, "/things/a")
		if tc.want != nil {
			if after.Revision != before.Revision || !bytes.Equal(after.Value, before.Value) {
				t.Errorf("%s: failed update changed the key: %+v -> %+v", tc.name, before, after)
			}
			continue
		}
		if rev <= before.Revision {
			t.Errorf("%s: revision %d, want > %d", tc.name, rev, before.Revision)
		}
		wantKV(t, tc.name, after, "/things/a", value, rev, created)
	}
}

func testDelete(t *testing.T, s storage.Interface) {
	ctx := t.Context()
	tests := []struct {
		name     string
		exists   bool
		expected func(cur int64) int64
		want     error
	}{
		{"expected revision", true, func(cur int64) int64 { return cur }, nil},
		{"any revision", true, func(int64) int64 { return 0 }, nil},
		{"stale revision", true, func(cur int64) int64 { return cur - 1 }, storage.ErrConflict},
		{"missing key", false, func(int64) int64 { return 0 }, storage.ErrNotFound},
		{"missing key with revision", false, func(int64) int64 { return 5 }, storage.ErrNotFound},
	}
	for i, tc := range tests {
		key := fmt.Sprintf("/things/%d", i)
		var created int64
		if tc.exists {
			created = mustCreate(t, s, key, "v")
		}
		deleted, rev, err := s.Delete(ctx, key, tc.expected(created))
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
		_, getErr := s.Get(ctx, key)
		if tc.want != nil {
			if tc.exists && getErr != nil {
				t.Errorf("%s: failed delete removed the key: %v", tc.name, getErr)
			}
			continue
		}
		wantKV(t, tc.name+": deleted", deleted, key, "v", created, created)
		if rev <= created {
			t.Errorf("%s: delete revision %d, want > %d", tc.name, rev, created)
		}
		if !errors.Is(getErr, storage.ErrNotFound) {
			t.Errorf("%s: Get after delete: %v, want ErrNotFound", tc.name, getErr)
		}
		if got := mustRevision(t, s); got != rev {
			t.Errorf("%s: Revision = %d, want the delete's %d", tc.name, got, rev)
		}
		// A key created again starts a new life with a new create revision.
		again := mustCreate(t, s, key, "v2")
		kv, err := s.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		wantKV(t, tc.name+": recreated", kv, key, "v2", again, again)
	}
}

// testValueTooLarge: a value of MaxValueBytes is stored; one byte more is
// ErrTooLarge on Create and Update, and changes nothing.
func testValueTooLarge(t *testing.T, s storage.Interface) {
	ctx := t.Context()
	largest := strings.Repeat("x", storage.MaxValueBytes)
	rev := mustCreate(t, s, "/big/a", largest)
	for _, tc := range []struct {
		name  string
		write func(value []byte) error
	}{
		{"create", func(v []byte) error { _, err := s.Create(ctx, "/big/b", v); return err }},
		{"update", func(v []byte) error { _, err := s.Update(ctx, "/big/a", v, rev); return err }},
	} {
		if err := tc.write([]byte(largest + "x")); !errors.Is(err, storage.ErrTooLarge) {
			t.Errorf("%s of %d bytes: %v, want ErrTooLarge", tc.name, len(largest)+1, err)
		}
	}
	kv, err := s.Get(ctx, "/big/a")
	if err != nil || kv.Revision != rev || len(kv.Value) != storage.MaxValueBytes {
		t.Errorf("after the refused writes: %d bytes at %d, %v; want %d bytes at %d", len(kv.Value), kv.Revision, err, storage.MaxValueBytes, rev)
	}
	if _, err := s.Get(ctx, "/big/b"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("refused create stored something: %v", err)
	}
}

func testRevisionsIncrease(t *testing.T, s storage.Interface) {
	last := mustRevision(t, s)
	for i := range 20 {
		key := "/things/" + strconv.Itoa(i%3)
		var rev int64
		switch kv, err := s.Get(t.Context(), key); {
		case errors.Is(err, storage.ErrNotFound):
			rev = mustCreate(t, s, key, "v")
		case err != nil:
			t.Fatal(err)
		case i%2 == 0:
			rev = mustDelete(t, s, key)
		default:
			rev = mustUpdate(t, s, key, "w", kv.Revision)
		}
		if rev <= last {
			t.Fatalf("write %d got revision %d after %d", i, rev, last)
		}
		last = rev
	}
}

// listAll pages through prefix at rev with the given limit and checks that
// every page is read at the first page's revision and counts Remaining
// right.
func listAll(t *testing.T, s storage.Interface, prefix string, rev, limit int64) ([]storage.KeyValue, int64) {
	t.Helper()
	opts := storage.ListOptions{Revision: rev, Limit: limit}
	var all []storage.KeyValue
	var at int64
	for page := 0; ; page++ {
		res, err := s.List(t.Context(), prefix, opts)
		if err != nil {
			t.Fatalf("List(%q, %+v): %v", prefix, opts, err)
		}
		if page == 0 {
			at = res.Revision
			opts.Revision = at
		} else if res.Revision != at {
			t.Fatalf("page %d read at revision %d, first page at %d", page, res.Revision, at)
		}
		if limit > 0 && int64(len(res.Items)) > limit {
			t.Fatalf("page %d has %d items, limit %d", page, len(res.Items), limit)
		}
		all = append(all, res.Items...)
		if !res.More {
			if res.Remaining != 0 {
				t.Errorf("last page: Remaining = %d without More", res.Remaining)
			}
			return all, at
		}
		if len(res.Items) == 0 {
			t.Fatalf("page %d: More with no items", page)
		}
		opts.StartKey = res.Items[len(res.Items)-1].Key + "\x00"
		// Remaining must count exactly what the following pages return.
		rest, _ := listAll(t, s, prefix, at, 0)
		var after int64
		for _, kv := range rest {
			if kv.Key >= opts.StartKey {
				after++
			}
		}
		if res.Remaining != after {
			t.Errorf("page %d: Remaining = %d, want %d", page, res.Remaining, after)
		}
	}
}

func testListPagedAtRevision(t *testing.T, s storage.Interface) {
	ctx := t.Context()
	want := map[string]storage.KeyValue{}
	for i := range 7 {
		key := fmt.Sprintf("/pods/ns/p%d", i)
		rev := mustCreate(t, s, key, "v"+strconv.Itoa(i))
		want[key] = storage.KeyValue{Key: key, Value: []byte("v" + strconv.Itoa(i)), Revision: rev, CreateRevision: rev}
	}
	mustCreate(t, s, "/nodes/n1", "outside")
	snapshot := mustRevision(t, s)

	// Writes after the snapshot must not show in lists at the snapshot, even
	// between the pages of one paged list.
	mustUpdate(t, s, "/pods/ns/p1", "changed", want["/pods/ns/p1"].Revision)
	mustDelete(t, s, "/pods/ns/p2")
	mustCreate(t, s, "/pods/ns/p25", "new")

	for _, limit := range []int64{0, 1, 2, 3, 7, 100} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			got, at := listAll(t, s, "/pods/", snapshot, limit)
			if at != snapshot {
				t.Errorf("read at revision %d, want %d", at, snapshot)
			}
			if len(got) != len(want) {
				t.Fatalf("got %d items, want %d: %+v", len(got), len(want), got)
			}
			for i, kv := range got {
				w := want[kv.Key]
				wantKV(t, "item "+strconv.Itoa(i), kv, w.Key, string(w.Value), w.Revision, w.CreateRevision)
				if i > 0 && got[i-1].Key >= kv.Key {
					t.Errorf("items out of key order: %q before %q", got[i-1].Key, kv.Key)
				}
			}
		})
	}

	// A page read at the latest revision reports that revision.
	latest := mustRevision(t, s)
	res, err := s.List(ctx, "/pods/", storage.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != latest || !res.More || res.Remaining != 5 {
		t.Errorf("latest first page: revision %d more %v remaining %d, want %d true 5", res.Revision, res.More, res.Remaining, latest)
	}
	// A paged list started at the latest revision stays there while writes go on.
	mustCreate(t, s, "/pods/ns/p9", "later")
	rest, err := s.List(ctx, "/pods/", storage.ListOptions{Revision: res.Revision, StartKey: res.Items[1].Key + "\x00"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rest.Items) != 5 || rest.More {
		t.Errorf("second page at revision %d: %d items (more %v), want 5 without /pods/ns/p9", res.Revision, len(rest.Items), rest.More)
	}
}

func testListStartKey(t *testing.T, s storage.Interface) {
	for _, k := range []string{"/a/1", "/a/2", "/a/3", "/b/1"} {
		mustCreate(t, s, k, "v")
	}
	tests := []struct {
		start string
		want  []string
	}{
		{"", []string{"/a/1", "/a/2", "/a/3"}},
		{"/", []string{"/a/1", "/a/2", "/a/3"}},
		{"/a/2", []string{"/a/2", "/a/3"}},
		{"/a/2\x00", []string{"/a/3"}},
		{"/a/3\x00", nil},
		{"/b/", nil},
	}
	for _, tc := range tests {
		res, err := s.List(t.Context(), "/a/", storage.ListOptions{StartKey: tc.start})
		if err != nil {
			t.Fatalf("StartKey %q: %v", tc.start, err)
		}
		if got := keys(res.Items); !slices.Equal(got, tc.want) || res.More {
			t.Errorf("StartKey %q: got %q (more %v), want %q", tc.start, got, res.More, tc.want)
		}
	}
}

func keys(kvs []storage.KeyValue) []string {
	var out []string
	for _, kv := range kvs {
		out = append(out, kv.Key)
	}
	return out
}

func testPrefixIsolation(t *testing.T, s storage.Interface) {
	all := []string{"/pods/a", "/pods/a/x", "/pods/a/y", "/pods/ab", "/pods/ab/x", "/podsx/a/x"}
	start := startRevision(t, s)
	for _, k := range all {
		mustCreate(t, s, k, "v")
	}
	tests := []struct {
		prefix string
		want   []string
	}{
		{"/pods/a/", []string{"/pods/a/x", "/pods/a/y"}},
		{"/pods/ab/", []string{"/pods/ab/x"}},
		{"/pods/", []string{"/pods/a", "/pods/a/x", "/pods/a/y", "/pods/ab", "/pods/ab/x"}},
		// Without the trailing "/" a prefix matches bytewise, siblings included.
		{"/pods/a", []string{"/pods/a", "/pods/a/x", "/pods/a/y", "/pods/ab", "/pods/ab/x"}},
		{"/nothing/", nil},
		{"", all},
	}
	for _, tc := range tests {
		res, err := s.List(t.Context(), tc.prefix, storage.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wantList := tc.want
		if tc.prefix == "" {
			wantList = append(slices.Clone(all), "/~start")
		}
		if got := keys(res.Items); !slices.Equal(got, wantList) {
			t.Errorf("List(%q) = %q, want %q", tc.prefix, got, wantList)
		}
		w := mustWatch(t, s, tc.prefix, start)
		var seen []string
		for range tc.want {
			seen = append(seen, next(t, w).KV.Key)
		}
		if !slices.Equal(seen, tc.want) {
			t.Errorf("Watch(%q) saw %q, want %q", tc.prefix, seen, tc.want)
		}
	}
	// Nothing else was delivered: the next event a watcher sees is a later write.
	w := mustWatch(t, s, "/pods/a/", start)
	next(t, w)
	next(t, w)
	mustCreate(t, s, "/pods/abc", "v")
	rev := mustCreate(t, s, "/pods/a/z", "v")
	if ev := next(t, w); ev.KV.Key != "/pods/a/z" || ev.KV.Revision != rev {
		t.Errorf("Watch(/pods/a/) next = %q at %d, want /pods/a/z at %d", ev.KV.Key, ev.KV.Revision, rev)
	}
}

func testWatchReplayThenLive(t *testing.T, s storage.Interface) {
	r1 := mustCreate(t, s, "/w/a", "1")
	r2 := mustCreate(t, s, "/w/b", "2")
	r3 := mustUpdate(t, s, "/w/a", "3", r1)
	w := mustWatch(t, s, "/w/", r1)
	r4 := mustDelete(t, s, "/w/b")
	r5 := mustCreate(t, s, "/w/c", "5")
	want := []struct {
		typ   storage.EventType
		key   string
		value string
		rev   int64
	}{
		{storage.EventPut, "/w/b", "2", r2},
		{storage.EventPut, "/w/a", "3", r3},
		{storage.EventDelete, "/w/b", "", r4},
		{storage.EventPut, "/w/c", "5", r5},
	}
	for i, e := range want {
		ev := next(t, w)
		if ev.Type != e.typ || ev.KV.Key != e.key || string(ev.KV.Value) != e.value || ev.KV.Revision != e.rev {
			t.Errorf("event %d = %v %q %q at %d, want %v %q %q at %d", i, ev.Type, ev.KV.Key, ev.KV.Value, ev.KV.Revision, e.typ, e.key, e.value, e.rev)
		}
	}
}

// testRequestProgress: a watch that has delivered everything reports, when
// asked, the revision it has reached, past writes under other prefixes;
// the writes after come after it. Progress is a hint a watch still
// catching up may not give, so the test asks until it does.
func testRequestProgress(t *testing.T, s storage.Interface) {
	w := mustWatch(t, s, "/p/", startRevision(t, s))
	r1 := mustCreate(t, s, "/p/a", "1")
	if ev := next(t, w); ev.Type != storage.EventPut || ev.KV.Revision != r1 {
		t.Fatalf("first event %v at %d, want the put at %d", ev.Type, ev.KV.Revision, r1)
	}
	r2 := mustCreate(t, s, "/q/b", "2")
	ask := time.NewTicker(10 * time.Millisecond)
	defer ask.Stop()
	timeout := time.After(waitTimeout)
	for reached := int64(0); reached < r2; {
		if err := s.RequestProgress(t.Context()); err != nil {
			t.Fatalf("RequestProgress: %v", err)
		}
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("watch ended: %v", w.Err())
			}
			if ev.Type != storage.EventProgress || ev.KV.Revision < r1 || ev.KV.Revision < reached {
				t.Fatalf("event %v at %d, want progress at %d or later", ev.Type, ev.KV.Revision, max(r1, reached))
			}
			reached = ev.KV.Revision
		case <-ask.C:
		case <-timeout:
			t.Fatalf("no progress at %d within %v", r2, waitTimeout)
		}
	}
	r3 := mustCreate(t, s, "/p/c", "3")
	for {
		ev := next(t, w)
		if ev.Type == storage.EventProgress {
			continue
		}
		if ev.Type != storage.EventPut || ev.KV.Key != "/p/c" || ev.KV.Revision != r3 {
			t.Fatalf("event after progress %v %q at %d, want the put of /p/c at %d", ev.Type, ev.KV.Key, ev.KV.Revision, r3)
		}
		break
	}
}

func testWatchFromNow(t *testing.T, s storage.Interface) {
	mustCreate(t, s, "/w/before", "v")
	w := mustWatch(t, s, "/w/", 0)
	rev := mustCreate(t, s, "/w/after", "v")
	if ev := next(t, w); ev.KV.Key != "/w/after" || ev.KV.Revision != rev {
		t.Errorf("first event %q at %d, want /w/after at %d", ev.KV.Key, ev.KV.Revision, rev)
	}
}

func testWatchPrevValues(t *testing.T, s storage.Interface) {
	start := startRevision(t, s)
	c := mustCreate(t, s, "/w/k", "")
	u1 := mustUpdate(t, s, "/w/k", "one", c)
	u2 := mustUpdate(t, s, "/w/k", "two", u1)
	d := mustDelete(t, s, "/w/k")
	c2 := mustCreate(t, s, "/w/k", "again")
	type kv struct {
		value     string
		rev, crev int64
	}
	tests := []struct {
		typ      storage.EventType
		isCreate bool
		kv, prev kv
		prevNil  bool
	}{
		{storage.EventPut, true, kv{"", c, c}, kv{}, true},
		// An update from an empty value is not a create.
		{storage.EventPut, false, kv{"one", u1, c}, kv{"", c, c}, false},
		{storage.EventPut, false, kv{"two", u2, c}, kv{"one", u1, c}, false},
		{storage.EventDelete, false, kv{"", d, 0}, kv{"two", u2, c}, false},
		{storage.EventPut, true, kv{"again", c2, c2}, kv{}, true},
	}
	w := mustWatch(t, s, "/w/", start)
	for i, tc := range tests {
		ev := next(t, w)
		if ev.Type != tc.typ || ev.IsCreate() != tc.isCreate {
			t.Errorf("event %d: type %v create %v, want %v %v", i, ev.Type, ev.IsCreate(), tc.typ, tc.isCreate)
		}
		if ev.KV.Key != "/w/k" || string(ev.KV.Value) != tc.kv.value || ev.KV.Revision != tc.kv.rev {
			t.Errorf("event %d: KV {%q %q %d}, want {/w/k %q %d}", i, ev.KV.Key, ev.KV.Value, ev.KV.Revision, tc.kv.value, tc.kv.rev)
		}
		if tc.typ == storage.EventPut && (ev.KV.CreateRevision != tc.kv.crev || ev.KV.Value == nil) {
			t.Errorf("event %d: KV created %d (value nil %v), want created %d with a value", i, ev.KV.CreateRevision, ev.KV.Value == nil, tc.kv.crev)
		}
		if tc.typ == storage.EventDelete && ev.KV.Value != nil {
			t.Errorf("event %d: delete carries value %q", i, ev.KV.Value)
		}
		if tc.prevNil {
			if ev.Prev.Value != nil {
				t.Errorf("event %d: Prev.Value %q, want nil", i, ev.Prev.Value)
			}
			continue
		}
		wantKV(t, fmt.Sprintf("event %d Prev", i), ev.Prev, "/w/k", tc.prev.value, tc.prev.rev, tc.prev.crev)
		if ev.Prev.Value == nil {
			t.Errorf("event %d: Prev.Value is nil for an existing key", i)
		}
	}
}

// testWatchSlowConsumer checks that a watcher nobody reads holds up no
// writer, and still delivers everything once read.
func testWatchSlowConsumer(t *testing.T, s storage.Interface) {
	start := startRevision(t, s)
	w := mustWatch(t, s, "/slow/", start)
	const n = 500
	revs := make([]int64, n)
	for i := range n {
		revs[i] = mustCreate(t, s, fmt.Sprintf("/slow/%04d", i), "v")
	}
	for i := range n {
		if ev := next(t, w); ev.KV.Revision != revs[i] {
			t.Fatalf("event %d at revision %d, want %d", i, ev.KV.Revision, revs[i])
		}
	}
}

func testCompaction(t *testing.T, s storage.Interface) {
	ctx := t.Context()
	r1 := mustCreate(t, s, "/c/a", "1")
	r2 := mustUpdate(t, s, "/c/a", "2", r1)
	r3 := mustCreate(t, s, "/c/b", "3")
	r4 := mustDelete(t, s, "/c/b")
	r5 := mustCreate(t, s, "/c/c", "5")
	if err := s.Compact(ctx, r3); err != nil {
		t.Fatalf("Compact(%d): %v", r3, err)
	}
	// Compacting again at or below is harmless.
	if err := s.Compact(ctx, r2); err != nil {
		t.Errorf("Compact(%d) after Compact(%d): %v", r2, r3, err)
	}
	tests := []struct {
		rev  int64
		want error
		keys []string
	}{
		{r1, storage.ErrCompacted, nil},
		{r2, storage.ErrCompacted, nil},
		{r3, nil, []string{"/c/a", "/c/b"}},
		{r4, nil, []string{"/c/a"}},
		{r5, nil, []string{"/c/a", "/c/c"}},
	}
	for _, tc := range tests {
		res, err := s.List(ctx, "/c/", storage.ListOptions{Revision: tc.rev})
		if !errors.Is(err, tc.want) {
			t.Errorf("List at %d: %v, want %v", tc.rev, err, tc.want)
		}
		if got := keys(res.Items); !slices.Equal(got, tc.keys) {
			t.Errorf("List at %d = %q, want %q", tc.rev, got, tc.keys)
		}
		w, err := s.Watch(ctx, "/c/", tc.rev)
		if !errors.Is(err, tc.want) {
			t.Errorf("Watch from %d: %v, want %v", tc.rev, err, tc.want)
		}
		if err != nil {
			continue
		}
		if tc.rev == r5 {
			w.Stop()
			continue
		}
		if ev := next(t, w); ev.KV.Revision != tc.rev+1 {
			t.Errorf("Watch from %d: first event at %d, want %d", tc.rev, ev.KV.Revision, tc.rev+1)
		}
		w.Stop()
	}
	if kv, err := s.Get(ctx, "/c/a"); err != nil || string(kv.Value) != "2" {
		t.Errorf("Get after compaction = %q, %v; want the current value", kv.Value, err)
	}
	if err := s.Compact(ctx, r5+100); !errors.Is(err, storage.ErrFutureRevision) {
		t.Errorf("Compact(future): %v, want ErrFutureRevision", err)
	}
}

// testCompactedRevision checks that CompactedRevision knows of a Compact
// as soon as it returns, announces it by closing the channel returned
// before, and never goes back.
func testCompactedRevision(t *testing.T, s storage.Interface) {
	ctx := t.Context()
	before, changed := s.CompactedRevision()
	r1 := mustCreate(t, s, "/cr/a", "1")
	r2 := mustUpdate(t, s, "/cr/a", "2", r1)
	if before >= r1 {
		t.Fatalf("CompactedRevision %d before any compaction at or after %d", before, r1)
	}
	if err := s.Compact(ctx, r2); err != nil {
		t.Fatalf("Compact(%d): %v", r2, err)
	}
	after, changedAfter := s.CompactedRevision()
	if after < r2 {
		t.Errorf("CompactedRevision after Compact(%d) = %d", r2, after)
	}
	select {
	case <-changed:
	default:
		t.Errorf("the channel of CompactedRevision before Compact(%d) is still open", r2)
	}
	// A compaction below the last changes nothing.
	if err := s.Compact(ctx, r1); err != nil {
		t.Fatalf("Compact(%d) after Compact(%d): %v", r1, r2, err)
	}
	if again, _ := s.CompactedRevision(); again != after {
		t.Errorf("CompactedRevision after Compact(%d) following Compact(%d) = %d, want %d", r1, r2, again, after)
	}
	select {
	case <-changedAfter:
		t.Errorf("Compact(%d) after Compact(%d) announced a new compaction", r1, r2)
	default:
	}
	if _, err := s.List(ctx, "/cr/", storage.ListOptions{Revision: r1}); !errors.Is(err, storage.ErrCompacted) {
		t.Errorf("List at %d below CompactedRevision %d: %v, want ErrCompacted", r1, after, err)
	}
}

func testFutureRevision(t *testing.T, s storage.Interface) {
	ctx := t.Context()
	rev := mustCreate(t, s, "/f/a", "v")
	if _, err := s.List(ctx, "/f/", storage.ListOptions{Revision: rev + 1}); !errors.Is(err, storage.ErrFutureRevision) {
		t.Errorf("List at %d: %v, want ErrFutureRevision", rev+1, err)
	}
	if _, err := s.Watch(ctx, "/f/", rev+1); !errors.Is(err, storage.ErrFutureRevision) {
		t.Errorf("Watch from %d: %v, want ErrFutureRevision", rev+1, err)
	}
	// The latest revision itself is fine for both.
	if _, err := s.List(ctx, "/f/", storage.ListOptions{Revision: rev}); err != nil {
		t.Errorf("List at %d: %v", rev, err)
	}
	w := mustWatch(t, s, "/f/", rev)
	next2 := mustCreate(t, s, "/f/b", "v")
	if ev := next(t, w); ev.KV.Revision != next2 {
		t.Errorf("Watch from latest: first event at %d, want %d", ev.KV.Revision, next2)
	}
}

func testStopIdempotent(t *testing.T, s storage.Interface) {
	w := mustWatch(t, s, "/s/", 0)
	w.Stop()
	w.Stop()
	if err := ended(t, w); err != nil {
		t.Errorf("Err after Stop = %v, want nil", err)
	}
	// Writes after Stop are fine and reach no one.
	mustCreate(t, s, "/s/a", "v")
	w.Stop()
}

func testContextEndsWatch(t *testing.T, s storage.Interface) {
	ctx, cancel := context.WithCancel(t.Context())
	w, err := s.Watch(ctx, "/ctx/", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	rev := mustCreate(t, s, "/ctx/a", "v")
	if ev := next(t, w); ev.KV.Revision != rev {
		t.Errorf("event at %d, want %d", ev.KV.Revision, rev)
	}
	cancel()
	if err := ended(t, w); err != nil {
		t.Errorf("Err after cancel = %v, want nil", err)
	}
}

func testClose(t *testing.T, s storage.Interface) {
	ctx := t.Context()
	mustCreate(t, s, "/x/a", "v")
	w := mustWatch(t, s, "/x/", 0)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := ended(t, w); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("watch open at Close ended with %v, want ErrClosed", err)
	}
	ops := []struct {
		name string
		op   func() error
	}{
		{"Create", func() error { _, err := s.Create(ctx, "/x/b", nil); return err }},
		{"Get", func() error { _, err := s.Get(ctx, "/x/a"); return err }},
		{"Update", func() error { _, err := s.Update(ctx, "/x/a", nil, 1); return err }},
		{"Delete", func() error { _, _, err := s.Delete(ctx, "/x/a", 0); return err }},
		{"List", func() error { _, err := s.List(ctx, "/x/", storage.ListOptions{}); return err }},
		{"Watch", func() error { _, err := s.Watch(ctx, "/x/", 0); return err }},
		{"Revision", func() error { _, err := s.Revision(ctx); return err }},
		{"RequestProgress", func() error { return s.RequestProgress(ctx) }},
		{"Compact", func() error { return s.Compact(ctx, 1) }},
		{"Close", s.Close},
	}
	for _, tc := range ops {
		if err := tc.op(); !errors.Is(err, storage.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", tc.name, err)
		}
	}
}

func testGuaranteedUpdateConcurrent(t *testing.T, s storage.Interface) {
	const writers, increments = 8, 15
	mustCreate(t, s, "/counter", "0")
	increment := func(cur storage.KeyValue) ([]byte, error) {
		n, err := strconv.Atoi(string(cur.Value))
		if err != nil {
			return nil, err
		}
		return []byte(strconv.Itoa(n + 1)), nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			for range increments {
				_, err := storage.GuaranteedUpdate(t.Context(), s, "/counter", increment)
				for errors.Is(err, storage.ErrConflict) {
					// All attempts lost to the others: nothing was written,
					// so trying again loses no increment.
					_, err = storage.GuaranteedUpdate(t.Context(), s, "/counter", increment)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("GuaranteedUpdate: %v", err)
	}
	kv, err := s.Get(t.Context(), "/counter")
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(writers * increments); string(kv.Value) != want {
		t.Errorf("counter = %s, want %s", kv.Value, want)
	}
}

// testConcurrentWritersAndWatchers checks that watchers opened before
// concurrent writers see every acknowledged write exactly once, in strictly
// increasing revision order.
func testConcurrentWritersAndWatchers(t *testing.T, s storage.Interface) {
	const writers, writes, watchers = 4, 40, 5
	start := startRevision(t, s)
	var ws []storage.Watcher
	for range watchers {
		ws = append(ws, mustWatch(t, s, "/cw/", start))
	}
	acked := make(chan int64, writers*writes)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			key := fmt.Sprintf("/cw/%d", w)
			rev, err := s.Create(t.Context(), key, []byte("0"))
			for i := 1; i < writes && err == nil; i++ {
				acked <- rev
				rev, err = s.Update(t.Context(), key, []byte(strconv.Itoa(i)), rev)
			}
			if err != nil {
				t.Errorf("writer %d: %v", w, err)
				return
			}
			acked <- rev
		})
	}
	wg.Wait()
	close(acked)
	want := map[int64]bool{}
	for rev := range acked {
		want[rev] = true
	}
	for i, w := range ws {
		var last int64
		for range len(want) {
			ev := next(t, w)
			if ev.KV.Revision <= last || !want[ev.KV.Revision] {
				t.Fatalf("watcher %d: event at %d after %d; acknowledged: %v", i, ev.KV.Revision, last, want[ev.KV.Revision])
			}
			last = ev.KV.Revision
		}
	}
}
