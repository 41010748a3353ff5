package crdcontroller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/listwatch/listwatch/apiserver/internal/crd"
	"github.com/listwatch/listwatch/watchcache"
	"github.com/listwatch/listwatch/workqueue"
)

// workers is how many definitions are reconciled at once.
const workers = 16

// Server is what the controller needs of the API server that serves the
// definitions and their custom resources.
type Server interface {
	// Definition returns the stored definition name from the server's
	// watch cache; false when there is none.
	Definition(name string) (*unstructured.Unstructured, bool)
	// Definitions lists, from the watch cache, the stored definitions
	// that may be of group: those whose name ends in a dot and group, as
	// the name of every definition of group does (its plural, a dot, its
	// group), so that the others need not be decoded.
	Definitions(ctx context.Context, group string) ([]*unstructured.Unstructured, error)
	// WatchDefinitions watches the definitions from the watch cache's
	// current state; watchcache.ErrClosed once it is closed.
	WatchDefinitions(ctx context.Context) (*watchcache.Watcher[*unstructured.Unstructured], error)
	// Served names the definitions whose custom resources are served.
	Served() []string
	// Prepare makes the resources of the served versions of def, whose
	// names are accepted, ready to serve, without serving them; nil when
	// what is served is already that.
	Prepare(def *apiextensionsv1.CustomResourceDefinition) (Installation, error)
	// Uninstall stops serving the custom resources of the definition name.
	Uninstall(name string)
	// AwaitDeletes waits, up to timeout, until the watch caches of the
	// definition name hold no object.
	AwaitDeletes(ctx context.Context, name string, timeout time.Duration)
	// UpdateDefinition writes the definition name, or its subresource sub,
	// as change makes it from the stored one, through the server's update
	// path, recorded in managedFields as kube-apiserver's own writes.
	UpdateDefinition(ctx context.Context, name, sub string, change func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error)) error
	// CustomResources lists the stored custom resources of the definition
	// name.
	CustomResources(ctx context.Context, name string) ([]*unstructured.Unstructured, error)
	// DeleteCustomResource deletes one of them through the server's delete
	// path; gone reports it removed rather than waiting for finalizers.
	DeleteCustomResource(ctx context.Context, crdName, namespace, name string) (gone bool, err error)
}

// Installation is a definition's resources made ready to serve.
type Installation interface {
	// Commit serves them.
	Commit()
	// Abort releases what was made for them.
	Abort()
}

// Controller reconciles CustomResourceDefinitions by name.
type Controller struct {
	s     Server
	log   *slog.Logger
	queue *workqueue.RateLimitingQueue[string]

	// namesMu serializes the naming decisions, and accepted holds the
	// names each definition was last given, before its status write is
	// seen in the cache (kube's naming controller's mutation cache).
	namesMu  sync.Mutex
	accepted map[string]acceptedNames
}

type acceptedNames struct {
	group string
	names apiextensionsv1.CustomResourceDefinitionNames
}

// New returns a controller of the definitions s serves, logging to log.
func New(s Server, log *slog.Logger) *Controller {
	return &Controller{
		s: s, log: log,
		queue:    workqueue.NewRateLimitingQueue[string](workqueue.NewItemExponentialFailureRateLimiter[string](5*time.Millisecond, 30*time.Second), workqueue.Config{}),
		accepted: map[string]acceptedNames{},
	}
}

// Run reconciles the definitions until ctx ends, and returns once its
// workers have stopped. It may be called once.
func (c *Controller) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { c.work(ctx) })
	}
	c.watch(ctx)
	c.queue.ShutDown()
	wg.Wait()
}

