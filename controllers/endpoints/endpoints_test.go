package endpoints

//lint:file-ignore SA1019 core/v1 Endpoints are what this controller maintains.

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/controller"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func pod(name, ip string, ready bool, lbl map[string]string, ports ...corev1.ContainerPort) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Labels: lbl},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Ports: ports}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: podIPs(ip),
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

func podIPs(ip string) []corev1.PodIP {
	if ip == "" {
		return nil
	}
	return []corev1.PodIP{{IP: ip}}
}

func service(name string, sel map[string]string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.ServiceSpec{Selector: sel, Ports: ports}}
}

func addr(name, ip string) corev1.EndpointAddress {
	node := "node-1"
	return corev1.EndpointAddress{IP: ip, NodeName: &node,
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
}

var web = map[string]string{"app": "web"}

func TestSubsets(t *testing.T) {
	http := corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}
	named := corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("web")}
	terminating := pod("t", "10.0.0.9", true, web)
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	failed := pod("f", "10.0.0.8", false, web)
	failed.Status.Phase = corev1.PodFailed
	tests := []struct {
		name string
		svc  *corev1.Service
		pods []*corev1.Pod
		want []corev1.EndpointSubset
	}{
		{"ready and not ready, sorted by IP", service("s", web, http),
			[]*corev1.Pod{pod("b", "10.0.0.2", true, web), pod("a", "10.0.0.1", true, web), pod("c", "10.0.0.3", false, web)},
			[]corev1.EndpointSubset{{
				Addresses:         []corev1.EndpointAddress{addr("a", "10.0.0.1"), addr("b", "10.0.0.2")},
				NotReadyAddresses: []corev1.EndpointAddress{addr("c", "10.0.0.3")},
				Ports:             []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}},
			}}},
		{"unselected, IP-less, terminating and finished pods are left out", service("s", web, http),
			[]*corev1.Pod{pod("x", "10.0.0.5", true, map[string]string{"app": "db"}), pod("noip", "", true, web), terminating, failed},
			nil},
		{"named target ports split pods by resolved port", service("s", web, named),
			[]*corev1.Pod{
				pod("a", "10.0.0.1", true, web, corev1.ContainerPort{Name: "web", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}),
				pod("b", "10.0.0.2", true, web, corev1.ContainerPort{Name: "web", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}),
				pod("c", "10.0.0.3", true, web),
			},
			// In the order of kube's RepackSubsets, by a hash of the ports.
			[]corev1.EndpointSubset{
				{Addresses: []corev1.EndpointAddress{addr("a", "10.0.0.1")}, Ports: []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}},
				{Addresses: []corev1.EndpointAddress{addr("b", "10.0.0.2")}, Ports: []corev1.EndpointPort{{Name: "http", Port: 9090, Protocol: corev1.ProtocolTCP}}},
			}},
		{"publishNotReadyAddresses lists every pod as ready", func() *corev1.Service {
			s := service("s", web, http)
			s.Spec.PublishNotReadyAddresses = true
			return s
		}(), []*corev1.Pod{pod("c", "10.0.0.3", false, web)},
			[]corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{addr("c", "10.0.0.3")},
				Ports: []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Subsets(tt.svc, tt.pods); !apiequality.Semantic.DeepEqual(got, tt.want) {
				t.Fatalf("Subsets:\n got  %+v\n want %+v", got, tt.want)
			}
		})
	}
}

// epAPI writes Endpoints into a cachetest source, standing in for the API
// server in these unit tests of the controller alone.
type epAPI struct {
	src *cachetest.Source[*corev1.Endpoints]
}

func (a epAPI) Create(_ context.Context, ep *corev1.Endpoints) (*corev1.Endpoints, error) {
	return a.src.Create(ep)
}
func (a epAPI) Update(_ context.Context, ep *corev1.Endpoints) (*corev1.Endpoints, error) {
	return a.src.Update(ep)
}
func (a epAPI) Delete(_ context.Context, ns, name string) error {
	_, err := a.src.Delete(ns, name)
	return err
}

