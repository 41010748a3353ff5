package kubeadapt

//lint:file-ignore SA1019 core/v1 Endpoints are what kube's endpoints and mirroring controllers read.

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"

	"github.com/listwatch/listwatch/cache"
)

// The listers below are client-go's typed listers over a cache.Lister:
// the same reads of the same cache, under the method names kube's code
// calls. A cache.Lister[*corev1.Node] is a corelisters.NodeLister as it
// is.

var (
	_ corelisters.NodeLister                        = cache.Lister[*corev1.Node]{}
	_ corelisters.ServiceLister                     = ServiceLister{}
	_ corelisters.PodLister                         = PodLister{}
	_ corelisters.EndpointsLister                   = EndpointsLister{}
	_ discoverylisters.EndpointSliceLister          = EndpointSliceLister{}
	_ corelisters.ServiceNamespaceLister            = cache.NamespaceLister[*corev1.Service]{}
	_ discoverylisters.EndpointSliceNamespaceLister = cache.NamespaceLister[*discoveryv1.EndpointSlice]{}
)

// ServiceLister is corelisters.ServiceLister over L.
type ServiceLister struct{ L cache.Lister[*corev1.Service] }

// List lists the Services selector matches.
func (l ServiceLister) List(selector labels.Selector) ([]*corev1.Service, error) {
	return l.L.List(selector)
}

// Services lists and gets the Services of namespace.
func (l ServiceLister) Services(namespace string) corelisters.ServiceNamespaceLister {
	return l.L.Namespace(namespace)
}

// PodLister is corelisters.PodLister over L.
type PodLister struct{ L cache.Lister[*corev1.Pod] }

// List lists the pods selector matches.
func (l PodLister) List(selector labels.Selector) ([]*corev1.Pod, error) { return l.L.List(selector) }

// Pods lists and gets the pods of namespace.
func (l PodLister) Pods(namespace string) corelisters.PodNamespaceLister {
	return l.L.Namespace(namespace)
}

// EndpointsLister is corelisters.EndpointsLister over L.
type EndpointsLister struct {
	L cache.Lister[*corev1.Endpoints]
}

// List lists the Endpoints selector matches.
func (l EndpointsLister) List(selector labels.Selector) ([]*corev1.Endpoints, error) {
	return l.L.List(selector)
}

// Endpoints lists and gets the Endpoints of namespace.
func (l EndpointsLister) Endpoints(namespace string) corelisters.EndpointsNamespaceLister {
	return l.L.Namespace(namespace)
}

// EndpointSliceLister is discoverylisters.EndpointSliceLister over L.
type EndpointSliceLister struct {
	L cache.Lister[*discoveryv1.EndpointSlice]
}

// List lists the EndpointSlices selector matches.
func (l EndpointSliceLister) List(selector labels.Selector) ([]*discoveryv1.EndpointSlice, error) {
	return l.L.List(selector)
}

// EndpointSlices lists and gets the EndpointSlices of namespace.
func (l EndpointSliceLister) EndpointSlices(namespace string) discoverylisters.EndpointSliceNamespaceLister {
	return l.L.Namespace(namespace)
}
