package kube

import (
	"fmt"
	"net/url"

	"go.opentelemetry.io/otel/trace/noop"
	"k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
)

// What kube-apiserver gives its admission webhooks (and its other callers
// of webhooks: CRD conversion), built as cmd/kube-apiserver builds them.

// endpointResolver resolves a webhook's Service reference to one of the
// Service's ready endpoints, as kube-apiserver does with
// --enable-aggregator-routing (kube-aggregator's endpoint resolver, whose
// work is k8s.io/apiserver's proxy.ResolveEndpoint): listwatch runs no
// kube-proxy, so a Service's cluster IP leads nowhere, while a webhook on
// the host is reached through a Service whose EndpointSlice points at
// 127.0.0.1.
type endpointResolver struct {
	services corelisters.ServiceLister
	slices   proxy.EndpointSliceGetter
}

func (r endpointResolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	return proxy.ResolveEndpoint(r.services, r.slices, namespace, name, port)
}

// newServiceResolver is kube-apiserver's endpoint resolver over the
// Services and EndpointSlices of f, whose informers it registers.
func newServiceResolver(f informers.SharedInformerFactory) (webhook.ServiceResolver, error) {
	slices, err := proxy.NewEndpointSliceIndexerGetter(f.Discovery().V1().EndpointSlices())
	if err != nil {
		return nil, fmt.Errorf("kube: endpoint slices of the service resolver: %w", err)
	}
	return endpointResolver{services: f.Core().V1().Services().Lister(), slices: slices}, nil
}

// WebhookResolvers are what kube-apiserver resolves the webhooks it calls
// (admission and CRD conversion) with: the endpoint resolver over the
// Services and EndpointSlices of f, whose informers it registers, and the
// authentication info of the loopback client's configuration.
func WebhookResolvers(f informers.SharedInformerFactory, loopback *rest.Config) (webhook.ServiceResolver, webhook.AuthenticationInfoResolverWrapper, error) {
	services, err := newServiceResolver(f)
	if err != nil {
		return nil, nil, err
	}
	return services, authInfoResolverWrapper(loopback), nil
}

// authInfoResolverWrapper is kube-apiserver's: a webhook at
// kubernetes.default.svc:443 is called with the loopback client's
// configuration, any other with what its own configuration says (its
// caBundle), with no egress selector and no tracing.
func authInfoResolverWrapper(loopback *rest.Config) webhook.AuthenticationInfoResolverWrapper {
	return webhook.NewDefaultAuthenticationInfoResolverWrapper(nil, nil, loopback, noop.NewTracerProvider())
}
