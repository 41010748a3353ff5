package controllermanager

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/controllers/garbagecollector"
	"github.com/listwatch/listwatch/informers"
)

// newGarbageCollector makes the garbage collector of a term. Discovery
// names the resources it watches at start, then every resync period, and
// at once whenever a CustomResourceDefinition is created, changes
// (established, versions served) or goes: the collector would otherwise
// learn of a new custom resource only at its next resync (30 s, as
// kube-controller-manager's), and a foreground deletion of one of its
// objects, or the collection of its dependents, would wait until then.
func newGarbageCollector(ctx context.Context, d deps) (runner, error) {
	opts := d.m.cfg.GarbageCollector
	if opts.Discover == nil {
		opts.Discover = garbagecollector.ServedResources(d.m.client)
	}
	opts.Controller = d.options("garbage-collector-controller", opts.Controller)
	resources, err := opts.Discover(ctx)
	if err != nil {
		return nil, fmt.Errorf("garbagecollector: discovery: %w", err)
	}
	gc, err := garbagecollector.New(d.factory, garbagecollector.NewClient(d.clientOf(GarbageCollector)), resources, opts)
	if err != nil {
		return nil, err
	}
	// The definitions' metadata informer, which the collector watches
	// them through too: a definition's every write changes its
	// resourceVersion, the status write that establishes it included, and
	// no definition's schema is cached.
	crds := informers.MetadataFor(d.factory, apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions"))
	if _, err := crds.AddEventHandler(definitionChanges(gc.Rediscover)); err != nil {
		return nil, fmt.Errorf("garbagecollector: %w", err)
	}
	return gc, nil
}

// definitionChanges calls changed when a CustomResourceDefinition is
// created after the first list (whose definitions were discovered
// already), is written (the API server writes its status once it serves
// its resources, which makes it Established) or is deleted; not for an
// informer's resync. A discovery is a few reads, and definitions are
// written seldom.
func definitionChanges(changed func()) cache.ResourceEventHandler[*metav1.PartialObjectMetadata] {
	return cache.ResourceEventHandlerFuncs[*metav1.PartialObjectMetadata]{
		AddFunc: func(_ *metav1.PartialObjectMetadata, initial bool) {
			if !initial {
				changed()
			}
		},
		UpdateFunc: func(old, cur *metav1.PartialObjectMetadata) {
			if old.ResourceVersion != cur.ResourceVersion {
				changed()
			}
		},
		DeleteFunc: func(*metav1.PartialObjectMetadata, bool) { changed() },
	}
}
