package watchcache

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/storage"
)

// announcingStore is memory storage whose CompactedRevision the test sets,
// as etcd's announces a compaction (compact_rev_key) a moment before it is
// made, or one made by someone else.
type announcingStore struct {
	storage.Interface
	rev     int64
	changed chan struct{}
}

func (s *announcingStore) CompactedRevision() (int64, <-chan struct{}) {
	return s.rev, s.changed
}

// TestCompactionInsideWindow: once storage has compacted, revisions below
// the compaction are no longer served from the window or the snapshots,
// though both still hold them: a watch from one is 410, a list at one goes
// to storage and is 410 too. Lists at "" and "0", watches from a revision
// not compacted, and watches already running carry on.
func TestCompactionInsideWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t)
		c := newPodCache(t, st, nil)
		ctx := context.Background()
		r1 := put(t, st, "ns", "a", nil, corev1.PodPending)
		r2 := put(t, st, "ns", "b", nil, corev1.PodPending)
		r3 := put(t, st, "ns", "a", map[string]string{"v": "2"}, corev1.PodPending)
		seen(c, r3)
		running, err := c.Watch(ctx, WatchOptions{ResourceVersion: fmt.Sprint(r1)})
		if err != nil {
			t.Fatal(err)
		}
		defer running.Stop()
		if got := collectUntil(t, running, r3); len(got) != 2 {
			t.Fatalf("watch from %d before compaction: %v", r1, got)
		}
		page, err := c.List(ctx, ListOptions{ResourceVersion: fmt.Sprint(r2), ResourceVersionMatch: metav1.ResourceVersionMatchExact, Limit: 1})
		if err != nil || page.Continue == "" {
			t.Fatalf("paged list at %d before compaction: %v, continue %q", r2, err, page.Continue)
		}

		if err := st.Compact(ctx, r3); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the cache has taken in the compaction
		if got := c.Stats().Compacted; got != r3 {
			t.Fatalf("Stats().Compacted = %d, want %d", got, r3)
		}
		c.mu.Lock()
		for _, sn := range c.snaps.list {
			if sn.rev < r3 {
				t.Errorf("snapshot at %d kept after compaction at %d", sn.rev, r3)
			}
		}
		c.mu.Unlock()

		for _, rv := range []int64{r1, r2} {
			if _, err := c.Watch(ctx, WatchOptions{ResourceVersion: fmt.Sprint(rv)}); !apierrors.IsResourceExpired(err) {
				t.Errorf("watch from %d after compaction at %d: %v, want 410", rv, r3, err)
			}
			_, err := c.List(ctx, ListOptions{ResourceVersion: fmt.Sprint(rv), ResourceVersionMatch: metav1.ResourceVersionMatchExact})
			if !apierrors.IsResourceExpired(err) {
				t.Errorf("exact list at %d after compaction at %d: %v, want 410", rv, r3, err)
			}
			if _, err := c.List(ctx, ListOptions{ResourceVersion: fmt.Sprint(rv), Limit: 5}); !apierrors.IsResourceExpired(err) {
				t.Errorf("paged list at %d after compaction at %d: %v, want 410", rv, r3, err)
			}
		}
		if _, err := c.List(ctx, ListOptions{Continue: page.Continue, Limit: 1}); !apierrors.IsResourceExpired(err) {
			t.Errorf("continue of a list at %d after compaction at %d: %v, want 410", r2, r3, err)
		}
		for _, rv := range []string{"", "0"} {
			res, err := c.List(ctx, ListOptions{ResourceVersion: rv})
			if err != nil || len(res.Items) != 2 {
				t.Errorf("list at %q after compaction: %v, %d items", rv, err, len(res.Items))
			}
		}
		if _, err := c.List(ctx, ListOptions{ResourceVersion: fmt.Sprint(r3), ResourceVersionMatch: metav1.ResourceVersionMatchExact}); err != nil {
			t.Errorf("exact list at the compaction %d: %v", r3, err)
		}
		fresh, err := c.Watch(ctx, WatchOptions{ResourceVersion: fmt.Sprint(r3)})
		if err != nil {
			t.Fatalf("watch from the compaction %d: %v", r3, err)
		}
		defer fresh.Stop()

		r4 := put(t, st, "ns", "c", nil, corev1.PodPending)
		want := ev{watch.Added, "ns/c", fmt.Sprint(r4)}
		for name, w := range map[string]*Watcher[*corev1.Pod]{"running": running, "fresh": fresh} {
			if e, ok := next(w); !ok || e != want {
				t.Errorf("%s watch after compaction: %v (open %v, err %v), want %v", name, e, ok, w.Err(), want)
			}
		}
	})
}

// TestCompactionAnnouncedBeforeMade: a compaction storage announces but has
// not made yet already stops watches from below it; lists at such a
// revision go to storage, which still has it.
func TestCompactionAnnouncedBeforeMade(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newStore(t)
		st := &announcingStore{Interface: mem, changed: make(chan struct{})}
		c := newPodCache(t, st, nil)
		ctx := context.Background()
		r1 := put(t, st, "ns", "a", nil, corev1.PodPending)
		r2 := put(t, st, "ns", "a", map[string]string{"v": "2"}, corev1.PodPending)
		seen(c, r2)

		announced := st.changed
		st.rev, st.changed = r2, make(chan struct{})
		close(announced) // the cache reads both after this, in its own goroutine
		synctest.Wait()
		if _, err := c.Watch(ctx, WatchOptions{ResourceVersion: fmt.Sprint(r1)}); !apierrors.IsResourceExpired(err) {
			t.Errorf("watch from %d after a compaction at %d was announced: %v, want 410", r1, r2, err)
		}
		res, err := c.List(ctx, ListOptions{ResourceVersion: fmt.Sprint(r1), ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		if err != nil || res.ResourceVersion != r1 || len(res.Items) != 1 || res.Objects()[0].Labels != nil {
			t.Errorf("exact list at %d, not yet compacted in storage: %+v, %v", r1, res, err)
		}
	})
}
