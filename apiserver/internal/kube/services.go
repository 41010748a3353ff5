package kube

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	apistorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	netutils "k8s.io/utils/net"

	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/registry/core/service/ipallocator"
	"k8s.io/kubernetes/pkg/registry/core/service/portallocator"
	svcstorage "k8s.io/kubernetes/pkg/registry/core/service/storage"
)

// Defaults of the service ranges. kube-apiserver's own default cluster IP
// range is 10.0.0.0/24; 10.96.0.0/12 is the one kubeadm (and so most
// clusters) passes it. The node port range is kube-apiserver's default.
const (
	DefaultServiceClusterIPRange = "10.96.0.0/12"
	DefaultServiceNodePortRange  = "30000-32767"
)

// ServiceAllocator gives services their cluster IPs, IP families and node
// ports as kube-apiserver's service storage does
// (k8s.io/kubernetes/pkg/registry/core/service/storage): its BeginCreate,
// BeginUpdate and AfterDelete hooks run here, on Kubernetes' bitmap
// allocators (ipallocator.Range per IP family, portallocator.PortAllocator).
// What to allocate, what to release on a type change, ipFamilies and
// ipFamilyPolicy, and the errors of a request that cannot be served are
// Kubernetes' code; this type only carries the server's objects to and
// from it.
//
// The allocators are in memory: the caller fills them from the stored
// services with Reserve before the first allocation, as kube-apiserver's
// repair controllers reconcile its allocators with the services stored.
// All methods are safe for concurrent use.
type ServiceAllocator struct {
	rest  *svcstorage.REST
	ips   map[api.IPFamily]ipallocator.Interface
	ports *portallocator.PortAllocator
	// apiServerIP is the first IP of the primary range, the one
	// kube-apiserver gives the "kubernetes" service.
	apiServerIP net.IP
}

// NewServiceAllocator returns an allocator for the cluster IP range(s)
// clusterIPRange (one CIDR, or two of different IP families separated by a
// comma as --service-cluster-ip-range takes them; the first is the primary
// family) and the node port range nodePortRange ("30000-32767", as
// --service-node-port-range). Empty strings take the defaults.
func NewServiceAllocator(clusterIPRange, nodePortRange string) (*ServiceAllocator, error) {
	cidrs, err := ParseServiceClusterIPRange(clusterIPRange)
	if err != nil {
		return nil, err
	}
	pr, err := ParseServiceNodePortRange(nodePortRange)
	if err != nil {
		return nil, err
	}
	a := &ServiceAllocator{ips: map[api.IPFamily]ipallocator.Interface{}}
	for _, cidr := range cidrs {
		r, err := ipallocator.NewInMemory(cidr)
		if err != nil {
			return nil, fmt.Errorf("service cluster IP range %s: %w", cidr, err)
		}
		a.ips[r.IPFamily()] = metaErrors{r}
	}
	if a.apiServerIP, err = netutils.GetIndexedIP(cidrs[0], 1); err != nil {
		return nil, fmt.Errorf("service cluster IP range %s: %w", cidrs[0], err)
	}
	if a.ports, err = portallocator.NewInMemory(pr); err != nil {
		return nil, fmt.Errorf("service node port range %s: %w", pr.String(), err)
	}
	primary := ipFamily(cidrs[0])
	a.rest, _, _, err = svcstorage.NewREST(noStorage{}, primary, a.ips, a.ports, nil, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("service storage: %w", err)
	}
	return a, nil
}

// ParseServiceClusterIPRange reads --service-cluster-ip-range: one CIDR, or
// two of different IP families, each with room for at least 8 addresses;
// "" is the default.
func ParseServiceClusterIPRange(s string) ([]*net.IPNet, error) {
	if strings.TrimSpace(s) == "" {
		s = DefaultServiceClusterIPRange
	}
	parts := strings.Split(s, ",")
	if len(parts) > 2 {
		return nil, errors.New("--service-cluster-ip-range must not contain more than two entries")
	}
	var cidrs []*net.IPNet
	for i, p := range parts {
		_, cidr, err := netutils.ParseCIDRSloppy(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("service-cluster-ip-range[%d] is not a valid cidr", i)
		}
		if netutils.RangeSize(cidr) < 8 {
			return nil, fmt.Errorf("service-cluster-ip-range[%d]: the service cluster IP range must be at least 8 IP addresses", i)
		}
		cidrs = append(cidrs, cidr)
	}
	if len(cidrs) == 2 {
		if dual, err := netutils.IsDualStackCIDRs(cidrs); err != nil || !dual {
			return nil, errors.New("--service-cluster-ip-range[0] and --service-cluster-ip-range[1] must be of different IP family")
		}
	}
	return cidrs, nil
}

// ParseServiceNodePortRange reads --service-node-port-range ("30000-32767",
// or "30000+2768"); "" is the default.
func ParseServiceNodePortRange(s string) (utilnet.PortRange, error) {
	if strings.TrimSpace(s) == "" {
		s = DefaultServiceNodePortRange
	}
	pr, err := utilnet.ParsePortRange(strings.TrimSpace(s))
	if err != nil {
		return utilnet.PortRange{}, fmt.Errorf("--service-node-port-range: %w", err)
	}
	return *pr, nil
}

