package admission

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	informerscore "k8s.io/client-go/informers/core"
	informerscorev1 "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
)

// admissionInformers is client-go's informer factory with one change: the
// pod lister it hands out lists pods through the API (served from the
// watch cache, as an informer's list is) instead of from an informer of
// its own. PodSecurity takes a pod lister for the rare namespace update
// that changes its policy labels (it then checks the namespace's pods and
// warns); an informer would keep a second copy of every pod in the server
// and decode every pod write once more, for that.
type admissionInformers struct {
	informers.SharedInformerFactory
	pods   podLister
	writes *Writes
}

func (f admissionInformers) Core() informerscore.Interface {
	return coreInformers{Interface: f.SharedInformerFactory.Core(), pods: f.pods}
}

type coreInformers struct {
	informerscore.Interface
	pods podLister
}

func (c coreInformers) V1() informerscorev1.Interface {
	return coreV1Informers{Interface: c.Interface.V1(), pods: c.pods}
}

type coreV1Informers struct {
	informerscorev1.Interface
	pods podLister
}

func (c coreV1Informers) Pods() informerscorev1.TypedPodInformer {
	return podInformer{TypedPodInformer: c.Interface.Pods(), pods: c.pods}
}

// podInformer hands out the API-backed lister; its Informer, should a
// plugin ask for it, is client-go's.
type podInformer struct {
	informerscorev1.TypedPodInformer
	pods podLister
}

func (p podInformer) Lister() listerscorev1.PodLister { return p.pods }

// podLister lists and gets pods through the loopback client at
// resourceVersion 0 (from the watch cache). Its calls end with ctx, the
// server's lifetime.
type podLister struct {
	ctx       context.Context
	client    kubernetes.Interface
	namespace string
}

func (l podLister) List(selector labels.Selector) ([]*corev1.Pod, error) {
	list, err := l.client.CoreV1().Pods(l.namespace).List(l.ctx, metav1.ListOptions{LabelSelector: selector.String(), ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (l podLister) Pods(namespace string) listerscorev1.PodNamespaceLister {
	l.namespace = namespace
	return l
}

func (l podLister) Get(name string) (*corev1.Pod, error) {
	return l.client.CoreV1().Pods(l.namespace).Get(l.ctx, name, metav1.GetOptions{ResourceVersion: "0"})
}
