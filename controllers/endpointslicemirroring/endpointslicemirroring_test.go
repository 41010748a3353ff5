package endpointslicemirroring

//lint:file-ignore SA1019 core/v1 Endpoints are what this controller mirrors.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
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

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/controllers/internal/slicetest"
	"github.com/listwatch/listwatch/informers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type api struct {
	services  *cachetest.Source[*corev1.Service]
	endpoints *cachetest.Source[*corev1.Endpoints]
	slices    *cachetest.Source[*discoveryv1.EndpointSlice]
}

// run starts kube's mirroring controller over a's sources, through
// listwatch's informers, until the test ends.
func (a *api) run(t *testing.T) {
	t.Helper()
	factory := informers.NewSharedInformerFactory(informers.SourceFunc(
		func(gvr schema.GroupVersionResource, _ string, _ func(*metav1.ListOptions)) cache.ListerWatcher[cache.Object] {
			switch gvr.Resource {
			case "services":
				return cache.Erase(a.services)
			case "endpoints":
				return cache.Erase(a.endpoints)
			}
			return cache.Erase(a.slices)
		}), informers.Options{Reflector: cache.ReflectorOptions{Logger: quiet}})
	cs, _ := slicetest.Clientset(a.slices)
	ctx, cancel := context.WithCancel(t.Context())
	c, err := New(ctx, Informers{
		Services:       informers.For[*corev1.Service](factory),
		Endpoints:      informers.For[*corev1.Endpoints](factory),
		EndpointSlices: informers.For[*discoveryv1.EndpointSlice](factory),
	}, cs, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
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
	// Kube's controller polls for the caches' sync, then its workers
	// start.
	time.Sleep(2 * time.Second)
	synctest.Wait()
}

// mirrored returns the endpoints of the mirrored slices of Service name,
// as "ip:ready", sorted, and the slices' labels.
func (a *api) mirrored(name string) ([]string, []map[string]string) {
	var eps []string
	var lbls []map[string]string
	for _, s := range a.slices.Items() {
		if s.Labels[discoveryv1.LabelServiceName] != name || s.Labels[discoveryv1.LabelManagedBy] != ControllerName {
			continue
		}
		lbls = append(lbls, s.Labels)
		for _, e := range s.Endpoints {
			eps = append(eps, fmt.Sprintf("%s:%v", strings.Join(e.Addresses, ","), *e.Conditions.Ready))
		}
	}
	sort.Strings(eps)
	return eps, lbls
}

func TestMirroring(t *testing.T) {
	manual := func(edit func(*corev1.Endpoints)) *corev1.Endpoints {
		ep := &corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "uid-ep", Labels: map[string]string{"source": "manual"}},
			Subsets: []corev1.EndpointSubset{{
				Addresses:         []corev1.EndpointAddress{{IP: "192.0.2.10"}},
				NotReadyAddresses: []corev1.EndpointAddress{{IP: "192.0.2.11"}},
				Ports:             []corev1.EndpointPort{{Name: "pg", Port: 5432, Protocol: corev1.ProtocolTCP}},
			}},
		}
		if edit != nil {
			edit(ep)
		}
		return ep
	}
	svc := func(selector map[string]string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: types.UID("uid-svc")},
			Spec: corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Name: "pg", Port: 5432}}}}
	}
	tests := []struct {
		name string
		svc  *corev1.Service
		ep   *corev1.Endpoints
		want []string
	}{
		{"a Service without a selector: mirrored", svc(nil), manual(nil), []string{"192.0.2.10:true", "192.0.2.11:false"}},
		{"a Service with a selector: not mirrored", svc(map[string]string{"app": "db"}), manual(nil), nil},
		{"no Service: not mirrored", nil, manual(nil), nil},
		{"skip-mirror: not mirrored", svc(nil), manual(func(ep *corev1.Endpoints) {
			ep.Labels[discoveryv1.LabelSkipMirror] = "true"
		}), nil},
		{"a leader election record: not mirrored", svc(nil), manual(func(ep *corev1.Endpoints) {
			ep.Annotations = map[string]string{"control-plane.alpha.kubernetes.io/leader": "{}"}
		}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := &api{services: cachetest.New[*corev1.Service](), endpoints: cachetest.New[*corev1.Endpoints](),
					slices: cachetest.New(cachetest.WithResource[*discoveryv1.EndpointSlice](discoveryv1.Resource("endpointslices")))}
				if tt.svc != nil {
					if _, err := a.services.Create(tt.svc); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := a.endpoints.Create(tt.ep); err != nil {
					t.Fatal(err)
				}
				a.run(t)
				got, lbls := a.mirrored("db")
				if fmt.Sprint(got) != fmt.Sprint(tt.want) {
					t.Errorf("mirrored %v, want %v", got, tt.want)
				}
				for _, l := range lbls {
					if l["source"] != "manual" {
						t.Errorf("slice labels %v, want the Endpoints' source=manual", l)
					}
				}
			})
		})
	}
}

// TestMirrorFollows: the mirror follows the Endpoints' changes, and goes
// when the Service gets a selector.
func TestMirrorFollows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &api{services: cachetest.New[*corev1.Service](), endpoints: cachetest.New[*corev1.Endpoints](),
			slices: cachetest.New(cachetest.WithResource[*discoveryv1.EndpointSlice](discoveryv1.Resource("endpointslices")))}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}}
		if _, err := a.services.Create(svc); err != nil {
			t.Fatal(err)
		}
		ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
			Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "192.0.2.10"}},
				Ports: []corev1.EndpointPort{{Port: 5432, Protocol: corev1.ProtocolTCP}}}}}
		if _, err := a.endpoints.Create(ep); err != nil {
			t.Fatal(err)
		}
		a.run(t)
		if got, _ := a.mirrored("db"); fmt.Sprint(got) != "[192.0.2.10:true]" {
			t.Fatalf("mirrored %v", got)
		}
		cur, _ := a.endpoints.Get("ns", "db")
		next := cur.DeepCopy()
		next.Subsets[0].Addresses = append(next.Subsets[0].Addresses, corev1.EndpointAddress{IP: "192.0.2.12"})
		if _, err := a.endpoints.Update(next); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got, _ := a.mirrored("db"); fmt.Sprint(got) != "[192.0.2.10:true 192.0.2.12:true]" {
			t.Fatalf("after the Endpoints changed: mirrored %v", got)
		}
		s, _ := a.services.Get("ns", "db")
		s = s.DeepCopy()
		s.Spec.Selector = map[string]string{"app": "db"}
		if _, err := a.services.Update(s); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got, _ := a.mirrored("db"); len(got) != 0 {
			t.Errorf("after the Service got a selector: mirrored %v, want none", got)
		}
	})
}