// watch queues every definition that changes, from the state at start,
// watching again when a watch ends.
func (c *Controller) watch(ctx context.Context) {
	for ctx.Err() == nil {
		w, err := c.s.WatchDefinitions(ctx)
		if err != nil {
			if errors.Is(err, watchcache.ErrClosed) {
				return
			}
			c.log.Warn("crd controller: watch", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		// Definitions deleted while no watch was open are found again.
		for _, name := range c.s.Served() {
			c.queue.Add(name)
		}
		for ev := range w.Events() {
			if name := ev.Object().GetName(); name != "" {
				c.queue.Add(name)
			}
		}
		if err := w.Err(); err != nil && ctx.Err() == nil {
			c.log.Debug("crd controller: watch ended", "err", err)
		}
	}
}

func (c *Controller) work(ctx context.Context) {
	for {
		name, ok := c.queue.Get()
		if !ok {
			return
		}
		requeue, err := c.sync(ctx, name)
		switch {
		case err != nil && ctx.Err() == nil:
			c.log.Warn("crd controller", "crd", name, "err", err)
			c.queue.AddRateLimited(name)
		case requeue:
			c.queue.AddRateLimited(name)
		default:
			c.queue.Forget(name)
		}
		c.queue.Done(name)
	}
}

// sync reconciles the definition name; requeue asks for another pass
// (custom resources still being deleted).
func (c *Controller) sync(ctx context.Context, name string) (requeue bool, err error) {
	// The definition is read from the watch cache, as a controller reads
	// its informer's: the cache has applied the event that queued name, so
	// it is at least that fresh; a newer state has an event of its own,
	// which queues name again, and that pass corrects what this one
	// decided. It saves a storage round trip per pass, two per definition.
	u, ok := c.s.Definition(name)
	if !ok {
		c.forget(name)
		c.s.Uninstall(name)
		return false, nil
	}
	cur, err := crd.FromUnstructured(u)
	if err != nil {
		return false, err
	}
	if cur.DeletionTimestamp != nil {
		return c.finalize(ctx, cur)
	}
	desired := cur.DeepCopy()
	// kube-apiserver's API approval controller states its condition
	// before the naming controller's.
	if cond := apiApprovalCondition(cur); cond != nil {
		apihelpers.SetCRDCondition(desired, *cond)
	}
	// The other definitions are listed before the names lock is taken, so
	// that the workers decide names one at a time but list in parallel;
	// what was accepted since the list is in c.accepted.
	others := c.definitions(cur.Spec.Group)
	c.namesMu.Lock()
	names, namesCond, establishedCond := c.calculateNames(cur, others)
	desired.Status.AcceptedNames = names
	apihelpers.SetCRDCondition(desired, namesCond)
	c.accepted[name] = acceptedNames{group: cur.Spec.Group, names: names}
	c.namesMu.Unlock()
	// The resources are made ready before the status write that makes
	// the definition Established, and served once it is written: as in
	// kube-apiserver, a definition is served once it is Established, and
	// here as soon as that.
	var in Installation
	if namesCond.Status == apiextensionsv1.ConditionTrue || establishedCond.Status == apiextensionsv1.ConditionTrue {
		if in, err = c.s.Prepare(desired); err != nil {
			return false, err
		}
		establishedCond = apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue,
			Reason: "InitialNamesAccepted", Message: "the initial names have been accepted",
		}
	}
	apihelpers.SetCRDCondition(desired, establishedCond)
	if !reflect.DeepEqual(cur.Status, desired.Status) {
		err := c.writeStatus(ctx, name, func(crdObj *apiextensionsv1.CustomResourceDefinition) {
			crdObj.Status.AcceptedNames = desired.Status.AcceptedNames
			for _, cond := range desired.Status.Conditions {
				apihelpers.SetCRDCondition(crdObj, cond)
			}
		})
		if err != nil {
			if in != nil {
				in.Abort()
			}
			return false, err
		}
	}
	if in != nil {
		in.Commit()
	}
	return false, nil
}

// forget drops what the naming decisions remember of name.
func (c *Controller) forget(name string) {
	c.namesMu.Lock()
	delete(c.accepted, name)
	c.namesMu.Unlock()
}

// definitions lists the stored definitions that may be of group, from the
// watch cache. Only those are decoded: when every definition was, creating
// n definitions cost O(n²) (in BenchmarkCRDEstablish, six batches of 100
// took 70-79 ms of CPU per definition against 29 ms now).
func (c *Controller) definitions(group string) []*unstructured.Unstructured {
	list, err := c.s.Definitions(context.Background(), group)
	if err != nil {
		return nil
	}
	return list
}

// calculateNames decides in's accepted names and its NamesAccepted and
// Established conditions, as apiextensions-apiserver's naming controller
// does: a requested name is accepted when it is the one already accepted
// or no other definition of the group holds it. The names of the others
// are those this controller accepted, else those stored. Call with
// namesMu held.
func (c *Controller) calculateNames(in *apiextensionsv1.CustomResourceDefinition, others []*unstructured.Unstructured) (apiextensionsv1.CustomResourceDefinitionNames, apiextensionsv1.CustomResourceDefinitionCondition, apiextensionsv1.CustomResourceDefinitionCondition) {
	resources, kinds := sets.New[string](), sets.New[string]()
	use := func(n apiextensionsv1.CustomResourceDefinitionNames) {
		resources.Insert(n.Plural, n.Singular)
		resources.Insert(n.ShortNames...)
		kinds.Insert(n.Kind, n.ListKind)
	}
	for name, a := range c.accepted {
		if name != in.Name && a.group == in.Spec.Group {
			use(a.names)
		}
	}
	for _, item := range others {
		if _, ok := c.accepted[item.GetName()]; ok || item.GetName() == in.Name {
			continue
		}
		if nestedString(item, "spec", "group") == in.Spec.Group {
			use(storedAcceptedNames(item))
		}
	}
	use(in.Status.AcceptedNames)
	cond := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionUnknown}
	conflict := func(reason string, err error) {
		cond.Status, cond.Reason, cond.Message = apiextensionsv1.ConditionFalse, reason, err.Error()
	}
	requested, accepted := in.Spec.Names, in.Status.AcceptedNames
	names := accepted
	fresh := func(requested, accepted string, used sets.Set[string]) error {
		if requested == accepted || !used.Has(requested) {
			return nil
		}
		return fmt.Errorf("%q is already in use", requested)
	}
	if err := fresh(requested.Plural, accepted.Plural, resources); err != nil {
		conflict("PluralConflict", err)
	} else {
		names.Plural = requested.Plural
	}
	if err := fresh(requested.Singular, accepted.Singular, resources); err != nil {
		conflict("SingularConflict", err)
	} else {
		names.Singular = requested.Singular
	}
	if !slices.Equal(requested.ShortNames, accepted.ShortNames) {
		var errs []error
		for _, sn := range requested.ShortNames {
			if slices.Contains(accepted.ShortNames, sn) {
				continue
			}
			if err := fresh(sn, "", resources); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			conflict("ShortNamesConflict", aggregate(errs))
		} else {
			names.ShortNames = requested.ShortNames
		}
	}
	if err := fresh(requested.Kind, accepted.Kind, kinds); err != nil {
		conflict("KindConflict", err)
	} else {
		names.Kind = requested.Kind
	}
	if err := fresh(requested.ListKind, accepted.ListKind, kinds); err != nil {
		conflict("ListKindConflict", err)
	} else {
		names.ListKind = requested.ListKind
	}
	names.Categories = requested.Categories
	if cond.Status == apiextensionsv1.ConditionUnknown {
		cond.Status, cond.Reason, cond.Message = apiextensionsv1.ConditionTrue, "NoConflicts", "no conflicts found"
	}
	established := apiextensionsv1.CustomResourceDefinitionCondition{
		Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse,
		Reason: "NotAccepted", Message: "not all names are accepted",
	}
	if old := apihelpers.FindCRDCondition(in, apiextensionsv1.Established); old != nil {
		established = *old
	}
	return names, cond, established
}

