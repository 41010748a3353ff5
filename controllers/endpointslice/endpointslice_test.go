package endpointslice

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/controllers/internal/slicetest"
	"github.com/listwatch/listwatch/informers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// api holds the objects the controller reads in cachetest sources; the
// Reconciler's EndpointSlice writes land in slices (slicetest.Clientset).
type api struct {
	services *cachetest.Source[*corev1.Service]
	pods     *cachetest.Source[*corev1.Pod]
	nodes    *cachetest.Source[*corev1.Node]
	slices   *cachetest.Source[*discoveryv1.EndpointSlice]
	writes   *slicetest.Writes
}

// newAPI returns an api holding node-1, in zone-a.
func newAPI() *api {
	a := &api{
		services: cachetest.New(cachetest.WithResource[*corev1.Service](corev1.Resource("services"))),
		pods:     cachetest.New(cachetest.WithResource[*corev1.Pod](corev1.Resource("pods"))),
		nodes:    cachetest.New(cachetest.WithResource[*corev1.Node](corev1.Resource("nodes"))),
		slices:   cachetest.New(cachetest.WithResource[*discoveryv1.EndpointSlice](discoveryv1.Resource("endpointslices"))),
	}
	if _, err := a.nodes.Create(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{corev1.LabelTopologyZone: "zone-a"}}}); err != nil {
		panic(err) // a new source holds no node-1
	}
	return a
}

// run starts the controller over a, until the test ends.
func (a *api) run(t *testing.T, opts Options) *Controller {
	t.Helper()
	factory := informers.NewSharedInformerFactory(informers.SourceFunc(
		func(gvr schema.GroupVersionResource, _ string, _ func(*metav1.ListOptions)) cache.ListerWatcher[cache.Object] {
			switch gvr.Resource {
			case "services":
				return cache.Erase(a.services)
			case "pods":
				return cache.Erase(a.pods)
			case "nodes":
				return cache.Erase(a.nodes)
			}
			return cache.Erase(a.slices)
		}), informers.Options{Reflector: cache.ReflectorOptions{Logger: quiet}})
	opts.Controller.Logger = quiet
	cs, writes := slicetest.Clientset(a.slices)
	a.writes = writes
	c, err := New(Informers{
		Services:       informers.For[*corev1.Service](factory),
		Pods:           informers.For[*corev1.Pod](factory),
		Nodes:          informers.For[*corev1.Node](factory),
		EndpointSlices: informers.For[*discoveryv1.EndpointSlice](factory),
	}, cs, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	factory.Start(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		factory.Shutdown()
	})
	// The workers start once the caches have synced, which the
	// controller polls for.
	time.Sleep(time.Second)
	synctest.Wait()
	return c
}

// endpoints returns, per slice of the Service (sorted by name), its
// endpoints as "pod:ready/serving/terminating@port", sorted.
func (a *api) endpoints(svc string) [][]string {
	var out [][]string
	items := a.slices.Items()
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	for _, s := range items {
		if s.Labels[discoveryv1.LabelServiceName] != svc {
			continue
		}
		var ports []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprint(*p.Port))
		}
		var eps []string
		for _, e := range s.Endpoints {
			c := e.Conditions
			eps = append(eps, fmt.Sprintf("%s:%v/%v/%v@%s", e.TargetRef.Name, *c.Ready, *c.Serving, *c.Terminating, strings.Join(ports, ",")))
		}
		sort.Strings(eps)
		out = append(out, eps)
	}
	return out
}

var web = map[string]string{"app": "web"}

func service(name string, edit func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.Now()},
		Spec: corev1.ServiceSpec{
			Selector:   web,
			ClusterIP:  "10.96.0.10",
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports:      []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")}},
		},
	}
	if edit != nil {
		edit(s)
	}
	return s
}

func pod(name string, ip string, ready bool, edit func(*corev1.Pod)) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Labels: web},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{
			Name: "main", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
		},
	}
	if ip != "" {
		p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	}
	if edit != nil {
		edit(p)
	}
	return p
}

