package apiserver

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"

	"github.com/listwatch/listwatch/internal/runtest"
	"github.com/listwatch/listwatch/storage"

	schedulingapiv1 "k8s.io/kubernetes/pkg/apis/scheduling/v1"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"
)

// startServer serves over st until the test ends, and waits until it is
// ready; it returns the server and a client of it (the loopback client).
func startServer(t *testing.T, st storage.Interface, cfg Config) (*Server, kubernetes.Interface) {
	t.Helper()
	cfg.Storage = st
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runtest.Start(t, srv)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(srv.LoopbackConfig())
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

const autoupdate = "rbac.authorization.kubernetes.io/autoupdate"

// TestStartupObjects checks what kube-apiserver creates at start against
// kube's own lists, on both backends.
func TestStartupObjects(t *testing.T) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			advertise := netip.MustParseAddrPort("10.0.0.7:6443")
			_, c := startServer(t, b.New(t), Config{AdvertiseAddress: advertise})
			ctx := t.Context()
			tests := []struct {
				name  string
				check func(t *testing.T)
			}{
				{"namespaces", func(t *testing.T) {
					for _, name := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
						ns, err := c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
						if err != nil {
							t.Fatal(err)
						}
						if ns.Status.Phase != corev1.NamespaceActive || !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
							t.Errorf("%s: %+v", name, ns)
						}
					}
				}},
				{"kubernetes service", func(t *testing.T) {
					svc, err := c.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					p := svc.Spec.Ports
					if svc.Spec.ClusterIP != "10.96.0.1" || svc.Spec.Selector != nil || len(p) != 1 || p[0].Name != "https" ||
						p[0].Port != 443 || p[0].TargetPort.IntValue() != 6443 || svc.Labels["component"] != "apiserver" {
						t.Errorf("service %+v", svc)
					}
				}},
				{"kubernetes endpoints", func(t *testing.T) {
					ep, err := c.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					if len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 1 || ep.Subsets[0].Addresses[0].IP != "10.0.0.7" ||
						len(ep.Subsets[0].Ports) != 1 || ep.Subsets[0].Ports[0].Port != 6443 {
						t.Errorf("endpoints %+v", ep)
					}
					slice, err := c.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					if len(slice.Endpoints) != 1 || slice.Endpoints[0].Addresses[0] != "10.0.0.7" || *slice.Ports[0].Port != 6443 {
						t.Errorf("endpoint slice %+v", slice)
					}
				}},
				{"system priority classes", func(t *testing.T) {
					for _, want := range schedulingapiv1.SystemPriorityClasses() {
						got, err := c.SchedulingV1().PriorityClasses().Get(ctx, want.Name, metav1.GetOptions{})
						if err != nil {
							t.Fatal(err)
						}
						if got.Value != want.Value || got.Description != want.Description || got.GlobalDefault ||
							got.PreemptionPolicy == nil || *got.PreemptionPolicy != "PreemptLowerPriority" {
							t.Errorf("%s: %+v", want.Name, got)
						}
					}
				}},
				{"cluster roles", func(t *testing.T) {
					list, err := c.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
					if err != nil {
						t.Fatal(err)
					}
					got := map[string]rbacv1.ClusterRole{}
					for _, r := range list.Items {
						got[r.Name] = r
					}
					for _, want := range slices.Concat(bootstrappolicy.ClusterRoles(), bootstrappolicy.ControllerRoles()) {
						r, ok := got[want.Name]
						switch {
						case !ok:
							t.Errorf("no cluster role %s", want.Name)
						case r.Annotations[autoupdate] != "true" || r.Labels["kubernetes.io/bootstrapping"] != "rbac-defaults":
							t.Errorf("%s: annotations %v, labels %v", want.Name, r.Annotations, r.Labels)
						case want.AggregationRule == nil && len(r.Rules) != len(want.Rules):
							t.Errorf("%s: %d rules, want %d", want.Name, len(r.Rules), len(want.Rules))
						case (want.AggregationRule == nil) != (r.AggregationRule == nil):
							t.Errorf("%s: aggregation rule %v, want %v", want.Name, r.AggregationRule, want.AggregationRule)
						}
					}
				}},
				{"cluster role bindings", func(t *testing.T) {
					for _, want := range slices.Concat(bootstrappolicy.ClusterRoleBindings(), bootstrappolicy.ControllerRoleBindings()) {
						got, err := c.RbacV1().ClusterRoleBindings().Get(ctx, want.Name, metav1.GetOptions{})
						if err != nil {
							t.Errorf("%s: %v", want.Name, err)
							continue
						}
						if got.RoleRef != want.RoleRef || len(got.Subjects) != len(want.Subjects) || got.Annotations[autoupdate] != "true" {
							t.Errorf("%s: %+v", want.Name, got)
						}
					}
				}},
				{"namespaced roles and bindings", func(t *testing.T) {
					for ns, roles := range bootstrappolicy.NamespaceRoles() {
						for _, want := range roles {
							if _, err := c.RbacV1().Roles(ns).Get(ctx, want.Name, metav1.GetOptions{}); err != nil {
								t.Errorf("role %s/%s: %v", ns, want.Name, err)
							}
						}
					}
					for ns, bindings := range bootstrappolicy.NamespaceRoleBindings() {
						for _, want := range bindings {
							if _, err := c.RbacV1().RoleBindings(ns).Get(ctx, want.Name, metav1.GetOptions{}); err != nil {
								t.Errorf("role binding %s/%s: %v", ns, want.Name, err)
							}
						}
					}
				}},
			}
			for _, tt := range tests {
				t.Run(tt.name, tt.check)
			}
		})
	}
}

