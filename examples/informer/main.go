package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Any cache.ListerWatcher[*corev1.Pod] will do; cachetest.Source is an
	// in-memory one (the REST client comes with a later issue).
	src := cachetest.New[*corev1.Pod]()
	src.Create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1"}})

	deleted := make(chan struct{})
	indexer, informer := cache.NewIndexerInformer[*corev1.Pod](src, cache.ResourceEventHandlerFuncs[*corev1.Pod]{
		AddFunc:    func(p *corev1.Pod, initial bool) { fmt.Println("add", p.Name, "initial:", initial) },
		UpdateFunc: func(old, p *corev1.Pod) { fmt.Println("update", p.Name) },
		DeleteFunc: func(p *corev1.Pod, finalStateUnknown bool) {
			fmt.Println("delete", p.Name, "final state unknown:", finalStateUnknown)
			close(deleted)
		},
	}, cache.InformerOptions{})
	go informer.Run(ctx)

	if !cache.WaitForCacheSync(ctx, informer.HasSynced) {
		return
	}
	pods, _ := indexer.ByIndex(cache.NamespaceIndex, "default")
	fmt.Println(len(pods), "pod(s) in default:", pods[0].Name) // *corev1.Pod: no type assertion
	src.Delete("default", "web-1")
	<-deleted
}
