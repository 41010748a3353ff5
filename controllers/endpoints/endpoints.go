// Package endpoints is kube-controller-manager's endpoints controller: it
// keeps an Endpoints object for every Service with a selector, listing the
// addresses of the pods it selects (ready pods under addresses, the others
// under notReadyAddresses), labelled endpoints.kubernetes.io/managed-by
// endpoint-controller and annotated with the last change's trigger time, as
// kube's does. Which pods are listed, with which address, hostname and
// ports, and how subsets are packed is decided by kube's own helpers
// (k8s.io/endpointslice and k8s.io/kubernetes/pkg/api/v1/endpoints). It
// shares the pod informer with the ReplicationManager, which is the point
// the seeds make about shared informers: one watch and one cache of pods
// serve both.
package endpoints

//lint:file-ignore SA1019 core/v1 Endpoints are what this controller maintains, as kube's still does.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	endpointslicerec "k8s.io/endpointslice"
	endpointsliceutil "k8s.io/endpointslice/util"
	endpointsv1 "k8s.io/kubernetes/pkg/api/v1/endpoints"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	corehelper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	utilnet "k8s.io/utils/net"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/controllers/internal/podservices"
	"github.com/listwatch/listwatch/internal/objclient"
)

// Client writes Endpoints.
type Client interface {
	Create(ctx context.Context, ep *corev1.Endpoints) (*corev1.Endpoints, error)
	Update(ctx context.Context, ep *corev1.Endpoints) (*corev1.Endpoints, error)
	Delete(ctx context.Context, namespace, name string) error
}

// NewClient returns the Client that writes Endpoints through c.
func NewClient(c *client.Client) Client {
	return objclient.For[*corev1.Endpoints](c)
}

// DefaultWorkers is the number of workers when Options.Workers is not
// positive.
const DefaultWorkers = 2

// Kube's marks on the Endpoints it manages.
const (
	// LabelManagedBy names the controller managing an Endpoints object.
	LabelManagedBy = "endpoints.kubernetes.io/managed-by"
	// ControllerName is LabelManagedBy's value, kube's.
	ControllerName = "endpoint-controller"
	// MaxCapacity is the most addresses an Endpoints object lists; beyond
	// it the addresses are truncated and the object annotated
	// endpoints.kubernetes.io/over-capacity: truncated.
	MaxCapacity = 1000
	truncated   = "truncated"
)

// Controller reconciles Endpoints with Services and pods.
type Controller struct {
	*controller.Controller[string]
	services  cache.Informer[*corev1.Service]
	pods      cache.Informer[*corev1.Pod]
	endpoints cache.Informer[*corev1.Endpoints]
	client    Client
	recorder  controller.EventRecorder
	triggers  *endpointsliceutil.TriggerTimeTracker
}

