package controller_test

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/controller"
)

// Example is the typical controller, the pattern of seed 002: informer
// handlers put keys on a workqueue, workers hand each key to a sync
// handler that reads the informers' caches and acts. Here a controller of
// ReplicaSets counts the pods each one controls.
func Example() {
	// The informers. In a program they come from a shared informer
	// factory, started once every controller is made:
	//
	//	factory := informers.NewSharedInformerFactory(client, informers.Options{})
	//	replicaSets := informers.For[*appsv1.ReplicaSet](factory)
	//	pods := informers.For[*corev1.Pod](factory)
	//	... controller.New(...) ...
	//	factory.Start(ctx)
	//
	// Here they are fakes, which a test fills by hand.
	rsKind := appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, rsKind)}}}
	replicaSets := cachetest.NewInformer(rs)
	pods := cachetest.NewInformer(pod)

	synced := make(chan struct{})
	// syncHandler is called with the key ("namespace/name") of one
	// ReplicaSet at a time. It must be idempotent: it reads the current
	// state from the caches and acts on it, whatever event queued the key.
	syncHandler := func(ctx context.Context, key string) (controller.Result, error) {
		defer func() { synced <- struct{}{} }()
		rs, exists, err := replicaSets.GetIndexer().GetByKey(key)
		if err != nil {
			return controller.Result{}, err // retried with backoff
		}
		if !exists {
			return controller.Result{}, nil // deleted: nothing to do
		}
		inNamespace, err := pods.GetIndexer().ByIndex(cache.NamespaceIndex, rs.Namespace)
		if err != nil {
			return controller.Result{}, err
		}
		n := 0
		for _, p := range inNamespace {
			if metav1.IsControlledBy(p, rs) {
				n++
			}
		}
		fmt.Printf("%s controls %d pod(s)\n", key, n)
		if n == 0 {
			// What no event announces (here, say, a pod to be made once a
			// quota frees up) is looked at again later.
			return controller.Result{RequeueAfter: time.Minute}, nil
		}
		return controller.Result{}, nil
	}

	// New says what feeds the workqueue: every change of a ReplicaSet
	// (For), and every change of a pod a ReplicaSet controls (Owns), which
	// queues the ReplicaSet's key.
	c, err := controller.New("replicasets", syncHandler, controller.Options{Workers: 2},
		controller.For(replicaSets),
		controller.Owns(pods, rsKind))
	if err != nil {
		fmt.Println(err)
		return
	}

	// Run registers the handlers, waits for the caches to sync, then runs
	// the workers until ctx ends.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	<-synced

	// The pod goes: its owner is synced again.
	if err := pods.Delete(pod, false); err != nil {
		fmt.Println(err)
	}
	<-synced

	cancel()
	fmt.Println("Run:", <-done)
	// Output:
	// default/web controls 1 pod(s)
	// default/web controls 0 pod(s)
	// Run: <nil>
}
