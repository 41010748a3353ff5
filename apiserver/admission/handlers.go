package admission

import (
	"reflect"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	informersadmissionregistration "k8s.io/client-go/informers/admissionregistration"
	informersadmissionregistrationv1 "k8s.io/client-go/informers/admissionregistration/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// The webhook plugins do not read their configurations from the informers
// on each write: each keeps its webhooks, rebuilt when its own event
// handler says the configurations changed. A write that waits only until
// the informer holds a configuration (Writes.Fresh) could still run the
// webhooks of before, since the informer hands a change to each handler
// on its own goroutine. So the handlers the plugins register on the
// webhook configurations' informers are wrapped: a change counts as handed
// out once the plugin's handler has taken it, and Writes adds no handler
// of its own to those informers.

func (f admissionInformers) Admissionregistration() informersadmissionregistration.Interface {
	return registrationInformers{Interface: f.SharedInformerFactory.Admissionregistration(), writes: f.writes}
}

type registrationInformers struct {
	informersadmissionregistration.Interface
	writes *Writes
}

func (r registrationInformers) V1() informersadmissionregistrationv1.Interface {
	return registrationV1Informers{Interface: r.Interface.V1(), writes: r.writes}
}

type registrationV1Informers struct {
	informersadmissionregistrationv1.Interface
	writes *Writes
}

func (r registrationV1Informers) ValidatingWebhookConfigurations() informersadmissionregistrationv1.TypedValidatingWebhookConfigurationInformer {
	return validatingHooksInformer{r.Interface.ValidatingWebhookConfigurations(), r.writes}
}

func (r registrationV1Informers) MutatingWebhookConfigurations() informersadmissionregistrationv1.TypedMutatingWebhookConfigurationInformer {
	return mutatingHooksInformer{r.Interface.MutatingWebhookConfigurations(), r.writes}
}

type validatingHooksInformer struct {
	informersadmissionregistrationv1.TypedValidatingWebhookConfigurationInformer
	writes *Writes
}

func (i validatingHooksInformer) Informer() toolscache.SharedIndexInformer {
	return handledInformer[*admissionregistrationv1.ValidatingWebhookConfiguration](i.TypedValidatingWebhookConfigurationInformer.Informer(), i.writes)
}

type mutatingHooksInformer struct {
	informersadmissionregistrationv1.TypedMutatingWebhookConfigurationInformer
	writes *Writes
}

func (i mutatingHooksInformer) Informer() toolscache.SharedIndexInformer {
	return handledInformer[*admissionregistrationv1.MutatingWebhookConfiguration](i.TypedMutatingWebhookConfigurationInformer.Informer(), i.writes)
}

// handledInformer is inf, of objects of type T, whose added handlers tell
// writes of each change they have taken.
func handledInformer[T any](inf toolscache.SharedIndexInformer, writes *Writes) toolscache.SharedIndexInformer {
	if writes == nil {
		return inf
	}
	return trackingInformer{SharedIndexInformer: inf, writes: writes, typ: reflect.TypeFor[T]()}
}

// trackingInformer wraps the handlers added to it (trackedHandler).
type trackingInformer struct {
	toolscache.SharedIndexInformer
	writes *Writes
	typ    reflect.Type
}

func (i trackingInformer) wrap(h toolscache.ResourceEventHandler) toolscache.ResourceEventHandler {
	i.writes.handledByPlugin(i.typ)
	return trackedHandler{h: h, handed: func(obj any) { i.writes.handed(i.typ, obj) }}
}

func (i trackingInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandler(i.wrap(h))
}

func (i trackingInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, period time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(i.wrap(h), period)
}

func (i trackingInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, opts toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithOptions(i.wrap(h), opts)
}

// trackedHandler calls h, then handed with the object h took.
type trackedHandler struct {
	h      toolscache.ResourceEventHandler
	handed func(obj any)
}

func (t trackedHandler) OnAdd(obj any, initial bool) {
	t.h.OnAdd(obj, initial)
	t.handed(obj)
}

func (t trackedHandler) OnUpdate(old, obj any) {
	t.h.OnUpdate(old, obj)
	t.handed(obj)
}

func (t trackedHandler) OnDelete(obj any) {
	t.h.OnDelete(obj)
	t.handed(obj)
}
