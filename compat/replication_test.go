package compat_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/controllers/podlifecycle"
)

// runControllerManager runs listwatch's controller-manager against s, alone
// (no leader election) and with pods starting at once, until the test ends.
func runControllerManager(t *testing.T, s *server) {
	t.Helper()
	m, err := controllermanager.New(controllermanager.Config{
		Client:         &client.Config{REST: s.restConfig(mediaJSON), QPS: -1},
		LeaderElection: controllermanager.LeaderElection{Disabled: true},
		PodLifecycle:   podlifecycle.Options{StartDelay: time.Nanosecond, TerminationDelay: time.Nanosecond},
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	// Cleanups run last-registered first: this one, registered after the
	// server's, stops the manager while the server still answers.
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller-manager: %v", err)
		}
	})
	eventually(t, "controller-manager ready", func() (bool, string) { return m.Ready(), "caches not synced" })
}

// TestReplicationThroughClientGo is issue 7's scenario driven by real
// client-go: an RC created with a clientset converges to Running and Ready
// pods that a client-go shared informer sees, follows the scale
// subresource up and down, and its pods are garbage-collected once it is
// deleted.
func TestReplicationThroughClientGo(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b, serverOptions{})
			runControllerManager(t, s)
			cs := s.clientset(mediaProtobuf)
			ctx := t.Context()
			const ns, name = "default", "web"

			factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
			podInformer := factory.Core().V1().Pods()
			lister := podInformer.Lister()
			podInformer.Informer() // registered before Start, so that it starts
			factory.Start(ctx.Done())
			t.Cleanup(factory.Shutdown)
			for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
				if !ok {
					t.Fatalf("informer for %v did not sync", typ)
				}
			}

			created, err := cs.CoreV1().ReplicationControllers(ns).Create(ctx, rc(name, 3), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			selector := labels.SelectorFromSet(created.Spec.Selector)

			steps := []struct {
				what     string
				replicas int32 // 0: leave the RC as it is
			}{
				{what: "created with 3"},
				{what: "scaled up to 6", replicas: 6},
				{what: "scaled down to 2", replicas: 2},
			}
			for _, st := range steps {
				want := *created.Spec.Replicas
				if st.replicas > 0 {
					want = st.replicas
					scaleTo(ctx, t, cs, ns, name, want)
				}
				eventually(t, st.what+": informer sees the RC's pods Running and Ready", func() (bool, string) {
					pods, err := lister.Pods(ns).List(selector)
					if err != nil {
						return false, err.Error()
					}
					ready := 0
					for _, p := range pods {
						if !ownedBy(p, created.UID) {
							return false, fmt.Sprintf("pod %s is not owned by the RC: %v", p.Name, p.OwnerReferences)
						}
						if runningAndReady(p) {
							ready++
						}
					}
					return len(pods) == int(want) && ready == int(want), fmt.Sprintf("%d pods, %d Running and Ready, want %d", len(pods), ready, want)
				})
				eventually(t, st.what+": RC status", func() (bool, string) {
					got, err := cs.CoreV1().ReplicationControllers(ns).Get(ctx, name, metav1.GetOptions{})
					if err != nil {
						return false, err.Error()
					}
					s := got.Status
					return s.Replicas == want && s.ReadyReplicas == want && s.ObservedGeneration == got.Generation,
						fmt.Sprintf("status %+v at generation %d, want %d ready", s, got.Generation, want)
				})
			}

			// client-go leaves the policy to the server, whose default for
			// RCs orphans; kubectl asks for background, and so does this.
			background := metav1.DeletePropagationBackground
			if err := cs.CoreV1().ReplicationControllers(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "pods garbage-collected", func() (bool, string) {
				pods, err := lister.Pods(ns).List(selector)
				if err != nil {
					return false, err.Error()
				}
				return len(pods) == 0, fmt.Sprintf("%d pods left", len(pods))
			})
			if _, err := cs.CoreV1().ReplicationControllers(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("RC after delete: %v, want NotFound", err)
			}
		})
	}
}

// scaleTo sets the RC's replicas through the scale subresource, as
// `kubectl scale` and autoscalers do, and checks what the read shows.
func scaleTo(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string, replicas int32) {
	t.Helper()
	rcs := cs.CoreV1().ReplicationControllers(ns)
	sc, err := rcs.GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("GetScale: %v", err)
	}
	if sc.Name != name || sc.Namespace != ns {
		t.Fatalf("GetScale names %s/%s, want %s/%s", sc.Namespace, sc.Name, ns, name)
	}
	sc.Spec.Replicas = replicas
	updated, err := rcs.UpdateScale(ctx, name, sc, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("UpdateScale: %v", err)
	}
	if updated.Spec.Replicas != replicas {
		t.Fatalf("UpdateScale answered spec.replicas %d, want %d", updated.Spec.Replicas, replicas)
	}
	got, err := rcs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *got.Spec.Replicas != replicas {
		t.Fatalf("RC spec.replicas %d after UpdateScale, want %d", *got.Spec.Replicas, replicas)
	}
}

func ownedBy(p *corev1.Pod, uid types.UID) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.UID == uid && ref.Kind == "ReplicationController"
}

func runningAndReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