// storedAcceptedNames reads the accepted names of a stored definition.
func storedAcceptedNames(u *unstructured.Unstructured) apiextensionsv1.CustomResourceDefinitionNames {
	str := func(f string) string { return nestedString(u, "status", "acceptedNames", f) }
	short, _, _ := unstructured.NestedStringSlice(u.Object, "status", "acceptedNames", "shortNames")
	return apiextensionsv1.CustomResourceDefinitionNames{
		Plural: str("plural"), Singular: str("singular"), ShortNames: short, Kind: str("kind"), ListKind: str("listKind"),
	}
}

// aggregate joins errors as apimachinery's aggregate prints them.
func aggregate(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	msg := "["
	for i, e := range errs {
		if i > 0 {
			msg += ", "
		}
		msg += e.Error()
	}
	return errors.New(msg + "]")
}

// apiApprovalCondition is the KubernetesAPIApprovalPolicyConformant
// condition of a definition in a *.k8s.io or *.kubernetes.io group, from
// its api-approved.kubernetes.io annotation, as apiextensions-apiserver's
// API approval controller states it; nil for other groups.
func apiApprovalCondition(in *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinitionCondition {
	if !apihelpers.IsProtectedCommunityGroup(in.Spec.Group) {
		return nil
	}
	state, reason := apihelpers.GetAPIApprovalState(in.Annotations)
	cond := &apiextensionsv1.CustomResourceDefinitionCondition{
		Type: apiextensionsv1.KubernetesAPIApprovalPolicyConformant, Status: apiextensionsv1.ConditionFalse, Message: reason,
	}
	switch state {
	case apihelpers.APIApprovalInvalid:
		cond.Reason = "InvalidAnnotation"
	case apihelpers.APIApprovalMissing:
		cond.Reason = "MissingAnnotation"
	case apihelpers.APIApproved:
		cond.Status, cond.Reason = apiextensionsv1.ConditionTrue, "ApprovedAnnotation"
	case apihelpers.APIApprovalBypassed:
		cond.Reason = "UnapprovedAnnotation"
	default:
		cond.Status, cond.Reason = apiextensionsv1.ConditionUnknown, "UnknownAnnotation"
	}
	return cond
}

// writeStatus updates the status of the definition name with change,
// through the CustomResourceDefinition status strategy.
func (c *Controller) writeStatus(ctx context.Context, name string, change func(*apiextensionsv1.CustomResourceDefinition)) error {
	return c.write(ctx, name, "status", change)
}

func (c *Controller) write(ctx context.Context, name, sub string, change func(*apiextensionsv1.CustomResourceDefinition)) error {
	err := c.s.UpdateDefinition(ctx, name, sub, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		crdObj, err := crd.FromUnstructured(cur)
		if err != nil {
			return nil, err
		}
		change(crdObj)
		out, err := crd.ToUnstructured(crdObj)
		if err != nil {
			return nil, err
		}
		out.SetResourceVersion(cur.GetResourceVersion())
		return out, nil
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone, or changed since: the event of the change queues it again.
		return nil
	}
	return err
}

// finalize deletes the custom resources of a definition being deleted,
// then removes its cleanup finalizer, as apiextensions-apiserver's
// finalizer controller does. Its resources stay served (creates refused)
// until it is gone.
func (c *Controller) finalize(ctx context.Context, cur *apiextensionsv1.CustomResourceDefinition) (bool, error) {
	if !apihelpers.CRDHasFinalizer(cur, apiextensionsv1.CustomResourceCleanupFinalizer) {
		return false, nil
	}
	if apihelpers.IsCRDConditionTrue(cur, apiextensionsv1.Established) && apihelpers.IsCRDConditionTrue(cur, apiextensionsv1.NamesAccepted) {
		in, err := c.s.Prepare(cur)
		if err != nil {
			return false, err
		}
		if in != nil {
			in.Commit()
		}
		remaining, err := c.deleteInstances(ctx, cur)
		if err != nil {
			_ = c.writeStatus(ctx, cur.Name, func(crdObj *apiextensionsv1.CustomResourceDefinition) {
				apihelpers.SetCRDCondition(crdObj, apiextensionsv1.CustomResourceDefinitionCondition{
					Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue,
					Reason: "InstanceDeletionFailed", Message: fmt.Sprintf("could not issue all deletes: %v", err),
				})
			})
			return false, err
		}
		if remaining > 0 {
			// Custom resources held by their own finalizers.
			return true, nil
		}
	}
	c.s.AwaitDeletes(ctx, cur.Name, 5*time.Second)
	c.s.Uninstall(cur.Name)
	return false, c.write(ctx, cur.Name, "", func(crdObj *apiextensionsv1.CustomResourceDefinition) {
		apihelpers.SetCRDCondition(crdObj, apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionFalse,
			Reason: "InstanceDeletionCompleted", Message: "removed all instances",
		})
		apihelpers.CRDRemoveFinalizer(crdObj, apiextensionsv1.CustomResourceCleanupFinalizer)
	})
}

// deleteInstances deletes every stored custom resource of the definition
// and reports how many remain (waiting for their finalizers).
func (c *Controller) deleteInstances(ctx context.Context, cur *apiextensionsv1.CustomResourceDefinition) (int, error) {
	items, err := c.s.CustomResources(ctx, cur.Name)
	if len(items) == 0 {
		return 0, err
	}
	remaining := 0
	errs := []error{err}
	for _, u := range items {
		gone, err := c.s.DeleteCustomResource(ctx, cur.Name, u.GetNamespace(), u.GetName())
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			errs = append(errs, err)
		case !gone:
			remaining++
		}
	}
	return remaining, errors.Join(errs...)
}

// nestedString is the string at path in u, or "".
func nestedString(u *unstructured.Unstructured, path ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, path...)
	return s
}