func TestSlices(t *testing.T) {
	terminating := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)} }
	tests := []struct {
		name string
		svc  *corev1.Service
		pods []*corev1.Pod
		max  int32
		want [][]string
	}{
		{"ready and not ready pods, the named port resolved", service("web", nil),
			[]*corev1.Pod{pod("a", "10.244.0.1", true, nil), pod("b", "10.244.0.2", false, nil)}, 0,
			[][]string{{"a:true/true/false@8080", "b:false/false/false@8080"}}},
		{"a terminating pod is serving but not ready", service("web", nil),
			[]*corev1.Pod{pod("a", "10.244.0.1", true, terminating)}, 0,
			[][]string{{"a:false/true/true@8080"}}},
		{"pods without an IP or unselected are left out", service("web", nil),
			[]*corev1.Pod{pod("a", "", true, nil), pod("b", "10.244.0.2", true, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "db"} })}, 0,
			[][]string{{}}},
		{"at most max endpoints a slice", service("web", nil),
			[]*corev1.Pod{pod("a", "10.244.0.1", true, nil), pod("b", "10.244.0.2", true, nil), pod("c", "10.244.0.3", true, nil)}, 2,
			nil /* checked by count below */},
		{"an ExternalName Service gets none", service("web", func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName, s.Spec.ClusterIP = corev1.ServiceTypeExternalName, "example.com", ""
		}), []*corev1.Pod{pod("a", "10.244.0.1", true, nil)}, 0, nil},
		{"a Service without a selector gets none", service("web", func(s *corev1.Service) { s.Spec.Selector = nil }),
			[]*corev1.Pod{pod("a", "10.244.0.1", true, nil)}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newAPI()
				if _, err := a.services.Create(tt.svc); err != nil {
					t.Fatal(err)
				}
				for _, p := range tt.pods {
					if _, err := a.pods.Create(p); err != nil {
						t.Fatal(err)
					}
				}
				a.run(t, Options{MaxEndpointsPerSlice: tt.max})
				synctest.Wait()
				got := a.endpoints("web")
				if tt.max > 0 {
					n := 0
					for _, s := range got {
						if len(s) > int(tt.max) {
							t.Errorf("a slice of %d endpoints, more than %d", len(s), tt.max)
						}
						n += len(s)
					}
					if n != len(tt.pods) || len(got) != 2 {
						t.Errorf("%d endpoints in %d slices, want %d in 2", n, len(got), len(tt.pods))
					}
					return
				}
				if fmt.Sprint(got) != fmt.Sprint(tt.want) {
					t.Errorf("slices %v, want %v", got, tt.want)
				}
			})
		})
	}
}

// TestSliceMetadata: a slice is labelled, owned and annotated as kube's.
func TestSliceMetadata(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAPI()
		svc := service("web", func(s *corev1.Service) { s.Labels = map[string]string{"tier": "front"} })
		if _, err := a.services.Create(svc); err != nil {
			t.Fatal(err)
		}
		if _, err := a.pods.Create(pod("a", "10.244.0.1", true, nil)); err != nil {
			t.Fatal(err)
		}
		a.run(t, Options{})
		synctest.Wait()
		items := a.slices.Items()
		if len(items) != 1 {
			t.Fatalf("%d slices, want 1", len(items))
		}
		s := items[0]
		for k, v := range map[string]string{
			discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: ControllerName, "tier": "front",
		} {
			if s.Labels[k] != v {
				t.Errorf("label %s=%q, want %q", k, s.Labels[k], v)
			}
		}
		if !strings.HasPrefix(s.Name, "web-") || s.AddressType != discoveryv1.AddressTypeIPv4 {
			t.Errorf("slice %s of %s, want web-… of IPv4", s.Name, s.AddressType)
		}
		if ref := metav1.GetControllerOf(s); ref == nil || ref.Kind != "Service" || ref.Name != "web" || ref.UID != svc.UID {
			t.Errorf("controller %v, want the Service", ref)
		}
		if _, ok := s.Annotations[corev1.EndpointsLastChangeTriggerTime]; !ok {
			t.Errorf("no %s annotation: %v", corev1.EndpointsLastChangeTriggerTime, s.Annotations)
		}
		if e := s.Endpoints[0]; e.NodeName == nil || *e.NodeName != "node-1" || e.Zone == nil || *e.Zone != "zone-a" || e.TargetRef.UID != "uid-a" || e.Addresses[0] != "10.244.0.1" {
			t.Errorf("endpoint %+v", e)
		}
	})
}

