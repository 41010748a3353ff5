package controllermanager

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/controllers/garbagecollector"
	"github.com/listwatch/listwatch/informers"
)

// newGarbageCollector makes the garbage collector of a term. Discovery
// names the resources it watches at start, then every resync period, and
// at once whenever a CustomResourceDefinition is established, changes or
// goes: the collector would otherwise learn of a new custom resource only
// at its next resync (30 s, as kube-controller-manager's), and a
// foreground deletion of one of its objects, or the collection of its
// dependents, would wait until then.
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
	crds := informers.For[*apiextensionsv1.CustomResourceDefinition](d.factory)
	if _, err := crds.AddEventHandler(servedChanges(gc.Rediscover)); err != nil {
		return nil, fmt.Errorf("garbagecollector: %w", err)
	}
	return gc, nil
}

// servedChanges calls changed when a CustomResourceDefinition's change
// may change what the server serves: one is established (the API server
// establishes a definition once its resources are served), an established
// one's spec or status changes (versions served or not, names), or one is
// deleted. The definitions of the first list were discovered already.
func servedChanges(changed func()) cache.ResourceEventHandler[*apiextensionsv1.CustomResourceDefinition] {
	return cache.ResourceEventHandlerFuncs[*apiextensionsv1.CustomResourceDefinition]{
		AddFunc: func(crd *apiextensionsv1.CustomResourceDefinition, initial bool) {
			if !initial && established(crd) {
				changed()
			}
		},
		UpdateFunc: func(old, cur *apiextensionsv1.CustomResourceDefinition) {
			if old == cur {
				return // a resync
			}
			if established(old) != established(cur) ||
				established(cur) && (old.Generation != cur.Generation || !equality.Semantic.DeepEqual(old.Status, cur.Status)) {
				changed()
			}
		},
		DeleteFunc: func(*apiextensionsv1.CustomResourceDefinition, bool) { changed() },
	}
}

// established reports whether crd's Established condition is true.
func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