// New returns the controller of the Endpoints of services, over the
// informers of services, pods and endpoints: every Service change, every
// pod change that can change an Endpoints object (to the Services that
// select the pod, before or after it changed), and the deletion of an
// Endpoints object (to be made again) syncs a Service. As in kube, an
// Endpoints object someone else edits is put right at the Service's next
// sync, not at once.
func New(services cache.Informer[*corev1.Service], pods cache.Informer[*corev1.Pod],
	endpoints cache.Informer[*corev1.Endpoints], client Client, opts controller.Options) (*Controller, error) {
	if services == nil || pods == nil || endpoints == nil || client == nil {
		return nil, errors.New("endpoints: New needs three informers and a client")
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	c := &Controller{services: services, pods: pods, endpoints: endpoints, client: client,
		recorder: controller.RecorderOr(nil, opts), triggers: endpointsliceutil.NewTriggerTimeTracker()}
	serviceLister := cache.NewLister(services.GetIndexer(), corev1.Resource("services"))
	var err error
	c.Controller, err = controller.New("endpoints", c.sync, opts,
		controller.For(services),
		controller.Handle[string](pods, podservices.Handler(serviceLister, func(key string) { c.Queue().Add(key) })),
		controller.Handle[string](endpoints, cache.ResourceEventHandlerFuncs[*corev1.Endpoints]{
			DeleteFunc: func(ep *corev1.Endpoints, _ bool) { c.Queue().Add(ep.Namespace + "/" + ep.Name) },
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("endpoints: %w", err)
	}
	return c, nil
}

// sync makes the Endpoints of the Service key names list the pods it
// selects, deletes them when the Service is gone, and leaves alone those of
// an ExternalName Service or of one without a selector.
func (c *Controller) sync(ctx context.Context, key string) (controller.Result, error) {
	return controller.Result{}, c.syncEndpoints(ctx, key)
}

func (c *Controller) syncEndpoints(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return controller.Terminal(err)
	}
	svc, ok, err := c.services.GetIndexer().GetByKey(key)
	if err != nil {
		return err
	}
	cur, haveEP, err := c.endpoints.GetIndexer().GetByKey(key)
	if err != nil {
		return err
	}
	if !ok {
		// The Service is gone; so must its Endpoints be.
		c.triggers.DeleteService(ns, name)
		if !haveEP {
			return nil
		}
		if err := c.client.Delete(ctx, ns, name); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting endpoints %s: %w", key, err)
		}
		return nil
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.Selector == nil {
		// No endpoints for an ExternalName Service; those of a Service
		// without a selector are written by someone else.
		return nil
	}
	pods, err := cache.NewLister(c.pods.GetIndexer(), corev1.Resource("pods")).Namespace(ns).List(labels.Set(svc.Spec.Selector).AsSelectorPreValidated())
	if err != nil {
		return err
	}
	// Computed on every sync, as kube does, so that the tracker moves on
	// even when nothing is written.
	trigger := c.triggers.ComputeEndpointLastChangeTriggerTime(ns, svc, pods)
	subsets := Subsets(svc, pods)
	if haveEP && (apiequality.Semantic.DeepEqual(cur.Subsets, subsets) || apiequality.Semantic.DeepEqual(endpointsv1.RepackSubsets(cur.Subsets), subsets)) &&
		labelsCorrect(cur.Labels, svc.Labels) && capacityAnnotationCorrect(cur.Annotations, cur.Subsets) {
		return nil
	}
	next := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if haveEP {
		next = cur.DeepCopy()
	}
	next.Subsets = subsets
	next.Labels = make(map[string]string, len(svc.Labels)+2)
	for k, v := range svc.Labels {
		next.Labels[k] = v
	}
	if !corehelper.IsServiceIPSet(svc) {
		next.Labels[corev1.IsHeadlessService] = ""
	}
	next.Labels[LabelManagedBy] = ControllerName
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	if trigger.IsZero() {
		delete(next.Annotations, corev1.EndpointsLastChangeTriggerTime)
	} else {
		next.Annotations[corev1.EndpointsLastChangeTriggerTime] = trigger.UTC().Format(time.RFC3339Nano)
	}
	if truncate(next) {
		next.Annotations[corev1.EndpointsOverCapacity] = truncated
	} else {
		delete(next.Annotations, corev1.EndpointsOverCapacity)
	}
	if !haveEP {
		_, err = c.client.Create(ctx, next)
		if apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil // creates will keep failing: the namespace goes
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			c.recorder.Eventf(next, corev1.EventTypeWarning, "FailedToCreateEndpoint", "Failed to create endpoint for service %v/%v: %v", ns, name, err)
			return fmt.Errorf("creating endpoints %s: %w", key, err)
		}
		return nil
	}
	if _, err := c.client.Update(ctx, next); err != nil {
		c.recorder.Eventf(next, corev1.EventTypeWarning, "FailedToUpdateEndpoint", "Failed to update endpoint %v/%v: %v", ns, name, err)
		return fmt.Errorf("updating endpoints %s: %w", key, err)
	}
	return nil
}

// labelsCorrect reports whether an Endpoints object's labels are its
// Service's plus the managed-by label (and the headless one, if any).
func labelsCorrect(ep, svc map[string]string) bool {
	if ep[LabelManagedBy] != ControllerName {
		return false
	}
	extra := 0
	for k, v := range ep {
		if k == corev1.IsHeadlessService || k == LabelManagedBy {
			extra++
		} else if sv, ok := svc[k]; !ok || sv != v {
			return false
		}
	}
	return len(svc) == len(ep)-extra
}

// capacityAnnotationCorrect reports whether the over-capacity annotation
// is absent and the subsets within MaxCapacity.
func capacityAnnotationCorrect(annotations map[string]string, subsets []corev1.EndpointSubset) bool {
	if countAddresses(subsets) > MaxCapacity {
		return false
	}
	_, ok := annotations[corev1.EndpointsOverCapacity]
	return !ok
}

func countAddresses(subsets []corev1.EndpointSubset) (n int) {
	for _, ss := range subsets {
		n += len(ss.Addresses) + len(ss.NotReadyAddresses)
	}
	return n
}

// truncate cuts ep's addresses down to MaxCapacity, reporting whether it
// had to: ready addresses are kept before not-ready ones, and each subset
// keeps a share of the room in proportion to what it held (rounded up,
// the last subsets taking what is left), as kube does.
func truncate(ep *corev1.Endpoints) bool {
	ready, notReady := 0, 0
	for _, ss := range ep.Subsets {
		ready += len(ss.Addresses)
		notReady += len(ss.NotReadyAddresses)
	}
	if ready+notReady <= MaxCapacity {
		return false
	}
	cutReady := ready > MaxCapacity
	room, total := MaxCapacity-ready, notReady
	if cutReady {
		room, total = MaxCapacity, ready
	}
	left := room
	for i := range ep.Subsets {
		ss := &ep.Subsets[i]
		held := len(ss.NotReadyAddresses)
		if cutReady {
			held = len(ss.Addresses)
		}
		share := min(int(math.Ceil(float64(held)/float64(total)*float64(room))), left)
		if cutReady {
			ss.Addresses = ss.Addresses[:min(len(ss.Addresses), share)]
			ss.NotReadyAddresses = []corev1.EndpointAddress{}
			left -= len(ss.Addresses)
		} else {
			ss.NotReadyAddresses = ss.NotReadyAddresses[:min(len(ss.NotReadyAddresses), share)]
			left -= len(ss.NotReadyAddresses)
		}
	}
	return true
}

// Subsets computes the Endpoints subsets of svc over the pods it selects:
// the pods kube lists (endpointsliceutil.ShouldPodBeInEndpoints), at their
// address of the Service's IP family, with the hostname kube sets, ready
// (or every one, with publishNotReadyAddresses) under addresses and the
// others under notReadyAddresses, one entry per port the pod resolves,
// packed by kube's RepackSubsets.
func Subsets(svc *corev1.Service, pods []*corev1.Pod) []corev1.EndpointSubset {
	sel := labels.Set(svc.Spec.Selector).AsSelectorPreValidated()
	subsets := []corev1.EndpointSubset{}
	publishNotReady := svc.Spec.PublishNotReadyAddresses
	for _, p := range pods {
		if !sel.Matches(labels.Set(p.Labels)) || !endpointsliceutil.ShouldPodBeInEndpoints(p, publishNotReady) {
			continue
		}
		addr, ok := address(svc, p)
		if !ok {
			continue
		}
		add := func(ports []corev1.EndpointPort) {
			ss := corev1.EndpointSubset{Ports: ports}
			if publishNotReady || podutil.IsPodReady(p) {
				ss.Addresses = []corev1.EndpointAddress{addr}
			} else {
				ss.NotReadyAddresses = []corev1.EndpointAddress{addr}
			}
			subsets = append(subsets, ss)
		}
		if len(svc.Spec.Ports) == 0 {
			// A headless Service may have no ports.
			if svc.Spec.ClusterIP == corev1.ClusterIPNone {
				add([]corev1.EndpointPort{})
			}
			continue
		}
		for i := range svc.Spec.Ports {
			sp := &svc.Spec.Ports[i]
			port, err := endpointslicerec.FindPort(p, sp)
			if err != nil {
				continue
			}
			add([]corev1.EndpointPort{{Name: sp.Name, Port: int32(port), Protocol: sp.Protocol, AppProtocol: sp.AppProtocol}})
		}
	}
	return endpointsv1.RepackSubsets(subsets)
}

// address is the pod's address for svc: its IP of the Service's first IP
// family (inferred from the cluster IP or the pod's IP when the Service
// states none), or false when it has none.
func address(svc *corev1.Service, p *corev1.Pod) (corev1.EndpointAddress, bool) {
	ipv6 := false
	switch {
	case len(svc.Spec.IPFamilies) > 0:
		ipv6 = svc.Spec.IPFamilies[0] == corev1.IPv6Protocol
	case svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone:
		ipv6 = utilnet.IsIPv6String(svc.Spec.ClusterIP)
	default:
		ipv6 = utilnet.IsIPv6String(p.Status.PodIP)
	}
	for _, ip := range p.Status.PodIPs {
		parsed := utilnet.ParseIPSloppy(ip.IP)
		if parsed != nil && utilnet.IsIPv6(parsed) == ipv6 {
			nodeName := p.Spec.NodeName
			addr := corev1.EndpointAddress{
				IP:        parsed.String(),
				NodeName:  &nodeName,
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
			}
			if endpointsliceutil.ShouldSetHostname(p, svc) {
				addr.Hostname = p.Spec.Hostname
			}
			return addr, true
		}
	}
	return corev1.EndpointAddress{}, false
}
