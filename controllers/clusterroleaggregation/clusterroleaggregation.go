// Package clusterroleaggregation is the clusterrole-aggregation
// controller of kube-controller-manager: a ClusterRole with an
// aggregationRule is given the rules of every other ClusterRole its
// clusterRoleSelectors match. The bootstrap roles admin, edit and view
// (and cluster-reader style roles users add) hold no rules of their own:
// without this controller a user bound to view could read nothing.
//
// The rules are computed as kube's controller computes them: for each
// selector in order, the matching roles sorted by name, each role's rules
// in order, a rule equal (semantically) to one already taken skipped.
// They are written by server-side apply with kube's field manager
// "clusterrole-aggregation-controller" and force, so the aggregated role's
// other fields, and other managers' ownership of them, are untouched.
package clusterroleaggregation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/internal/objclient"
)

// FieldManager is the manager the aggregated rules are applied as, the
// one kube-controller-manager uses.
const FieldManager = "clusterrole-aggregation-controller"

// Client is the controller's access to the API server. Errors must be
// recognisable by k8s.io/apimachinery/pkg/api/errors.
type Client interface {
	// ApplyRules makes rules the rules of ClusterRole name, by a forced
	// server-side apply as FieldManager.
	ApplyRules(ctx context.Context, name string, rules []rbacv1.PolicyRule) error
}

// NewClient returns the Client that talks to an API server through c.
func NewClient(c *client.Client) Client {
	return restClient{roles: client.For[*rbacv1.ClusterRole](c, "")}
}

type restClient struct {
	roles *client.Resource[*rbacv1.ClusterRole]
}

// ApplyRules sends the apply configuration kube's controller sends
// (rbacv1ac.ClusterRole(name).WithRules(...)): identity and rules alone,
// no rules key at all when there are none, so that the manager gives up
// the rules it applied before.
func (r restClient) ApplyRules(ctx context.Context, name string, rules []rbacv1.PolicyRule) error {
	fields := map[string]any{}
	if len(rules) > 0 {
		fields["rules"] = rules
	}
	return objclient.Apply(ctx, r.roles, rbacv1.SchemeGroupVersion.WithKind("ClusterRole"), name, FieldManager, fields)
}

// Options tune the controller; the zero value is kube-controller-manager's
// configuration.
type Options struct {
	// Controller tunes the workers (one when not positive;
	// kube-controller-manager runs five, but the roles are few and a
	// sync is cheap), retries, logs and metrics.
	Controller controller.Options
}

// Controller keeps the rules of every aggregated ClusterRole the union of
// those of the roles it selects.
type Controller struct {
	*controller.Controller[string]
	roles  cache.Lister[*rbacv1.ClusterRole]
	client Client
}

// New returns the controller of the ClusterRoles of informer roles. Any
// change to any ClusterRole (labels, rules, a new or deleted role) queues
// every aggregated role, as kube's controller does: the roles are few and
// finding the selectors a change affects would cost more than a sync.
func New(roles cache.Informer[*rbacv1.ClusterRole], client Client, opts Options) (*Controller, error) {
	if roles == nil || client == nil {
		return nil, errors.New("clusterroleaggregation: an informer and a client are required")
	}
	c := &Controller{
		roles:  cache.NewLister(roles.GetIndexer(), rbacv1.Resource("clusterroles")),
		client: client,
	}
	var err error
	c.Controller, err = controller.New("clusterrole-aggregation", c.sync, opts.Controller,
		controller.Handle[string](roles, cache.ResourceEventHandlerFuncs[*rbacv1.ClusterRole]{
			AddFunc:    func(*rbacv1.ClusterRole, bool) { c.enqueueAggregated() },
			UpdateFunc: func(_, _ *rbacv1.ClusterRole) { c.enqueueAggregated() },
			DeleteFunc: func(*rbacv1.ClusterRole, bool) { c.enqueueAggregated() },
		}))
	if err != nil {
		return nil, fmt.Errorf("clusterroleaggregation: %w", err)
	}
	return c, nil
}

// enqueueAggregated queues every ClusterRole that has an aggregationRule.
func (c *Controller) enqueueAggregated() {
	all, err := c.roles.List(labels.Everything())
	if err != nil {
		c.Logger().Error("list cluster roles", "err", err)
		return
	}
	for _, r := range all {
		if r.AggregationRule != nil {
			c.Queue().Add(r.Name)
		}
	}
}

// sync applies the aggregated rules of ClusterRole name when they differ
// from the ones it has.
func (c *Controller) sync(ctx context.Context, name string) (controller.Result, error) {
	role, err := c.roles.Get(name)
	if apierrors.IsNotFound(err) {
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	if role.AggregationRule == nil {
		return controller.Result{}, nil
	}
	rules, err := c.Aggregate(role)
	if err != nil {
		// A selector the API server accepted and we cannot parse will
		// not parse on a retry either.
		return controller.Result{}, controller.Terminal(err)
	}
	if equality.Semantic.DeepEqual(rules, role.Rules) {
		return controller.Result{}, nil
	}
	if err := c.client.ApplyRules(ctx, name, rules); err != nil {
		return controller.Result{}, fmt.Errorf("apply the aggregated rules of clusterrole %s: %w", name, err)
	}
	c.Logger().Debug("aggregated cluster role", "clusterrole", name, "rules", len(rules))
	return controller.Result{}, nil
}

// Aggregate returns the rules role's aggregationRule selects from the
// ClusterRoles in the informer's cache, in kube's order: selectors in
// order, the roles each matches by name (role itself excluded), their
// rules in order, without a rule semantically equal to one before it.
func (c *Controller) Aggregate(role *rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	rules := []rbacv1.PolicyRule{}
	if role.AggregationRule == nil {
		return rules, nil
	}
	for i := range role.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&role.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			return nil, fmt.Errorf("clusterrole %s: selector %d: %w", role.Name, i, err)
		}
		matched, err := c.roles.List(sel)
		if err != nil {
			return nil, err
		}
		slices.SortFunc(matched, func(a, b *rbacv1.ClusterRole) int { return strings.Compare(a.Name, b.Name) })
		for _, m := range matched {
			if m.Name == role.Name {
				continue
			}
			for _, r := range m.Rules {
				if !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(have, r) }) {
					rules = append(rules, r)
				}
			}
		}
	}
	return rules, nil
}