// TestPodChanges: a pod turning ready, a pod relabelled out of the
// selector, and a pod deleted each change the slice; a change no endpoint
// shows (an annotation) writes nothing.
func TestPodChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAPI()
		if _, err := a.services.Create(service("web", nil)); err != nil {
			t.Fatal(err)
		}
		for _, p := range []*corev1.Pod{pod("a", "10.244.0.1", false, nil), pod("b", "10.244.0.2", true, nil), pod("c", "10.244.0.3", true, nil)} {
			if _, err := a.pods.Create(p); err != nil {
				t.Fatal(err)
			}
		}
		a.run(t, Options{})
		synctest.Wait()
		steps := []struct {
			name   string
			change func() error
			want   []string
			writes int
		}{
			{"a turns ready", func() error { _, err := a.pods.Update(pod("a", "10.244.0.1", true, nil)); return err },
				[]string{"a:true/true/false@8080", "b:true/true/false@8080", "c:true/true/false@8080"}, 1},
			{"an annotation changes nothing", func() error {
				_, err := a.pods.Update(pod("a", "10.244.0.1", true, func(p *corev1.Pod) { p.Annotations = map[string]string{"x": "y"} }))
				return err
			}, []string{"a:true/true/false@8080", "b:true/true/false@8080", "c:true/true/false@8080"}, 0},
			{"b leaves the selector", func() error {
				_, err := a.pods.Update(pod("b", "10.244.0.2", true, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "other"} }))
				return err
			}, []string{"a:true/true/false@8080", "c:true/true/false@8080"}, 1},
			{"c is deleted", func() error { _, err := a.pods.Delete("ns", "c"); return err },
				[]string{"a:true/true/false@8080"}, 1},
		}
		for _, st := range steps {
			before := a.writes.Len()
			if err := st.change(); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			got := a.endpoints("web")
			if len(got) != 1 || !slices.Equal(got[0], st.want) {
				t.Errorf("%s: slices %v, want [%v]", st.name, got, st.want)
			}
			writes := a.writes.Len() - before
			if writes != st.writes {
				t.Errorf("%s: %d writes, want %d", st.name, writes, st.writes)
			}
		}
	})
}

// TestBatchPeriod: with UpdatesBatchPeriod, the pod changes of one
// period make one write, at the period's end.
func TestBatchPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAPI()
		if _, err := a.services.Create(service("web", nil)); err != nil {
			t.Fatal(err)
		}
		a.run(t, Options{UpdatesBatchPeriod: 10 * time.Second})
		synctest.Wait()
		start := time.Now()
		for _, p := range []*corev1.Pod{pod("a", "10.244.0.1", true, nil), pod("b", "10.244.0.2", true, nil)} {
			if _, err := a.pods.Create(p); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
		}
		synctest.Wait()
		if got := a.endpoints("web"); len(got) != 1 || len(got[0]) != 0 {
			t.Fatalf("after %v: slices %v, want the empty one of the Service's first sync", time.Since(start), got)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := a.endpoints("web"); len(got) != 1 || len(got[0]) != 2 {
			t.Errorf("after the period: slices %v, want both pods", got)
		}
		if got, want := a.writes.Verbs(), []string{"create", "update"}; !slices.Equal(got, want) {
			t.Errorf("writes %v, want %v", got, want)
		}
	})
}

// TestSliceRestored: a managed slice someone else changes or deletes is
// put back, a second after the change (kube's least delay, which gathers
// changes to several slices into one sync).
func TestSliceRestored(t *testing.T) {
	tests := []struct {
		name   string
		change func(a *api, s *discoveryv1.EndpointSlice) error
	}{
		{"edited", func(a *api, s *discoveryv1.EndpointSlice) error {
			s = s.DeepCopy()
			s.Endpoints = nil
			s.Generation++
			_, err := a.slices.Update(s)
			return err
		}},
		{"deleted", func(a *api, s *discoveryv1.EndpointSlice) error {
			_, err := a.slices.Delete(s.Namespace, s.Name)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newAPI()
				if _, err := a.services.Create(service("web", nil)); err != nil {
					t.Fatal(err)
				}
				if _, err := a.pods.Create(pod("a", "10.244.0.1", true, nil)); err != nil {
					t.Fatal(err)
				}
				a.run(t, Options{Controller: controller.Options{}})
				synctest.Wait()
				if err := tt.change(a, a.slices.Items()[0]); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				time.Sleep(sliceChangeMinDelay - time.Millisecond)
				synctest.Wait()
				if got := a.endpoints("web"); len(got) == 1 && len(got[0]) == 1 {
					t.Fatalf("restored before %v", sliceChangeMinDelay)
				}
				time.Sleep(time.Millisecond)
				synctest.Wait()
				if got := a.endpoints("web"); len(got) != 1 || len(got[0]) != 1 {
					t.Errorf("slices %v after %v, want the pod's back", got, sliceChangeMinDelay)
				}
			})
		})
	}
}
