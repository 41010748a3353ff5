package informers

import (
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The resources of the typed accessors.
var (
	NamespacesResource             = corev1.SchemeGroupVersion.WithResource("namespaces")
	PodsResource                   = corev1.SchemeGroupVersion.WithResource("pods")
	ReplicationControllersResource = corev1.SchemeGroupVersion.WithResource("replicationcontrollers")
	ServicesResource               = corev1.SchemeGroupVersion.WithResource("services")
	EndpointsResource              = corev1.SchemeGroupVersion.WithResource("endpoints")
	EventsResource                 = corev1.SchemeGroupVersion.WithResource("events")
	LeasesResource                 = coordinationv1.SchemeGroupVersion.WithResource("leases")
	DeploymentsResource            = appsv1.SchemeGroupVersion.WithResource("deployments")
)

// Namespaces returns a hold on the shared informer of core/v1 namespaces.
func (f *SharedInformerFactory) Namespaces() *Informer[*corev1.Namespace] {
	return InformerFor[*corev1.Namespace](f, NamespacesResource)
}

// Pods returns a hold on the shared informer of core/v1 pods.
func (f *SharedInformerFactory) Pods() *Informer[*corev1.Pod] {
	return InformerFor[*corev1.Pod](f, PodsResource)
}

// ReplicationControllers returns a hold on the shared informer of core/v1
// replication controllers.
func (f *SharedInformerFactory) ReplicationControllers() *Informer[*corev1.ReplicationController] {
	return InformerFor[*corev1.ReplicationController](f, ReplicationControllersResource)
}

// Services returns a hold on the shared informer of core/v1 services.
func (f *SharedInformerFactory) Services() *Informer[*corev1.Service] {
	return InformerFor[*corev1.Service](f, ServicesResource)
}

// Endpoints returns a hold on the shared informer of core/v1 endpoints.
//
//lint:ignore SA1019 the controllers of this project still read core/v1 Endpoints.
func (f *SharedInformerFactory) Endpoints() *Informer[*corev1.Endpoints] {
	//lint:ignore SA1019 see above.
	return InformerFor[*corev1.Endpoints](f, EndpointsResource)
}

// Events returns a hold on the shared informer of core/v1 events.
func (f *SharedInformerFactory) Events() *Informer[*corev1.Event] {
	return InformerFor[*corev1.Event](f, EventsResource)
}

// Leases returns a hold on the shared informer of coordination.k8s.io/v1
// leases.
func (f *SharedInformerFactory) Leases() *Informer[*coordinationv1.Lease] {
	return InformerFor[*coordinationv1.Lease](f, LeasesResource)
}

// Deployments returns a hold on the shared informer of apps/v1 deployments.
func (f *SharedInformerFactory) Deployments() *Informer[*appsv1.Deployment] {
	return InformerFor[*appsv1.Deployment](f, DeploymentsResource)
}

// Resources lists the resources of the typed accessors.
func Resources() []schema.GroupVersionResource {
	return []schema.GroupVersionResource{NamespacesResource, PodsResource, ReplicationControllersResource,
		ServicesResource, EndpointsResource, EventsResource, LeasesResource, DeploymentsResource}
}
