package compat_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// TestErrors checks that client-go's apierrors helpers recognise the
// server's errors: the Status objects must carry the reason, code and
// details kube-apiserver would, or controllers that branch on them (retry
// on conflict, ignore not-found, give up on invalid) misbehave.
func TestErrors(t *testing.T) {
	type tc struct {
		name string
		do   func(ctx context.Context, cs kubernetes.Interface) error
		is   func(error) bool
		code int32
	}
	pods := func(cs kubernetes.Interface) podCRUDGet { return cs.CoreV1().Pods("default") }
	cases := []tc{
		{"create existing", func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := pods(cs).Create(ctx, pod("exists", nil), metav1.CreateOptions{})
			return err
		}, apierrors.IsAlreadyExists, 409},
		{"get missing", func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := pods(cs).Get(ctx, "missing", metav1.GetOptions{})
			return err
		}, apierrors.IsNotFound, 404},
		{"delete missing", func(ctx context.Context, cs kubernetes.Interface) error {
			return pods(cs).Delete(ctx, "missing", metav1.DeleteOptions{})
		}, apierrors.IsNotFound, 404},
		{"update missing", func(ctx context.Context, cs kubernetes.Interface) error {
			p := pod("missing", nil)
			p.ResourceVersion = "1"
			_, err := pods(cs).Update(ctx, p, metav1.UpdateOptions{})
			return err
		}, apierrors.IsNotFound, 404},
		{"create in missing namespace", func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Pods("nowhere").Create(ctx, pod("p", nil), metav1.CreateOptions{})
			return err
		}, apierrors.IsNotFound, 404},
		{"update with stale resourceVersion", func(ctx context.Context, cs kubernetes.Interface) error {
			p, err := pods(cs).Get(ctx, "exists", metav1.GetOptions{})
			if err != nil {
				return err
			}
			stale := p.DeepCopy()
			p.Labels = map[string]string{"step": "1"}
			if _, err := pods(cs).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
				return err
			}
			stale.Labels = map[string]string{"step": "stale"}
			_, err = pods(cs).Update(ctx, stale, metav1.UpdateOptions{})
			return err
		}, apierrors.IsConflict, 409},
		{"delete with stale resourceVersion precondition", func(ctx context.Context, cs kubernetes.Interface) error {
			p, err := pods(cs).Get(ctx, "exists", metav1.GetOptions{})
			if err != nil {
				return err
			}
			p.Labels = map[string]string{"step": "2"}
			if _, err := pods(cs).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
				return err
			}
			return pods(cs).Delete(ctx, "exists", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &p.ResourceVersion}})
		}, apierrors.IsConflict, 409},
		{"invalid name", func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := pods(cs).Create(ctx, pod("Bad_Name", nil), metav1.CreateOptions{})
			return err
		}, apierrors.IsInvalid, 422},
		{"invalid replicas on scale", func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().ReplicationControllers("default").UpdateScale(ctx, "r", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "default"}, Spec: autoscalingv1.ScaleSpec{Replicas: -1}}, metav1.UpdateOptions{})
			return err
		}, apierrors.IsInvalid, 422},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b, serverOptions{})
			cs := s.clientset(mediaJSON)
			ctx := t.Context()
			if _, err := pods(cs).Create(ctx, pod("exists", nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := cs.CoreV1().ReplicationControllers("default").Create(ctx, rc("r", 1), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					err := c.do(ctx, cs)
					if !c.is(err) || statusCode(err) != c.code {
						t.Fatalf("got %v (code %d, reason %q), want code %d", err, statusCode(err), apierrors.ReasonForError(err), c.code)
					}
				})
			}
			t.Run("invalid name details", func(t *testing.T) {
				_, err := pods(cs).Create(ctx, pod("Bad_Name", nil), metav1.CreateOptions{})
				var st apierrors.APIStatus
				if !errors.As(err, &st) {
					t.Fatalf("%v is not an API status", err)
				}
				d := st.Status().Details
				if d == nil || d.Kind != "Pod" || d.Name != "Bad_Name" || len(d.Causes) == 0 || d.Causes[0].Field != "metadata.name" {
					t.Errorf("details %+v, want kind Pod, name Bad_Name and a cause on metadata.name", d)
				}
			})
			t.Run("unauthorized", func(t *testing.T) {
				cfg := s.restConfig(mediaJSON)
				cfg.BearerToken = "not-" + s.token
				bad, err := kubernetes.NewForConfig(cfg)
				if err != nil {
					t.Fatal(err)
				}
				_, err = bad.CoreV1().Pods("default").Get(ctx, "exists", metav1.GetOptions{})
				if !apierrors.IsUnauthorized(err) || statusCode(err) != 401 {
					t.Fatalf("got %v, want 401 Unauthorized", err)
				}
			})
			t.Run("retry on conflict", func(t *testing.T) {
				// Writers racing on one object with read-modify-write: the
				// server's conflicts are what makes RetryOnConflict retry,
				// so no increment is lost.
				const writers, increments = 4, 5
				if _, err := pods(cs).Create(ctx, pod("counter", map[string]string{"n": "0"}), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				errs := make(chan error, writers)
				for range writers {
					wg.Go(func() {
						for range increments {
							err := retry.RetryOnConflict(conflictBackoff, func() error {
								p, err := pods(cs).Get(ctx, "counter", metav1.GetOptions{})
								if err != nil {
									return err
								}
								n, err := strconv.Atoi(p.Labels["n"])
								if err != nil {
									return err
								}
								p.Labels["n"] = strconv.Itoa(n + 1)
								_, err = pods(cs).Update(ctx, p, metav1.UpdateOptions{})
								return err
							})
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
					t.Fatalf("increment: %v", err)
				}
				p, err := pods(cs).Get(ctx, "counter", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got := p.Labels["n"]; got != strconv.Itoa(writers*increments) {
					t.Errorf("counter %s, want %d", got, writers*increments)
				}
			})
		})
	}
}

// conflictBackoff lets racing writers retry until each gets through; the
// full jitter spreads them so that one of them always wins.
var conflictBackoff = wait.Backoff{Steps: 200, Duration: time.Millisecond, Factor: 1.1, Jitter: 1, Cap: 20 * time.Millisecond}

type podCRUDGet interface {
	podCRUD
	Get(context.Context, string, metav1.GetOptions) (*corev1.Pod, error)
}
