package compat_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// TestWatchList syncs a label-filtered, namespaced pod informer by
// client-go's streaming list (the WatchListClient feature), checks in the
// server's request log that its initial state came from one watch with
// sendInitialEvents=true and no list, and that objects moving in and out
// of the selector afterwards reach the informer as adds and deletes.
func TestWatchList(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b, serverOptions{})
			cs := s.clientset(mediaJSON)
			// truth reads the server's state for comparisons; its requests
			// are told apart from the informer's by its user agent.
			truth := s.truthClient()
			ctx := t.Context()
			pods := cs.CoreV1().Pods("default")
			for i := range 30 {
				tier := "a"
				if i%2 == 1 {
					tier = "b"
				}
				if _, err := pods.Create(ctx, pod(fmt.Sprintf("p%02d", i), map[string]string{"tier": tier}), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			const selector = "tier=a"
			factory := informers.NewSharedInformerFactoryWithOptions(cs, 0,
				informers.WithNamespace("default"),
				informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
			inf := factory.Core().V1().Pods().Informer()
			events := newEventLog()
			if _, err := inf.AddEventHandler(events.handler()); err != nil {
				t.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			t.Cleanup(func() {
				stop()
				factory.Shutdown()
			})
			factory.Start(runCtx.Done())
			if !cache.WaitForCacheSync(runCtx.Done(), inf.HasSynced) {
				t.Fatal("informer did not sync")
			}
			want := serverVersions(ctx, t, podList(selectedPods{truth.CoreV1().Pods("default"), selector}))
			if got := versionsOf(inf.GetStore().List()); got.String() != want.String() || len(got) != 15 {
				t.Fatalf("after sync the informer has %v, want the 15 pods of %s: %v", got, selector, want)
			}

			reqs := s.log.matching(func(r *loggedRequest) bool {
				return r.Path == "/api/v1/namespaces/default/pods" && r.Query.Get("labelSelector") == selector && r.Agent != truthAgent
			})
			if len(reqs) != 1 {
				t.Fatalf("server saw %d requests from the informer, want one watch: %+v", len(reqs), reqs)
			}
			q := reqs[0].Query
			if !isWatch(&reqs[0]) || q.Get("sendInitialEvents") != "true" || q.Get("allowWatchBookmarks") != "true" ||
				q.Get("resourceVersionMatch") != "NotOlderThan" || q.Get("resourceVersion") != "" || reqs[0].Status != 200 {
				t.Errorf("informer request %v (status %d), want a watch with sendInitialEvents=true, allowWatchBookmarks=true, resourceVersionMatch=NotOlderThan, resourceVersion \"\"", q, reqs[0].Status)
			}

			// p01 moves into the selector, p00 out of it: the informer's
			// one watch turns them into an add and a delete.
			updateTier := func(name, tier string) {
				p, err := pods.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				p.Labels["tier"] = tier
				if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			updateTier("p01", "a")
			updateTier("p00", "b")
			converges(t, "selector moves", inf.GetStore(), podList(selectedPods{truth.CoreV1().Pods("default"), selector}))
			eventually(t, "handler events", func() (bool, string) {
				a, u, d := events.counts()
				return len(a) == 16 && a["default/p01"] == 1 && len(u) == 0 && len(d) == 1 && d["default/p00"] == 1,
					fmt.Sprintf("adds %v updates %v deletes %v", a, u, d)
			})
			if n := len(s.log.matching(func(r *loggedRequest) bool {
				return r.Query.Get("labelSelector") == selector && !isWatch(r) && r.Agent != truthAgent
			})); n != 0 {
				t.Errorf("informer listed %d times", n)
			}
		})
	}
}

// selectedPods lists pods with a label selector: the server's view of
// what a filtered informer must hold.
type selectedPods struct {
	podClient
	selector string
}

func (s selectedPods) List(ctx context.Context, o metav1.ListOptions) (*corev1.PodList, error) {
	o.LabelSelector = s.selector
	return s.podClient.List(ctx, o)
}