func ipFamily(cidr *net.IPNet) api.IPFamily {
	if netutils.IsIPv6CIDR(cidr) {
		return api.IPv6Protocol
	}
	return api.IPv4Protocol
}

// APIServerServiceIP is the first IP of the primary cluster IP range: the
// cluster IP of the "kubernetes" service in kube.
func (a *ServiceAllocator) APIServerServiceIP() net.IP { return a.apiServerIP }

// Finish ends what a Begin method started: true once the service is
// stored (what the write gave up is released), false when it is not (what
// it took is given back). Only the first call counts; a nil Finish does
// nothing.
type Finish func(stored bool)

// Done calls f, if there is one.
func (f Finish) Done(stored bool) {
	if f != nil {
		f(stored)
	}
}

// once makes fn's first call the only one.
func once(fn genericregistry.FinishFunc) Finish {
	done := false
	return func(stored bool) {
		if !done {
			done = true
			fn(context.Background(), stored)
		}
	}
}

// BeginCreate runs kube-apiserver's BeginCreate of services on obj, the
// service being created as its Go type with its final metadata: ClusterIP/
// ClusterIPs normalised, ipFamilies and ipFamilyPolicy set, cluster IPs and
// node ports (and the health check node port) allocated or the ones asked
// for reserved, or kube's 422 when one is taken, out of range or
// inconsistent. obj's spec is changed in place. An object that is not a
// *corev1.Service is left to Rules.Create to refuse.
func (a *ServiceAllocator) BeginCreate(ctx context.Context, obj runtime.Object, dryRun bool) (Finish, error) {
	ev, ok := obj.(*corev1.Service)
	if !ok {
		return nil, nil
	}
	svc, err := serviceInternal(ev.DeepCopy())
	if err != nil {
		return nil, nil
	}
	fn, err := a.rest.BeginCreate(ctx, svc, &metav1.CreateOptions{DryRun: dryRunOpt(dryRun)})
	if err != nil {
		return nil, err
	}
	finish := once(fn)
	spec, err := serviceSpec(svc)
	if err != nil {
		finish(false)
		return nil, err
	}
	ev.Spec = spec.Spec
	return finish, nil
}

// BeginUpdate runs kube-apiserver's BeginUpdate of services on obj, an
// update of the stored old (both *corev1.Service; anything else allocates
// nothing): the values allocated before that obj leaves out are kept, and
// a change of type or IP families allocates and releases what it needs
// to, in obj's spec. The releases happen when Finish(true) is called.
func (a *ServiceAllocator) BeginUpdate(ctx context.Context, obj, old runtime.Object, dryRun bool) (Finish, error) {
	ev, ok := obj.(*corev1.Service)
	if !ok {
		return nil, nil
	}
	oldEv, ok := old.(*corev1.Service)
	if !ok {
		return nil, nil
	}
	svc, err := serviceInternal(ev.DeepCopy())
	if err != nil {
		return nil, nil
	}
	oldSvc, err := serviceInternal(oldEv.DeepCopy())
	if err != nil {
		return nil, nil
	}
	fn, err := a.rest.BeginUpdate(ctx, svc, oldSvc, &metav1.UpdateOptions{DryRun: dryRunOpt(dryRun)})
	if err != nil {
		return nil, err
	}
	finish := once(fn)
	spec, err := serviceSpec(svc)
	if err != nil {
		finish(false)
		return nil, err
	}
	ev.Spec = spec.Spec
	return finish, nil
}

// Release gives back what the deleted service u held, as kube-apiserver's
// service storage does after a delete (its AfterDelete hook).
func (a *ServiceAllocator) Release(u *unstructured.Unstructured) {
	svc, err := unstructuredService(u)
	if err != nil {
		return
	}
	a.rest.AfterDelete(svc, &metav1.DeleteOptions{})
}

// Decorate applies to obj, a service as the strategy left it (a
// *corev1.Service, or its unstructured form), what kube-apiserver's service
// storage does to every service it returns (its Decorator, defaultOnRead):
// an ExternalName service shows no internalTrafficPolicy, and a service
// stored before ipFamilies existed gets them. The server stores the
// result, which its reads then return as kube's would.
func (a *ServiceAllocator) Decorate(obj runtime.Object) {
	switch o := obj.(type) {
	case *corev1.Service:
		if out := a.decorate(o); out != nil {
			o.Spec = out.Spec
		}
	case *unstructured.Unstructured:
		var ev corev1.Service
		if runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ev) != nil {
			return
		}
		if out := a.decorate(&ev); out != nil {
			_ = setSpec(o, out)
		}
	}
}

