// Package podservices maps pod changes to the Services whose endpoints
// they may change, as kube's endpoints and EndpointSlice controllers do:
// with k8s.io/endpointslice's projection of a pod change (which ignores
// resyncs and changes no endpoint shows) and its choice of the Services
// to sync, over the Services' cache.
package podservices

import (
	corev1 "k8s.io/api/core/v1"
	endpointsliceutil "k8s.io/endpointslice/util"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/internal/kubeadapt"
)

// Handler returns the pod event handler that calls enqueue with the key
// ("namespace/name") of every Service of services whose endpoints an add,
// update or delete of a pod may change: those selecting the pod, before
// or after a change of its labels.
func Handler(services cache.Lister[*corev1.Service], enqueue func(key string)) cache.ResourceEventHandlerFuncs[*corev1.Pod] {
	lister := kubeadapt.ServiceLister{L: services}
	queue := func(key *endpointsliceutil.PodProjectionKey) {
		keys, err := endpointsliceutil.GetServicesToUpdate(lister, key)
		if err != nil {
			return // a cache read: it does not fail
		}
		for k := range keys {
			enqueue(k)
		}
	}
	return cache.ResourceEventHandlerFuncs[*corev1.Pod]{
		// kube's handlers take nil (no interface value) for the side of
		// an add or delete that has no pod.
		AddFunc:    func(p *corev1.Pod, _ bool) { queue(endpointsliceutil.GetPodUpdateProjectionKey(nil, p)) },
		UpdateFunc: func(old, cur *corev1.Pod) { queue(endpointsliceutil.GetPodUpdateProjectionKey(old, cur)) },
		DeleteFunc: func(p *corev1.Pod, _ bool) { queue(endpointsliceutil.GetPodUpdateProjectionKey(p, nil)) },
	}
}
