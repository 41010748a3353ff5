// Package endpoints keeps an Endpoints object for every Service with a
// selector, listing the addresses of the pods it selects: ready pods under
// addresses, the others under notReadyAddresses. It shares the pod informer
// with the ReplicationManager, which is the point the seeds make about
// shared informers: one watch and one cache of pods serve both.
package endpoints

//lint:file-ignore SA1019 core/v1 Endpoints are what this controller maintains; EndpointSlices are not served yet.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
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

// Controller reconciles Endpoints with Services and pods.
type Controller struct {
	*controller.Controller[string]
	services  cache.Informer[*corev1.Service]
	pods      cache.Informer[*corev1.Pod]
	endpoints cache.Informer[*corev1.Endpoints]
	client    Client
}

// New returns the controller of the Endpoints of services, over the
// informers of services, pods and endpoints: every Service change, every
// pod change that can change an Endpoints object (to the Services that
// select the pod), and every change someone else makes to an Endpoints
// object (to be undone) syncs a Service.
func New(services cache.Informer[*corev1.Service], pods cache.Informer[*corev1.Pod],
	endpoints cache.Informer[*corev1.Endpoints], client Client, opts controller.Options) (*Controller, error) {
	if services == nil || pods == nil || endpoints == nil || client == nil {
		return nil, errors.New("endpoints: New needs three informers and a client")
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	c := &Controller{services: services, pods: pods, endpoints: endpoints, client: client}
	var err error
	c.Controller, err = controller.New("endpoints", c.sync, opts,
		controller.For(services),
		controller.Handle[string](pods, cache.ResourceEventHandlerFuncs[*corev1.Pod]{
			AddFunc: func(p *corev1.Pod, _ bool) { c.enqueueSelecting(p) },
			UpdateFunc: func(old, p *corev1.Pod) {
				if podChanged(old, p) {
					c.enqueueSelecting(p)
					if !labels.Equals(old.Labels, p.Labels) {
						c.enqueueSelecting(old)
					}
				}
			},
			DeleteFunc: func(p *corev1.Pod, _ bool) { c.enqueueSelecting(p) },
		}),
		// An Endpoints object has its Service's key: someone else changing
		// one we own is undone.
		controller.For(endpoints),
	)
	if err != nil {
		return nil, fmt.Errorf("endpoints: %w", err)
	}
	return c, nil
}

// podChanged reports whether a pod update can change any Endpoints.
func podChanged(old, cur *corev1.Pod) bool {
	return old.Status.PodIP != cur.Status.PodIP || old.Spec.NodeName != cur.Spec.NodeName ||
		controller.IsPodReady(old) != controller.IsPodReady(cur) || !labels.Equals(old.Labels, cur.Labels) ||
		(old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil)
}

// enqueueSelecting queues every Service in the pod's namespace that selects
// it.
func (c *Controller) enqueueSelecting(p *corev1.Pod) {
	svcs, err := c.services.GetIndexer().ByIndex(cache.NamespaceIndex, p.Namespace)
	if err != nil {
		return
	}
	for _, s := range svcs {
		if s.Spec.Selector != nil && labels.SelectorFromValidatedSet(s.Spec.Selector).Matches(labels.Set(p.Labels)) {
			c.Queue().Add(s.Namespace + "/" + s.Name)
		}
	}
}

// sync makes the Endpoints of the Service key names list the pods it
// selects, deletes them when the Service is gone, and leaves alone those of
// a Service without a selector.
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
		if !haveEP {
			return nil
		}
		if err := c.client.Delete(ctx, ns, name); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting endpoints %s: %w", key, err)
		}
		return nil
	}
	if svc.Spec.Selector == nil {
		// Endpoints of a Service without a selector are managed by hand.
		return nil
	}
	pods, err := c.pods.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
	if err != nil {
		return err
	}
	subsets := Subsets(svc, pods)
	if haveEP && apiequality.Semantic.DeepEqual(cur.Subsets, subsets) && labels.Equals(cur.Labels, svc.Labels) {
		return nil
	}
	if !haveEP {
		ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: svc.Labels}, Subsets: subsets}
		if _, err := c.client.Create(ctx, ep); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating endpoints %s: %w", key, err)
		}
		return nil
	}
	next := cur.DeepCopy()
	next.Labels, next.Subsets = svc.Labels, subsets
	if _, err := c.client.Update(ctx, next); err != nil {
		return fmt.Errorf("updating endpoints %s: %w", key, err)
	}
	return nil
}