func TestController(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svcs, pods, eps := cachetest.New[*corev1.Service](), cachetest.New[*corev1.Pod](), cachetest.New[*corev1.Endpoints]()
		opts := cache.ReflectorOptions{Logger: quiet}
		svcInf := cache.NewSharedIndexInformer[*corev1.Service](svcs, cache.SharedInformerOptions{Reflector: opts})
		podInf := cache.NewSharedIndexInformer[*corev1.Pod](pods, cache.SharedInformerOptions{Reflector: opts})
		epInf := cache.NewSharedIndexInformer[*corev1.Endpoints](eps, cache.SharedInformerOptions{Reflector: opts})
		c, err := New(svcInf, podInf, epInf, epAPI{eps}, controller.Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() { svcInf.Run(ctx) })
		wg.Go(func() { podInf.Run(ctx) })
		wg.Go(func() { epInf.Run(ctx) })
		wg.Go(func() { _ = c.Run(ctx) })
		defer func() { cancel(); wg.Wait() }()

		settle := func() { time.Sleep(time.Second); synctest.Wait() }
		ips := func() (ready, notReady []string) {
			ep, ok := eps.Get("ns", "web")
			if !ok {
				return nil, nil
			}
			for _, ss := range ep.Subsets {
				for _, a := range ss.Addresses {
					ready = append(ready, a.IP)
				}
				for _, a := range ss.NotReadyAddresses {
					notReady = append(notReady, a.IP)
				}
			}
			return ready, notReady
		}
		mustCreate := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}

		_, err = svcs.Create(service("web", web, corev1.ServicePort{Name: "http", Port: 80}))
		mustCreate(err)
		_, err = svcs.Create(service("manual", nil, corev1.ServicePort{Port: 80}))
		mustCreate(err)
		_, err = pods.Create(pod("a", "10.0.0.1", false, web))
		mustCreate(err)
		settle()
		if r, nr := ips(); len(r) != 0 || len(nr) != 1 {
			t.Fatalf("not-ready pod: ready %v notReady %v", r, nr)
		}
		if _, ok := eps.Get("ns", "manual"); ok {
			t.Fatal("endpoints made for a service without a selector")
		}

		p, _ := pods.Get("ns", "a")
		p = p.DeepCopy()
		p.Status.Conditions[0].Status = corev1.ConditionTrue
		_, err = pods.Update(p)
		mustCreate(err)
		settle()
		if r, _ := ips(); len(r) != 1 || r[0] != "10.0.0.1" {
			t.Fatalf("ready pod: ready %v", r)
		}

		// A label change takes the pod out of the service.
		p, _ = pods.Get("ns", "a")
		p = p.DeepCopy()
		p.Labels = map[string]string{"app": "other"}
		_, err = pods.Update(p)
		mustCreate(err)
		settle()
		if r, nr := ips(); len(r)+len(nr) != 0 {
			t.Fatalf("relabelled pod still listed: %v %v", r, nr)
		}

		// Endpoints changed by someone else are put right at the
		// Service's next sync, as kube does; deleted ones are made again
		// at once.
		ep, _ := eps.Get("ns", "web")
		ep = ep.DeepCopy()
		ep.Subsets = []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "1.2.3.4"}}}}
		_, err = eps.Update(ep)
		mustCreate(err)
		settle()
		if r, _ := ips(); len(r) != 1 {
			t.Fatalf("foreign change undone before the Service's next sync: %v", r)
		}
		p, _ = pods.Get("ns", "a")
		p = p.DeepCopy()
		p.Labels = web
		_, err = pods.Update(p)
		mustCreate(err)
		settle()
		if r, _ := ips(); len(r) != 1 || r[0] != "10.0.0.1" {
			t.Fatalf("after the Service's sync: ready %v, want the pod's", r)
		}
		_, err = eps.Delete("ns", "web")
		mustCreate(err)
		settle()
		if r, _ := ips(); len(r) != 1 {
			t.Fatalf("deleted endpoints not made again: %v", r)
		}
		ep, _ = eps.Get("ns", "web")
		if ep.Labels[LabelManagedBy] != ControllerName {
			t.Errorf("labels %v, want %s=%s", ep.Labels, LabelManagedBy, ControllerName)
		}

		_, err = svcs.Delete("ns", "web")
		mustCreate(err)
		settle()
		if _, ok := eps.Get("ns", "web"); ok {
			t.Fatal("endpoints of a deleted service remain")
		}
	})
}

// TestTruncate: over MaxCapacity addresses, ready ones are kept before
// not-ready ones, each subset keeping its share of the room, as kube's
// controller truncates.
func TestTruncate(t *testing.T) {
	addrs := func(n int) []corev1.EndpointAddress { return make([]corev1.EndpointAddress, n) }
	tests := []struct {
		name                  string
		ready, notReady       []int // per subset
		wantReady, wantNotRdy []int
		wantTruncated         bool
	}{
		{"within capacity", []int{600}, []int{400}, []int{600}, []int{400}, false},
		{"not-ready cut first", []int{800}, []int{400}, []int{800}, []int{200}, true},
		{"ready cut in proportion, not-ready dropped", []int{900, 300}, []int{10, 10}, []int{750, 250}, []int{0, 0}, true},
		{"not-ready shares rounded up, the last takes what is left", []int{900, 0, 0}, []int{0, 150, 150}, []int{900, 0, 0}, []int{0, 50, 50}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep := &corev1.Endpoints{}
			for i := range tt.ready {
				ep.Subsets = append(ep.Subsets, corev1.EndpointSubset{Addresses: addrs(tt.ready[i]), NotReadyAddresses: addrs(tt.notReady[i])})
			}
			if got := truncate(ep); got != tt.wantTruncated {
				t.Errorf("truncated %v, want %v", got, tt.wantTruncated)
			}
			for i, ss := range ep.Subsets {
				if len(ss.Addresses) != tt.wantReady[i] || len(ss.NotReadyAddresses) != tt.wantNotRdy[i] {
					t.Errorf("subset %d: %d ready, %d not ready; want %d, %d", i, len(ss.Addresses), len(ss.NotReadyAddresses), tt.wantReady[i], tt.wantNotRdy[i])
				}
			}
			if n := countAddresses(ep.Subsets); n > MaxCapacity {
				t.Errorf("%d addresses left, over %d", n, MaxCapacity)
			}
		})
	}
}