// TestKubernetesServiceLoopback advertises a loopback address, which
// Endpoints may not hold: the Service is made, with no Endpoints.
func TestKubernetesServiceLoopback(t *testing.T) {
	_, c := startServer(t, backends[0].New(t), Config{AdvertiseAddress: netip.MustParseAddrPort("127.0.0.1:40000")})
	svc, err := c.CoreV1().Services("default").Get(t.Context(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := svc.Spec.Ports[0].TargetPort.IntValue(); got != 40000 {
		t.Errorf("targetPort %d, want 40000", got)
	}
	if _, err := c.CoreV1().Endpoints("default").Get(t.Context(), "kubernetes", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("endpoints: %v, want not found", err)
	}
}

// TestStartupReconciles restarts a server over the storage of another
// and checks that the bootstrap policy is reconciled as kube-apiserver's
// hook does: what is missing comes back, what was trimmed is completed,
// unless its autoupdate annotation is "false"; what a user changed beyond
// the policy is kept.
func TestStartupReconciles(t *testing.T) {
	st := backends[0].New(t)
	ctx := t.Context()
	first, err := New(Config{Storage: st})
	if err != nil {
		t.Fatal(err)
	}
	stopFirst := runtest.Start(t, first)
	if err := first.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	var c kubernetes.Interface
	c, err = kubernetes.NewForConfig(first.LoopbackConfig())
	if err != nil {
		t.Fatal(err)
	}
	trim := func(name string, protect bool) {
		r, err := c.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r.Rules = r.Rules[:1]
		r.Labels["user"] = "label"
		if protect {
			r.Annotations[autoupdate] = "false"
		}
		if _, err := c.RbacV1().ClusterRoles().Update(ctx, r, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	trim("system:aggregate-to-view", false)
	trim("system:aggregate-to-edit", true)
	if err := c.RbacV1().ClusterRoleBindings().Delete(ctx, "system:basic-user", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.SchedulingV1().PriorityClasses().Delete(ctx, "system-cluster-critical", metav1.DeleteOptions{}); err != nil && !apierrors.IsForbidden(err) {
		t.Fatal(err)
	}
	stopFirst()

	_, c = startServer(t, st, Config{})
	for _, tt := range []struct {
		role string
		// covered: the role is completed to cover the policy's rules
		// again; otherwise it keeps the one rule left.
		covered bool
	}{
		{"system:aggregate-to-view", true},
		{"system:aggregate-to-edit", false},
	} {
		r, err := c.RbacV1().ClusterRoles().Get(ctx, tt.role, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		covers, _ := rbacvalidation.Covers(r.Rules, policyRole(t, tt.role).Rules)
		if covers != tt.covered || (!tt.covered && len(r.Rules) != 1) || r.Labels["user"] != "label" {
			t.Errorf("%s after restart: covers the policy %v (want %v), %d rules, labels %v", tt.role, covers, tt.covered, len(r.Rules), r.Labels)
		}
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Get(ctx, "system:basic-user", metav1.GetOptions{}); err != nil {
		t.Errorf("deleted binding not recreated: %v", err)
	}
	if _, err := c.SchedulingV1().PriorityClasses().Get(ctx, "system-cluster-critical", metav1.GetOptions{}); err != nil {
		t.Errorf("system priority class not recreated: %v", err)
	}
}

func policyRole(t *testing.T, name string) rbacv1.ClusterRole {
	t.Helper()
	for _, r := range bootstrappolicy.ClusterRoles() {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no bootstrap cluster role %s", name)
	return rbacv1.ClusterRole{}
}

func TestReadyChecks(t *testing.T) {
	st := backends[0].New(t)
	srv, err := New(Config{Storage: st})
	if err != nil {
		t.Fatal(err)
	}
	runtest.Start(t, srv)
	var names []string
	for _, c := range srv.ReadyChecks() {
		names = append(names, c.Name)
	}
	want := []string{
		"informer-sync",
		"poststarthook/start-system-namespaces-controller",
		"poststarthook/bootstrap-controller",
		"poststarthook/scheduling/bootstrap-system-priority-classes",
		"poststarthook/rbac/bootstrap-roles",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("ReadyChecks = %v, want %v", names, want)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range srv.ReadyChecks() {
		if err := c.Check(ctx); err != nil {
			t.Errorf("%s after WaitReady: %v", c.Name, err)
		}
	}
}

// TestLifecycle: New starts nothing, and a server stopped during its
// start-up stops at once: Run returns, WaitReady reports it, and no
// goroutine is left (TestMain checks); Run runs once.
func TestLifecycle(t *testing.T) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			st := b.New(t)
			before := goleak.IgnoreCurrent()
			srv, err := New(Config{Storage: st})
			if err != nil {
				t.Fatal(err)
			}
			// etcd's client and member start goroutines of their own as
			// they please; on the memory backend any new one is New's.
			if err := goleak.Find(before); err != nil && b.Name == "memory" {
				t.Fatalf("New started goroutines: %v", err)
			}
			short, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
			defer cancel()
			if err := srv.WaitReady(short); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("WaitReady before Run = %v, want the context's deadline", err)
			}
			ctx, stop := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- srv.Run(ctx) }()
			stop()
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
			if err := srv.WaitReady(t.Context()); err == nil || !strings.Contains(err.Error(), "stopped") {
				t.Errorf("WaitReady after Run = %v", err)
			}
			if err := srv.Run(t.Context()); err == nil {
				t.Error("second Run: nil error")
			}
		})
	}
}