// Subsets computes the Endpoints subsets of svc over the pods of its
// namespace: one subset per distinct set of resolved ports, addresses sorted
// by IP so the result is stable.
func Subsets(svc *corev1.Service, pods []*corev1.Pod) []corev1.EndpointSubset {
	sel := labels.SelectorFromValidatedSet(svc.Spec.Selector)
	bySet := map[string]*corev1.EndpointSubset{}
	for _, p := range pods {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		ports, ok := resolvePorts(svc, p)
		if !ok {
			continue
		}
		k := portsKey(ports)
		ss := bySet[k]
		if ss == nil {
			ss = &corev1.EndpointSubset{Ports: ports}
			bySet[k] = ss
		}
		nodeName := p.Spec.NodeName
		addr := corev1.EndpointAddress{
			IP:        p.Status.PodIP,
			NodeName:  &nodeName,
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		}
		if controller.IsPodReady(p) || svc.Spec.PublishNotReadyAddresses {
			ss.Addresses = append(ss.Addresses, addr)
		} else {
			ss.NotReadyAddresses = append(ss.NotReadyAddresses, addr)
		}
	}
	keys := make([]string, 0, len(bySet))
	for k := range bySet {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []corev1.EndpointSubset
	for _, k := range keys {
		ss := bySet[k]
		byIP := func(a, b corev1.EndpointAddress) int { return cmp.Compare(a.IP, b.IP) }
		slices.SortFunc(ss.Addresses, byIP)
		slices.SortFunc(ss.NotReadyAddresses, byIP)
		out = append(out, *ss)
	}
	return out
}

// resolvePorts maps the Service's ports to the pod's: a numeric targetPort
// is used as is, a named one must name a container port of the pod. A pod
// that lacks a named port is left out of that port's subset, as kube does,
// by failing resolution for the pod when no port resolves.
func resolvePorts(svc *corev1.Service, p *corev1.Pod) ([]corev1.EndpointPort, bool) {
	var out []corev1.EndpointPort
	for _, sp := range svc.Spec.Ports {
		port, ok := targetPort(sp, p)
		if !ok {
			continue
		}
		out = append(out, corev1.EndpointPort{Name: sp.Name, Port: port, Protocol: cmp.Or(sp.Protocol, corev1.ProtocolTCP)})
	}
	return out, len(out) > 0 || len(svc.Spec.Ports) == 0
}

func targetPort(sp corev1.ServicePort, p *corev1.Pod) (int32, bool) {
	tp := sp.TargetPort
	switch {
	case tp.Type == intstr.Int && tp.IntVal != 0:
		return tp.IntVal, true
	case tp.Type == intstr.String && tp.StrVal != "":
		for _, c := range p.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == tp.StrVal && cmp.Or(cp.Protocol, corev1.ProtocolTCP) == cmp.Or(sp.Protocol, corev1.ProtocolTCP) {
					return cp.ContainerPort, true
				}
			}
		}
		return 0, false
	default:
		return sp.Port, true // an unset targetPort defaults to port
	}
}

func portsKey(ports []corev1.EndpointPort) string {
	var b strings.Builder
	for _, p := range ports {
		b.WriteString(p.Name + "/" + strconv.Itoa(int(p.Port)) + "/" + string(p.Protocol) + ";")
	}
	return b.String()
}
