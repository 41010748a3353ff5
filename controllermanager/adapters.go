package controllermanager

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllers/endpoints"
	"github.com/listwatch/listwatch/controllers/podlifecycle"
	"github.com/listwatch/listwatch/leaderelection"
	"github.com/listwatch/listwatch/record"
)

// The adapters below fit the REST client to the small interfaces each
// controller declares, so the controllers stay testable with fakes and
// know nothing of HTTP.

// podLifecycleClient is podlifecycle.PodClient over the REST client.
type podLifecycleClient struct {
	pods *client.Resource[*corev1.Pod]
	// noBinding is set once the server answered pods/binding with a 404
	// that names no pod: it lacks the subresource, and binds go through
	// an update of spec.nodeName instead.
	noBinding atomic.Bool
}

var _ podlifecycle.PodClient = (*podLifecycleClient)(nil)

func newPodLifecycleClient(c *client.Client) *podLifecycleClient {
	return &podLifecycleClient{pods: client.For[*corev1.Pod](c, "")}
}

// Bind posts a Binding to pods/{name}/binding, as a scheduler does. A
// server without the subresource gets spec.nodeName set by an update at
// the pod's current resourceVersion instead, which is refused with a
// Conflict if the pod changed or was bound meanwhile.
func (p *podLifecycleClient) Bind(ctx context.Context, namespace, name string, uid types.UID, node string) error {
	pods := p.pods.Namespace(namespace)
	if !p.noBinding.Load() {
		b := &corev1.Binding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Binding"},
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid},
			Target:     corev1.ObjectReference{Kind: "Node", Name: node},
		}
		err := pods.CreateSubresource(ctx, name, "binding", b, metav1.CreateOptions{})
		if !isMissingRoute(err) {
			return err
		}
		p.noBinding.Store(true)
	}
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if pod.UID != uid {
		return apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	if pod.Spec.NodeName != "" {
		return apierrors.NewConflict(corev1.Resource("pods"), name, fmt.Errorf("pod is already bound to %q", pod.Spec.NodeName))
	}
	pod.Spec.NodeName = node
	_, err = pods.Update(ctx, pod, metav1.UpdateOptions{})
	return err
}

// isMissingRoute tells a 404 for the path (the server lacks the
// subresource) from a 404 for the pod, which names it in its details.
func isMissingRoute(err error) bool {
	var se *client.StatusError
	if !errors.As(err, &se) || !apierrors.IsNotFound(err) {
		return false
	}
	d := se.ErrStatus.Details
	return d == nil || d.Name == ""
}

func (p *podLifecycleClient) UpdateStatus(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	return p.pods.Namespace(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
}

func (p *podLifecycleClient) Delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return p.pods.Namespace(namespace).Delete(ctx, name, opts)
}

// endpointsClient is endpoints.Client over the REST client.
type endpointsClient struct {
	//lint:ignore SA1019 the endpoints controller writes core/v1 Endpoints.
	eps *client.Resource[*corev1.Endpoints]
}

var _ endpoints.Client = endpointsClient{}

func newEndpointsClient(c *client.Client) endpointsClient {
	//lint:ignore SA1019 see endpointsClient.
	return endpointsClient{eps: client.For[*corev1.Endpoints](c, "")}
}

//lint:ignore SA1019 see endpointsClient.
func (e endpointsClient) Create(ctx context.Context, ep *corev1.Endpoints) (*corev1.Endpoints, error) {
	return e.eps.Namespace(ep.Namespace).Create(ctx, ep, metav1.CreateOptions{})
}

//lint:ignore SA1019 see endpointsClient.
func (e endpointsClient) Update(ctx context.Context, ep *corev1.Endpoints) (*corev1.Endpoints, error) {
	return e.eps.Namespace(ep.Namespace).Update(ctx, ep, metav1.UpdateOptions{})
}

func (e endpointsClient) Delete(ctx context.Context, namespace, name string) error {
	return e.eps.Namespace(namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

// leaseClient is leaderelection.LeaseClient over the REST client.
type leaseClient struct {
	leases *client.Resource[*coordinationv1.Lease]
}

var _ leaderelection.LeaseClient = leaseClient{}

func newLeaseClient(c *client.Client) leaseClient {
	return leaseClient{leases: client.For[*coordinationv1.Lease](c, "")}
}

func (l leaseClient) Get(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error) {
	return l.leases.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (l leaseClient) Create(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return l.leases.Namespace(lease.Namespace).Create(ctx, lease, metav1.CreateOptions{})
}

func (l leaseClient) Update(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return l.leases.Namespace(lease.Namespace).Update(ctx, lease, metav1.UpdateOptions{})
}

// eventSink is record.Sink over the REST client.
type eventSink struct {
	events *client.Resource[*corev1.Event]
}

var _ record.Sink = eventSink{}

func newEventSink(c *client.Client) eventSink {
	return eventSink{events: client.For[*corev1.Event](c, "")}
}

func (s eventSink) Create(ctx context.Context, ev *corev1.Event) (*corev1.Event, error) {
	return s.events.Namespace(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
}

func (s eventSink) Patch(ctx context.Context, namespace, name string, pt types.PatchType, data []byte) (*corev1.Event, error) {
	return s.events.Namespace(namespace).Patch(ctx, name, pt, data, metav1.PatchOptions{})
}