// decorate is ev decorated, or nil when it cannot be converted.
func (a *ServiceAllocator) decorate(ev *corev1.Service) *corev1.Service {
	var svc api.Service
	if legacyscheme.Scheme.Convert(ev, &svc, nil) != nil {
		return nil
	}
	a.rest.Decorator(&svc)
	out, err := serviceSpec(&svc)
	if err != nil {
		return nil
	}
	return out
}

// Reserve marks the cluster IPs and node ports of the stored service u as
// in use, as kube-apiserver's repair controllers do for every service they
// list. It returns what could not be reserved (an IP or port outside the
// ranges, or held by another service); the rest is reserved regardless.
func (a *ServiceAllocator) Reserve(u *unstructured.Unstructured) []error {
	var svc corev1.Service
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &svc); err != nil {
		return []error{err}
	}
	var errs []error
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, s := range ips {
		if s == "" || s == corev1.ClusterIPNone {
			continue
		}
		ip := netutils.ParseIPSloppy(s)
		if ip == nil {
			errs = append(errs, fmt.Errorf("cluster IP %q is not an IP", s))
			continue
		}
		fam := api.IPv4Protocol
		if netutils.IsIPv6(ip) {
			fam = api.IPv6Protocol
		}
		alloc, ok := a.ips[fam]
		if !ok {
			errs = append(errs, fmt.Errorf("cluster IP %s: %s is not configured on this cluster", s, fam))
			continue
		}
		if err := alloc.Allocate(ip); err != nil {
			errs = append(errs, fmt.Errorf("cluster IP %s: %w", s, err))
		}
	}
	seen := map[int]bool{}
	reservePort := func(port int) {
		if port == 0 || seen[port] {
			return
		}
		seen[port] = true
		if err := a.ports.Allocate(port); err != nil {
			errs = append(errs, fmt.Errorf("node port %d: %w", port, err))
		}
	}
	for _, p := range svc.Spec.Ports {
		reservePort(int(p.NodePort))
	}
	reservePort(int(svc.Spec.HealthCheckNodePort))
	return errs
}

func dryRunOpt(dryRun bool) []string {
	if dryRun {
		return []string{metav1.DryRunAll}
	}
	return nil
}

// unstructuredService is u as kube's internal Service, defaulted as
// kube-apiserver's decoding defaults it.
func unstructuredService(u *unstructured.Unstructured) (*api.Service, error) {
	var ev corev1.Service
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ev); err != nil {
		return nil, err
	}
	return serviceInternal(&ev)
}

func serviceInternal(ev *corev1.Service) (*api.Service, error) {
	legacyscheme.Scheme.Default(ev)
	var svc api.Service
	if err := legacyscheme.Scheme.Convert(ev, &svc, nil); err != nil {
		return nil, err
	}
	return &svc, nil
}

// serviceSpec is svc as a corev1.Service (its spec is what the hooks
// change).
func serviceSpec(svc *api.Service) (*corev1.Service, error) {
	var ev corev1.Service
	if err := legacyscheme.Scheme.Convert(svc, &ev, nil); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("convert Service from internal: %w", err))
	}
	return &ev, nil
}

// setSpec sets u's spec to ev's.
func setSpec(u *unstructured.Unstructured, ev *corev1.Service) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ev)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("encode Service: %w", err))
	}
	if spec, ok := obj["spec"]; ok {
		u.Object["spec"] = spec
	} else {
		delete(u.Object, "spec")
	}
	return nil
}

// metaErrors is a bitmap range answering a request for an IP outside it as
// kube-apiserver v1.37's allocator does: that allocator (MultiCIDRService-
// Allocator, locked on) looks for the ServiceCIDR holding the IP first and
// fails with ErrMismatchedNetwork when none does, where the bitmap alone
// would say ErrNotInRange. An IP inside the CIDR but not allocatable (its
// network or broadcast address) is ErrNotInRange in both.
type metaErrors struct{ *ipallocator.Range }

func (m metaErrors) Allocate(ip net.IP) error {
	cidr := m.CIDR()
	if !cidr.Contains(ip) {
		return ipallocator.ErrMismatchedNetwork
	}
	return m.Range.Allocate(ip)
}

// noStorage is the generic.RESTOptionsGetter of a service storage whose
// hooks are all that is used: the server keeps the objects, not the
// generic registry store NewREST builds around them.
type noStorage struct{}

func (noStorage) GetRESTOptions(resource schema.GroupResource, _ runtime.Object) (generic.RESTOptions, error) {
	var decorator generic.StorageDecorator = noDecorator
	return generic.RESTOptions{
		StorageConfig:  &storagebackend.ConfigForResource{GroupResource: resource},
		ResourcePrefix: resource.Resource,
		Decorator:      decorator,
	}, nil
}

// noDecorator is a generic.StorageDecorator that makes no storage (its
// type parameters stand for the decorator's parameter types, which need
// not be named here).
func noDecorator[C, K, N, L, A, T, I any](C, string, K, N, L, A, T, I) (apistorage.Interface, factory.DestroyFunc, error) {
	return nil, func() {}, nil
}
