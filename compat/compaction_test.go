package compat_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/listwatch/listwatch/apiserver"
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
