package watchcache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/sharding"
	kubesharding "k8s.io/apiserver/pkg/sharding"

	"github.com/listwatch/listwatch/storage"
)

// names returns "ns/name@rv" of each pod.
func names(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Namespace + "/" + p.Name + "@" + p.ResourceVersion
	}
	return out
}

// storageNames lists the prefix from storage at rev (0: latest) as names.
func storageNames(t testing.TB, st storage.Interface, rev int64, keep func(*corev1.Pod) bool) ([]string, int64) {
	t.Helper()
	res, err := st.List(context.Background(), prefix, storage.ListOptions{Revision: rev})
	if err != nil {
		t.Fatalf("storage list: %v", err)
	}
	var pods []*corev1.Pod
	for _, kv := range res.Items {
		p, err := decodePod(kv)
		if err != nil {
			t.Fatal(err)
		}
		if keep == nil || keep(p) {
			pods = append(pods, p)
		}
	}
	return names(pods), res.Revision
}

// populate writes n pods over three namespaces with a label tier=a|b, then
// updates and deletes a few.
func populate(t testing.TB, st storage.Interface, n int) {
	t.Helper()
	for i := range n {
		put(t, st, fmt.Sprintf("ns%d", i%3), fmt.Sprintf("p%03d", i), map[string]string{"tier": string(rune('a' + i%2))}, corev1.PodPending)
	}
	for i := 0; i < n; i += 5 {
		put(t, st, fmt.Sprintf("ns%d", i%3), fmt.Sprintf("p%03d", i), map[string]string{"tier": "a"}, corev1.PodRunning)
	}
	for i := 1; i < n; i += 7 {
		del(t, st, fmt.Sprintf("ns%d", i%3), fmt.Sprintf("p%03d", i))
	}
}

// Shards as kube's parser makes them: the lower half of the uids' hashes
// (34 of populate's first 50 pods), and namespaces ns0 and ns1 but not ns2
// (their hashes are 0x20fc0a19…, 0x20fc0b19… and 0x20fc0819…).
var (
	uidHalf = must(kubesharding.Parse("shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"))
	nsHalf  = must(kubesharding.Parse("shardRange(object.metadata.namespace, '0x20fc0a0000000000', '0x10000000000000000')"))
)

// inShard is sel's Matches, kube's own evaluation of a shard selector.
func inShard(sel sharding.Selector) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool { return must(sel.Matches(p)) }
}

func TestListMatchesStorage(t *testing.T) {
	st := newStore(t)
	populate(t, st, 30) // before the cache starts: its initial list
	c := newPodCache(t, st, nil)
	populate(t, st, 50) // after: through its watch
	ctx := context.Background()

	sel := labels.SelectorFromSet(labels.Set{"tier": "a"})
	running := fields.OneTermEqualSelector("status.phase", "Running")
	tests := []struct {
		name string
		opts ListOptions
		keep func(*corev1.Pod) bool
	}{
		{"rv 0", ListOptions{ResourceVersion: "0"}, nil},
		{"consistent", ListOptions{}, nil},
		{"not older than", ListOptions{ResourceVersion: "1", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}, nil},
		{"label", ListOptions{ResourceVersion: "0", Label: sel}, func(p *corev1.Pod) bool { return p.Labels["tier"] == "a" }},
		{"field", ListOptions{ResourceVersion: "0", Field: running}, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }},
		{"namespace", ListOptions{ResourceVersion: "0", Namespace: "ns1"}, func(p *corev1.Pod) bool { return p.Namespace == "ns1" }},
		{"shard by uid", ListOptions{ResourceVersion: "0", Shard: uidHalf}, inShard(uidHalf)},
		{"shard by namespace", ListOptions{Shard: nsHalf}, inShard(nsHalf)},
		{"shard and label", ListOptions{ResourceVersion: "0", Shard: uidHalf, Label: sel}, func(p *corev1.Pod) bool { return inShard(uidHalf)(p) && p.Labels["tier"] == "a" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Wait until the cache has seen every write: rv "0" may be stale.
			caughtUp(t, c, st)
			res, err := c.List(ctx, tt.opts)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			want, wantRev := storageNames(t, st, 0, tt.keep)
			if got := names(res.Objects()); !slices.Equal(got, want) {
				t.Fatalf("List = %v\nwant %v", got, want)
			}
			if res.ResourceVersion != wantRev {
				t.Fatalf("ResourceVersion = %d, want %d", res.ResourceVersion, wantRev)
			}
			if res.Continue != "" {
				t.Fatalf("unpaged list has continue token %q", res.Continue)
			}
		})
	}
}

