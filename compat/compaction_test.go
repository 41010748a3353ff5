package compat_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	kubeetcd "k8s.io/apiserver/pkg/storage/etcd3"
	"k8s.io/client-go/tools/cache"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/etcd"
)

// compactionWindow is the watch cache window of the compaction test: small,
// so that a handful of writes push a version out of it and requests for it
// must go to storage, where compaction has removed it.
const compactionWindow = 8

// TestCompaction puts a reflector behind the server's history (its watch
// is frozen while more writes than the watch cache keeps go by and storage
// is compacted), then lets it re-watch from its stale version. The server
// must answer 410 Expired to the stale list, continue and watch requests,
// and the reflector must relist and converge on the server's state.
func TestCompaction(t *testing.T) {
	for _, b := range backends {
		for _, mode := range informerModes {
			t.Run(b.name+"/"+mode.name, func(t *testing.T) {
				s := startServer(t, b, serverOptions{watchCache: apiserver.WatchCacheConfig{WindowSize: compactionWindow}})
				cs := s.clientset(mediaJSON)
				ctx := t.Context()
				pods := cs.CoreV1().Pods("default")
				for i := range 3 {
					if _, err := pods.Create(ctx, pod(fmt.Sprintf("p%d", i), nil), metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				first, err := pods.List(ctx, metav1.ListOptions{Limit: 1})
				if err != nil {
					t.Fatal(err)
				}
				old := first.ResourceVersion

				lw := podLW(cs, "")
				lw.watchList = mode.watchList
				store := cache.NewStore(cache.MetaNamespaceKeyFunc)
				r := cache.NewReflectorWithOptions(lw, &corev1.Pod{}, store, cache.ReflectorOptions{
					Name: "compat-" + mode.name,
					// The reflector backs off before relisting; keep the
					// wait short so the test measures the server.
					Backoff: &wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Cap: time.Second, Steps: 10},
				})
				// Pages of two: the relist at the stale version is then
				// a paged list, which the server must read at exactly that
				// version, from storage (as kube-apiserver does without
				// the watch cache).
				r.WatchListPageSize = 2
				runCtx, stop := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() {
					defer close(done)
					r.RunWithContext(runCtx)
				}()
				t.Cleanup(func() {
					stop()
					<-done
				})
				converges(t, "initial sync", store, podList(cs.CoreV1().Pods("")))

				// One event the reflector sees, so that its last version is
				// an object's and its watch is not "very short".
				warm := updateLabel(ctx, t, pods, "p0", "warm")
				eventually(t, "warm-up event", func() (bool, string) {
					return r.LastSyncResourceVersion() == warm, "reflector at " + r.LastSyncResourceVersion() + ", want " + warm
				})
				lw.freeze()
				for i := range compactionWindow + 2 {
					updateLabel(ctx, t, pods, "p1", strconv.Itoa(i))
				}
				if _, err := pods.Create(ctx, pod("p3", nil), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				if err := pods.Delete(ctx, "p2", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				// Once the watch cache has taken in those writes, warm (and
				// old) have left its window: a watch from them is 410.
				eventually(t, "window moves past "+warm, func() (bool, string) {
					w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: warm})
					if err != nil {
						return false, err.Error()
					}
					defer w.Stop()
					ev := <-w.ResultChan()
					return ev.Type == watch.Error && apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)), fmt.Sprintf("first event %s", ev.Type)
				})
				// Out of the window but not yet compacted, the old version
				// is still served, from storage.
				if _, err := pods.List(ctx, metav1.ListOptions{ResourceVersion: old, ResourceVersionMatch: metav1.ResourceVersionMatchExact}); err != nil {
					t.Fatalf("exact list at %s before compaction: %v", old, err)
				}
				rev, err := s.store.Revision(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.store.Compact(ctx, rev); err != nil {
					t.Fatal(err)
				}

				expired := func(what string, err error) {
					t.Helper()
					if !apierrors.IsResourceExpired(err) || statusCode(err) != 410 {
						t.Errorf("%s: got %v (code %d), want 410 Expired", what, err, statusCode(err))
					}
				}
				_, err = pods.List(ctx, metav1.ListOptions{ResourceVersion: old, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
				expired("exact list at "+old, err)
				_, err = pods.List(ctx, metav1.ListOptions{ResourceVersion: warm, Limit: 1})
				expired("paged list at "+warm, err)
				_, err = pods.List(ctx, metav1.ListOptions{Continue: first.Continue, Limit: 1})
				expired("continue of a list at "+old, err)
				w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: old})
				if err != nil {
					t.Fatal(err)
				}
				ev := <-w.ResultChan()
				w.Stop()
				if ev.Type != watch.Error {
					t.Errorf("watch from %s: first event %s, want ERROR", old, ev.Type)
				} else {
					expired("watch from "+old, apierrors.FromObject(ev.Object))
				}

				// The reflector's watch drops: it watches again from its
				// stale version, is told 410, relists and catches up.
				lw.cut()
				converges(t, "after compaction", store, podList(cs.CoreV1().Pods("")))
				if _, err := pods.Create(ctx, pod("p4", nil), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				converges(t, "live after relist", store, podList(cs.CoreV1().Pods("")))
				checkRelist(t, lw.history(), warm, mode.watchList)
			})
		}
	}
}

// checkRelist checks the reflector's requests after its watch from the
// stale version: a watch from it answered 410, then a new initial state —
// a stream with sendInitialEvents in WatchList mode; in list-watch mode a
// paged list at the stale version answered 410 and one from the latest
// state ("").
func checkRelist(t *testing.T, calls []lwCall, stale string, watchList bool) {
	t.Helper()
	at := -1
	for i, c := range calls {
		if c.Watch && c.Opts.ResourceVersion == stale && c.Opts.SendInitialEvents == nil {
			at = i
			break
		}
	}
	if at < 0 {
		t.Fatalf("no watch from %s in %+v", stale, calls)
	}
	if !apierrors.IsResourceExpired(calls[at].Err) {
		t.Fatalf("watch from %s ended with %v, want 410 Expired", stale, calls[at].Err)
	}
	var initial []lwCall // list or WatchList requests that start a new state
	for _, c := range calls[at+1:] {
		if (!c.Watch && c.Opts.Continue == "") || (c.Watch && c.Opts.SendInitialEvents != nil) {
			initial = append(initial, c)
		}
	}
	if watchList {
		if len(initial) != 1 || initial[0].Err != nil {
			t.Errorf("after the 410: %+v, want one WatchList stream", initial)
		}
		return
	}
	if len(initial) != 2 || initial[0].Opts.ResourceVersion != stale || !apierrors.IsResourceExpired(initial[0].Err) ||
		initial[1].Opts.ResourceVersion != "" || initial[1].Err != nil {
		t.Errorf("after the 410: %+v, want a list at %s answered 410 and one at \"\"", initial, stale)
	}
}

func updateLabel(ctx context.Context, t *testing.T, pods podCRUDGet, name, value string) string {
	t.Helper()
	p, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Labels = map[string]string{"v": value}
	if p, err = pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return p.ResourceVersion
}

// TestCompactionByOthers compacts the server's etcd behind its back, as
// another process sharing the etcd would — etcdctl (a plain client's
// Compact) or kube-apiserver's compactor (its turn through compact_rev_key,
// with k8s.io/apiserver's own function) — at a revision the watch cache
// still holds in its window. Once the server has noticed, a watch from and
// lists at revisions below the compaction are 410 Expired, as from
// kube-apiserver, while watches from newer revisions, a reflector among
// them, carry on, and lists at "" and "0" are served.
func TestCompactionByOthers(t *testing.T) {
	for _, tc := range []struct {
		name string
		// poll is the server's CompactionPollInterval: an hour where
		// compact_rev_key alone must tell.
		poll    time.Duration
		compact func(ctx context.Context, cli *clientv3.Client, rev int64) error
	}{
		{"etcdctl", 20 * time.Millisecond, func(ctx context.Context, cli *clientv3.Client, rev int64) error {
			_, err := cli.Compact(ctx, rev)
			return err
		}},
		{"kube-apiserver", time.Hour, func(ctx context.Context, cli *clientv3.Client, rev int64) error {
			// A kube-apiserver that saw the key's current version and
			// revision rev at its previous turn takes this one.
			resp, err := cli.Get(ctx, etcd.CompactRevKey)
			if err != nil {
				return err
			}
			var version int64
			if len(resp.Kvs) > 0 {
				version = resp.Kvs[0].Version
			}
			_, _, compacted, err := kubeetcd.Compact(ctx, cli, version, rev)
			if err == nil && compacted != rev {
				err = fmt.Errorf("kube's Compact compacted %d, want %d", compacted, rev)
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			member := sharedEtcd(t)
			s := startServer(t, backend{"etcd", func(t *testing.T) storage.Interface {
				cfg := member.ClientConfig()
				cfg.Prefix = fmt.Sprintf("/compat-%d", etcdPrefixes.Add(1))
				cfg.CompactionPollInterval = tc.poll
				st, err := etcd.New(t.Context(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Close() })
				return st
			}}, serverOptions{})
			cli, err := clientv3.New(clientv3.Config{Endpoints: member.Endpoints, TLS: member.ClientConfig().TLS, Logger: zap.NewNop()})
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			cs := s.clientset(mediaJSON)
			ctx := t.Context()
			pods := cs.CoreV1().Pods("default")
			var rvs []string
			for i := range 4 {
				p, err := pods.Create(ctx, pod(fmt.Sprintf("p%d", i), nil), metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				rvs = append(rvs, p.ResourceVersion)
			}
			old, mid, cut := rvs[0], rvs[1], rvs[3]

			lw := podLW(cs, "")
			store := cache.NewStore(cache.MetaNamespaceKeyFunc)
			r := cache.NewReflectorWithOptions(lw, &corev1.Pod{}, store, cache.ReflectorOptions{Name: "compat-compaction-by-others"})
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				r.RunWithContext(runCtx)
			}()
			defer func() {
				stop()
				<-done
			}()
			converges(t, "initial sync", store, podList(cs.CoreV1().Pods("")))

			// Inside the watch cache's window, so served from memory.
			firstEvent(t, pods, old, false)
			if _, err := pods.List(ctx, metav1.ListOptions{ResourceVersion: old, ResourceVersionMatch: metav1.ResourceVersionMatchExact}); err != nil {
				t.Fatalf("exact list at %s before compaction: %v", old, err)
			}
			live, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: cut})
			if err != nil {
				t.Fatal(err)
			}
			defer live.Stop()

			rev, _ := strconv.ParseInt(cut, 10, 64)
			if err := tc.compact(ctx, cli, rev); err != nil {
				t.Fatal(err)
			}

			eventually(t, "a watch from "+old+" answered 410", func() (bool, string) {
				ev := firstEvent(t, pods, old, true)
				return ev.Type == watch.Error, fmt.Sprintf("first event %s", ev.Type)
			})
			expired := func(what string, err error) {
				t.Helper()
				if !apierrors.IsResourceExpired(err) || statusCode(err) != 410 {
					t.Errorf("%s: got %v (code %d), want 410 Expired", what, err, statusCode(err))
				}
			}
			for _, rv := range []string{old, mid} {
				ev := firstEvent(t, pods, rv, true)
				if ev.Type != watch.Error {
					t.Errorf("watch from %s after compaction at %s: first event %s, want ERROR", rv, cut, ev.Type)
				} else {
					expired("watch from "+rv, apierrors.FromObject(ev.Object))
				}
				_, err := pods.List(ctx, metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
				expired("exact list at "+rv, err)
				_, err = pods.List(ctx, metav1.ListOptions{ResourceVersion: rv, Limit: 2})
				expired("paged list at "+rv, err)
			}
			for _, rv := range []string{"", "0"} {
				if l, err := pods.List(ctx, metav1.ListOptions{ResourceVersion: rv}); err != nil || len(l.Items) != 4 {
					t.Errorf("list at %q after compaction: %v", rv, err)
				}
			}
			if _, err := pods.List(ctx, metav1.ListOptions{ResourceVersion: cut, ResourceVersionMatch: metav1.ResourceVersionMatchExact}); err != nil {
				t.Errorf("exact list at the compaction %s: %v", cut, err)
			}
			fresh, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: cut})
			if err != nil {
				t.Fatal(err)
			}
			defer fresh.Stop()

			after, err := pods.Create(ctx, pod("after", nil), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for name, w := range map[string]watch.Interface{"watch opened before the compaction": live, "watch opened after it": fresh} {
				select {
				case ev := <-w.ResultChan():
					if p, ok := ev.Object.(*corev1.Pod); ev.Type != watch.Added || !ok || p.Name != "after" {
						t.Errorf("%s from %s: %s %v, want ADDED after", name, cut, ev.Type, ev.Object)
					}
				case <-time.After(waitTimeout):
					t.Errorf("%s from %s: no event for %s in %v", name, cut, after.Name, waitTimeout)
				}
			}
			converges(t, "reflector after compaction", store, podList(cs.CoreV1().Pods("")))
			// Its watch was from a revision the compaction kept: no relist.
			for _, c := range lw.history()[1:] {
				if (!c.Watch && c.Opts.Continue == "") || (c.Watch && c.Opts.SendInitialEvents != nil) {
					t.Errorf("the reflector started over after the compaction: %+v", c)
				}
			}
		})
	}
}

// sharedEtcd returns the suite's embedded etcd member, starting it if no
// test has yet.
func sharedEtcd(t *testing.T) *etcd.Embedded {
	t.Helper()
	for _, b := range backends {
		if b.name == "etcd" && etcdMember == nil {
			b.new(t) // starts the member; the store it opens closes with t
		}
	}
	if etcdMember == nil {
		t.Fatal("no embedded etcd")
	}
	return etcdMember
}

// firstEvent watches pods from rv and returns the first event; the watch
// is then stopped. An ERROR event is a failure unless errOK.
func firstEvent(t *testing.T, pods podWatcher, rv string, errOK bool) watch.Event {
	t.Helper()
	w, err := pods.Watch(t.Context(), metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		if ev.Type == watch.Error && !errOK {
			t.Fatalf("watch from %s: %v", rv, apierrors.FromObject(ev.Object))
		}
		return ev
	case <-time.After(waitTimeout):
		t.Fatalf("watch from %s: no event in %v", rv, waitTimeout)
		return watch.Event{}
	}
}

type podWatcher interface {
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}