func TestListExactFromWindowAndStorage(t *testing.T) {
	st := newStore(t)
	c := newPodCache(t, st, func(cfg *Config[*corev1.Pod]) { cfg.WindowSize = 20 })
	ctx := context.Background()
	var revs []int64
	for i := range 60 {
		revs = append(revs, put(t, st, "ns", fmt.Sprintf("p%d", i%13), nil, corev1.PodPending))
	}
	if err := c.waitFor(ctx, revs[len(revs)-1], DefaultFreshTimeout); err != nil {
		t.Fatal(err)
	}
	// Revisions inside the window come from cache snapshots, the older ones
	// from storage: both must equal storage's state at the revision.
	for _, rev := range revs {
		res, err := c.List(ctx, ListOptions{ResourceVersion: fmt.Sprint(rev), ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		if err != nil {
			t.Fatalf("List exact %d: %v", rev, err)
		}
		want, _ := storageNames(t, st, rev, nil)
		if got := names(res.Objects()); !slices.Equal(got, want) || res.ResourceVersion != rev {
			t.Fatalf("List exact %d = %v @%d\nwant %v", rev, got, res.ResourceVersion, want)
		}
	}
	// Compacted away in storage and out of the window: 410.
	if err := st.Compact(ctx, revs[30]); err != nil {
		t.Fatal(err)
	}
	_, err := c.List(ctx, ListOptions{ResourceVersion: fmt.Sprint(revs[5]), ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if !apierrors.IsResourceExpired(err) {
		t.Fatalf("List exact at compacted revision: %v, want 410 Expired", err)
	}
}

func TestListPagingConsistent(t *testing.T) {
	for _, tt := range []struct {
		name   string
		window int
		opts   ListOptions
		keep   func(*corev1.Pod) bool
	}{
		{"cache", 0, ListOptions{ResourceVersion: "0"}, nil},
		{"cache with selector", 0, ListOptions{ResourceVersion: "0", Label: labels.SelectorFromSet(labels.Set{"tier": "b"})}, func(p *corev1.Pod) bool { return p.Labels["tier"] == "b" }},
		{"window", 100, ListOptions{ResourceVersion: "0"}, nil},
		// A tiny window (and dropped snapshots) makes the continued pages
		// fall back to storage.
		{"storage", 1, ListOptions{ResourceVersion: "0"}, nil},
		{"storage with selector", 1, ListOptions{ResourceVersion: "0", Namespace: "ns2"}, func(p *corev1.Pod) bool { return p.Namespace == "ns2" }},
		{"cache with shard", 0, ListOptions{ResourceVersion: "0", Shard: uidHalf}, inShard(uidHalf)},
		{"storage with shard", 1, ListOptions{ResourceVersion: "0", Shard: uidHalf}, inShard(uidHalf)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := newStore(t)
			populate(t, st, 40)
			c := newPodCache(t, st, func(cfg *Config[*corev1.Pod]) { cfg.WindowSize = tt.window })
			ctx := context.Background()
			opts := tt.opts
			opts.Limit = 7
			var got []*corev1.Pod
			var rev int64
			pages := 0
			for {
				res, err := c.List(ctx, opts)
				if err != nil {
					t.Fatalf("page %d: %v", pages, err)
				}
				if pages == 0 {
					rev = res.ResourceVersion
				} else if res.ResourceVersion != rev {
					t.Fatalf("page %d at %d, first page at %d", pages, res.ResourceVersion, rev)
				}
				if int64(len(res.Items)) > opts.Limit {
					t.Fatalf("page of %d items, limit %d", len(res.Items), opts.Limit)
				}
				got = append(got, res.Objects()...)
				pages++
				// Writes between pages must not show in the list; with a
				// window of one they also push its revision out.
				put(t, st, "ns0", fmt.Sprintf("new%d", pages), map[string]string{"tier": "b"}, corev1.PodPending)
				rev2 := del(t, st, "ns0", fmt.Sprintf("new%d", pages))
				seen(c, rev2)
				if tt.window != 0 {
					// The next page cannot use a kept snapshot: the
					// window (or storage, for a window of one) serves it.
					c.mu.Lock()
					c.snaps = snapshots[*corev1.Pod]{}
					c.mu.Unlock()
				}
				if res.Continue == "" {
					break
				}
				opts = ListOptions{Continue: res.Continue, Limit: opts.Limit, Label: tt.opts.Label, Namespace: tt.opts.Namespace, Shard: tt.opts.Shard}
			}
			want, _ := storageNames(t, st, rev, tt.keep)
			if !slices.Equal(names(got), want) {
				t.Fatalf("pages = %v\nwant %v", names(got), want)
			}
			if pages < 2 {
				t.Fatalf("only %d page(s)", pages)
			}
		})
	}
}

func TestListRemainingItemCount(t *testing.T) {
	st := newStore(t)
	populate(t, st, 20)
	c := newPodCache(t, st, nil)
	res, err := c.List(context.Background(), ListOptions{ResourceVersion: "0", Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	all, _ := storageNames(t, st, 0, nil)
	if res.RemainingItemCount == nil || *res.RemainingItemCount != int64(len(all)-5) {
		t.Fatalf("RemainingItemCount = %v, want %d", res.RemainingItemCount, len(all)-5)
	}
}

func TestListContinueExpired(t *testing.T) {
	st := newStore(t)
	populate(t, st, 20)
	c := newPodCache(t, st, func(cfg *Config[*corev1.Pod]) { cfg.WindowSize = 1 })
	ctx := context.Background()
	first, err := c.List(ctx, ListOptions{Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	// Push the first page's revision out of the window, the snapshots and
	// storage.
	for i := range 3 * maxSnapshots {
		rev := put(t, st, "ns0", "churn", map[string]string{"i": fmt.Sprint(i)}, corev1.PodPending)
		seen(c, rev)
		if _, err := c.List(ctx, ListOptions{ResourceVersion: fmt.Sprint(rev), ResourceVersionMatch: metav1.ResourceVersionMatchExact}); err != nil {
			t.Fatal(err)
		}
	}
	rev, _ := st.Revision(ctx)
	if err := st.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	_, err = c.List(ctx, ListOptions{Limit: 5, Continue: first.Continue})
	if !apierrors.IsResourceExpired(err) {
		t.Fatalf("continue at compacted revision: %v, want 410 Expired", err)
	}
}

// TestListKeptSnapshotExpires: a snapshot kept for a paged list does not
// outlive the window, so that once storage compacts the revision its
// continue token and exact lists at it answer 410, as in kube-apiserver.
func TestListKeptSnapshotExpires(t *testing.T) {
	st := newStore(t)
	populate(t, st, 20)
	c := newPodCache(t, st, func(cfg *Config[*corev1.Pod]) { cfg.WindowSize = 2 })
	ctx := context.Background()
	first, err := c.List(ctx, ListOptions{Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		seen(c, put(t, st, "ns0", "churn", map[string]string{"i": fmt.Sprint(i)}, corev1.PodPending))
	}
	rev, _ := st.Revision(ctx)
	if err := st.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if _, err = c.List(ctx, ListOptions{Limit: 5, Continue: first.Continue}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("continue at compacted revision: %v, want 410 Expired", err)
	}
	_, err = c.List(ctx, ListOptions{ResourceVersion: fmt.Sprint(first.ResourceVersion), ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if !apierrors.IsResourceExpired(err) {
		t.Fatalf("exact list at compacted revision: %v, want 410 Expired", err)
	}
}

func TestListBadRequests(t *testing.T) {
	st := newStore(t)
	c := newPodCache(t, st, nil)
	for _, opts := range []ListOptions{
		{ResourceVersion: "abc"},
		{ResourceVersion: "-3"},
		{ResourceVersionMatch: metav1.ResourceVersionMatchExact},
		{ResourceVersion: "0", ResourceVersionMatch: metav1.ResourceVersionMatchExact},
		{ResourceVersion: "5", ResourceVersionMatch: "Newest"},
		{Continue: "!!!"},
		{Continue: "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MCwic3RhcnQiOiIifQ"}, // rv 0, no start
		{Continue: encodeContinue(3, prefix+"a", prefix), ResourceVersion: "3"},
		{Limit: -1},
	} {
		if _, err := c.List(context.Background(), opts); !apierrors.IsBadRequest(err) {
			t.Errorf("List(%+v) = %v, want 400", opts, err)
		}
	}
}

func TestListTooLargeResourceVersion(t *testing.T) {
	st := newStore(t)
	rev := put(t, st, "ns", "a", nil, corev1.PodPending)
	c := newPodCache(t, st, func(cfg *Config[*corev1.Pod]) { cfg.FreshTimeout = 1 }) // 1ns: fail at once
	_, err := c.List(context.Background(), ListOptions{ResourceVersion: fmt.Sprint(rev + 10), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	assertTooLarge(t, err)
	_, err = c.List(context.Background(), ListOptions{ResourceVersion: fmt.Sprint(rev + 10), ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	assertTooLarge(t, err)
}

func assertTooLarge(t *testing.T, err error) {
	t.Helper()
	var se *apierrors.StatusError
	if !apierrors.IsTimeout(err) || !errors.As(err, &se) || se.ErrStatus.Details == nil ||
		len(se.ErrStatus.Details.Causes) != 1 || se.ErrStatus.Details.Causes[0].Type != metav1.CauseTypeResourceVersionTooLarge {
		t.Fatalf("error %v, want 504 with a ResourceVersionTooLarge cause", err)
	}
}

// silentStore is memory storage whose watches never report progress, as
// an etcd watch stream with a watcher still catching up does not.
type silentStore struct{ storage.Interface }

func (silentStore) RequestProgress(context.Context) error { return nil }

// TestConsistentListFromCache: a consistent list (resourceVersion "") at a
// revision storage reached by writes under other prefixes is served by the
// cache once storage's watch reports it has seen them, as kube-apiserver
// serves consistent reads from its watch cache; when no progress comes
// within ProgressTimeout, from storage. Either way the answer is storage's
// state at a revision not older than storage's when the list began.
func TestConsistentListFromCache(t *testing.T) {
	tests := []struct {
		name         string
		silent       bool
		wantFresh    int64
		wantFallback int64
	}{
		{name: "progress reported", wantFresh: 1},
		{name: "no progress", silent: true, wantFallback: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := newStore(t)
				var st storage.Interface = mem
				if tt.silent {
					st = silentStore{mem}
				}
				put(t, st, "ns", "a", nil, corev1.PodPending)
				c := newPodCache(t, st, nil)
				ctx := context.Background()
				other, err := st.Create(ctx, "/configmaps/ns/x", []byte("{}"))
				if err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				before := c.Stats()
				res, err := c.List(ctx, ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want, _ := storageNames(t, st, 0, nil)
				if !slices.Equal(names(res.Objects()), want) || res.ResourceVersion < other {
					t.Errorf("List = %v at %d, want %v at %d or later", names(res.Objects()), res.ResourceVersion, want, other)
				}
				after := c.Stats()
				if fresh, fallback := after.FreshReads-before.FreshReads, after.FreshFallbacks-before.FreshFallbacks; fresh != tt.wantFresh || fallback != tt.wantFallback {
					t.Errorf("fresh reads %d, fallbacks %d; want %d, %d", fresh, fallback, tt.wantFresh, tt.wantFallback)
				}
			})
		})
	}
}

// TestListNamespacePages: a namespaced list covers its namespace's keys
// alone, from the cache and from storage alike: a page that ends the
// namespace has no continue token, whatever other namespaces hold after
// it (kube-apiserver lists a namespace's key prefix), and a page that
// does not end it continues within it.
func TestListNamespacePages(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	var last int64
	for _, ns := range []string{"a", "b", "c"} {
		for i := range 3 {
			last = put(t, st, ns, fmt.Sprintf("p%d", i), nil, corev1.PodPending)
		}
	}
	c := newPodCache(t, st, nil)
	if err := c.waitFor(ctx, last, DefaultFreshTimeout); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts ListOptions
	}{
		{"cache", ListOptions{ResourceVersion: "0"}},
		{"cache with a selector", ListOptions{ResourceVersion: "0", Label: labels.Everything(), Field: fields.OneTermEqualSelector("metadata.name", "p2")}},
		{"storage", ListOptions{ResourceVersion: fmt.Sprint(last), ResourceVersionMatch: metav1.ResourceVersionMatchExact}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, limit := range []int64{1, 2, 3, 4} {
				opts := tc.opts
				opts.Namespace, opts.Limit = "b", limit
				var got []string
				for pages := 0; ; pages++ {
					res, err := c.List(ctx, opts)
					if err != nil {
						t.Fatalf("limit %d: %v", limit, err)
					}
					for _, p := range res.Objects() {
						if p.Namespace != "b" {
							t.Fatalf("limit %d: listed %s/%s", limit, p.Namespace, p.Name)
						}
						got = append(got, p.Name)
					}
					if res.Continue == "" {
						break
					}
					if pages > 4 {
						t.Fatalf("limit %d: more than 4 pages", limit)
					}
					opts.Continue, opts.ResourceVersion, opts.ResourceVersionMatch = res.Continue, "", ""
				}
				want := []string{"p0", "p1", "p2"}
				if tc.opts.Field != nil {
					want = []string{"p2"}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("limit %d: listed %v, want %v", limit, got, want)
				}
			}
		})
	}
	// A page that ends the namespace has no continue token.
	res, err := c.List(ctx, ListOptions{ResourceVersion: "0", Namespace: "b", Limit: 3})
	if err != nil || res.Continue != "" || res.RemainingItemCount != nil {
		t.Fatalf("a page of all of b: continue %q, remaining %v, %v", res.Continue, res.RemainingItemCount, err)
	}
}
