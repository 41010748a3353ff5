package clusterroleaggregation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	kubeaggregation "k8s.io/kubernetes/pkg/controller/clusterroleaggregation"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/controller"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// kube's controller, run as the oracle, leaves klog's flush
		// daemon and the informers' rate-limiter ticker of client-go.
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreAnyFunction("k8s.io/client-go/util/workqueue.(*Typed[...]).updateUnfinishedWorkLoop"),
		goleak.IgnoreAnyFunction("k8s.io/client-go/util/workqueue.(*delayingType[...]).waitingLoop"),
	)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeAPI applies rules to the roles of an in-memory source the
// controller's informer watches, failing the first applies with fail.
type fakeAPI struct {
	roles   *cachetest.Source[*rbacv1.ClusterRole]
	mu      sync.Mutex
	fail    []error
	applies []string
}

func (f *fakeAPI) ApplyRules(_ context.Context, name string, rules []rbacv1.PolicyRule) error {
	f.mu.Lock()
	f.applies = append(f.applies, name)
	var err error
	if len(f.fail) > 0 {
		err, f.fail = f.fail[0], f.fail[1:]
	}
	f.mu.Unlock()
	if err != nil {
		return err
	}
	r, ok := f.get(name)
	if !ok {
		return apierrors.NewNotFound(rbacv1.Resource("clusterroles"), name)
	}
	// The forced apply of the rules alone: they become the role's.
	r.Rules = rules
	_, err = f.roles.Update(r)
	return err
}

func (f *fakeAPI) get(name string) (*rbacv1.ClusterRole, bool) {
	for _, r := range f.roles.Items() {
		if r.Name == name {
			return r.DeepCopy(), true
		}
	}
	return nil, false
}

func (f *fakeAPI) applied() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.applies)
}

// run starts the controller on roles and returns its API and a func that
// stops it.
func run(t *testing.T, roles []*rbacv1.ClusterRole, fail ...error) (*fakeAPI, *Controller, func()) {
	t.Helper()
	api := &fakeAPI{roles: cachetest.New[*rbacv1.ClusterRole](), fail: fail}
	for _, r := range roles {
		if _, err := api.roles.Create(r.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	inf := cache.NewSharedIndexInformer[*rbacv1.ClusterRole](api.roles, cache.SharedInformerOptions{Reflector: cache.ReflectorOptions{Logger: quiet}})
	c, err := New(inf, api, Options{Controller: controller.Options{Logger: quiet, RetryBaseDelay: time.Millisecond, RetryMaxDelay: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { inf.Run(ctx) })
	wg.Go(func() { _ = c.Run(ctx) })
	if !cache.WaitForCacheSync(ctx, inf.HasSynced) {
		cancel()
		wg.Wait()
		t.Fatal("cache not synced")
	}
	return api, c, func() { cancel(); wg.Wait() }
}

func role(name string, lbls map[string]string, agg []map[string]string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	r := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}, Rules: rules}
	if agg != nil {
		r.AggregationRule = &rbacv1.AggregationRule{}
		for _, m := range agg {
			r.AggregationRule.ClusterRoleSelectors = append(r.AggregationRule.ClusterRoleSelectors, metav1.LabelSelector{MatchLabels: m})
		}
	}
	return r
}

func rule(verb, resource string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{""}, Resources: []string{resource}}
}

// waitRules waits until role name has rules want (nil: no rules).
func waitRules(t *testing.T, api *fakeAPI, name string, want []rbacv1.PolicyRule) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, ok := api.get(name)
		if ok && equality.Semantic.DeepEqual(r.Rules, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("clusterrole %s: rules %v, want %v", name, r.Rules, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestController(t *testing.T) {
	a := map[string]string{"agg": "a"}
	b := map[string]string{"agg": "b"}
	for _, tt := range []struct {
		name  string
		roles []*rbacv1.ClusterRole
		fail  []error
		// then changes the roles once the first aggregation is seen.
		then func(api *fakeAPI) error
		want []rbacv1.PolicyRule
		// wantApplies is how many applies "agg" gets, at least.
		wantApplies int
	}{
		{
			name: "rules of the matching roles, ordered by role name, duplicates dropped",
			roles: []*rbacv1.ClusterRole{
				role("agg", nil, []map[string]string{a}),
				role("z", a, nil, rule("get", "pods"), rule("list", "pods")),
				role("m", a, nil, rule("list", "pods"), rule("get", "services")),
				role("other", nil, nil, rule("delete", "pods")),
			},
			want:        []rbacv1.PolicyRule{rule("list", "pods"), rule("get", "services"), rule("get", "pods")},
			wantApplies: 1,
		},
		{
			name: "selectors in order, each one's roles by name; the role itself excluded",
			roles: []*rbacv1.ClusterRole{
				role("agg", a, []map[string]string{b, a}),
				role("x", a, nil, rule("get", "a")),
				role("y", b, nil, rule("get", "b")),
				role("w", b, nil, rule("get", "w")),
			},
			want:        []rbacv1.PolicyRule{rule("get", "w"), rule("get", "b"), rule("get", "a")},
			wantApplies: 1,
		},
		{
			name: "rules that match nothing are removed",
			roles: []*rbacv1.ClusterRole{
				role("agg", nil, []map[string]string{a}, rule("get", "stale")),
			},
			want:        []rbacv1.PolicyRule{},
			wantApplies: 1,
		},
		{
			name: "a role already aggregated is not written",
			roles: []*rbacv1.ClusterRole{
				role("agg", nil, []map[string]string{a}, rule("get", "pods")),
				role("x", a, nil, rule("get", "pods")),
			},
			want: []rbacv1.PolicyRule{rule("get", "pods")},
		},
		{
			name: "a new labelled role extends the aggregation",
			roles: []*rbacv1.ClusterRole{
				role("agg", nil, []map[string]string{a}),
				role("x", a, nil, rule("get", "pods")),
			},
			then: func(api *fakeAPI) error {
				_, err := api.roles.Create(role("y", a, nil, rule("watch", "pods")))
				return err
			},
			want:        []rbacv1.PolicyRule{rule("get", "pods"), rule("watch", "pods")},
			wantApplies: 2,
		},
		{
			name: "a deleted role's rules go",
			roles: []*rbacv1.ClusterRole{
				role("agg", nil, []map[string]string{a}),
				role("x", a, nil, rule("get", "pods")),
				role("y", a, nil, rule("watch", "pods")),
			},
			then: func(api *fakeAPI) error {
				_, err := api.roles.Delete("", "x")
				return err
			},
			want:        []rbacv1.PolicyRule{rule("watch", "pods")},
			wantApplies: 2,
		},
		{
			name: "a failed apply is retried",
			roles: []*rbacv1.ClusterRole{
				role("agg", nil, []map[string]string{a}),
				role("x", a, nil, rule("get", "pods")),
			},
			fail:        []error{apierrors.NewInternalError(errors.New("etcd is down"))},
			want:        []rbacv1.PolicyRule{rule("get", "pods")},
			wantApplies: 2,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			api, _, stop := run(t, tt.roles, tt.fail...)
			defer stop()
			if tt.then != nil {
				// After the first aggregation, so that the change is
				// one more.
				for deadline := time.Now().Add(5 * time.Second); len(api.applied()) == 0; {
					if time.Now().After(deadline) {
						t.Fatal("no aggregation")
					}
					time.Sleep(5 * time.Millisecond)
				}
				if err := tt.then(api); err != nil {
					t.Fatal(err)
				}
			}
			waitRules(t, api, "agg", tt.want)
			// Nothing more may come: give the controller a moment.
			time.Sleep(50 * time.Millisecond)
			applies := api.applied()
			for _, n := range applies {
				if n != "agg" {
					t.Errorf("applied to %s, a role with no aggregationRule", n)
				}
			}
			if len(applies) != tt.wantApplies {
				t.Errorf("%d applies %v, want %d", len(applies), applies, tt.wantApplies)
			}
		})
	}
}

// TestBootstrapRolesAsKube runs kube-controller-manager's own controller
// (on client-go's fake clientset) and this one over kube's bootstrap
// cluster roles plus a role labelled aggregate-to-view, and requires the
// same rules, in the same order, for every aggregated role: admin, edit,
// view and the system:aggregate-to-* chain.
func TestBootstrapRolesAsKube(t *testing.T) {
	extra := role("pod-logs-reader", map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}, nil,
		rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/log"}})
	var roles []*rbacv1.ClusterRole
	for _, r := range bootstrappolicy.ClusterRoles() {
		roles = append(roles, r.DeepCopy())
	}
	roles = append(roles, extra)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	objs := make([]runtime.Object, len(roles))
	for i, r := range roles {
		objs[i] = r.DeepCopy()
	}
	cs := kubefake.NewClientset(objs...)
	factory := kubeinformers.NewSharedInformerFactory(cs, 0)
	kc := kubeaggregation.NewClusterRoleAggregation(factory.Rbac().V1().ClusterRoles(), cs.RbacV1())
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { kc.Run(ctx, 1) })
	defer func() { cancel(); wg.Wait(); factory.Shutdown() }()

	api, _, stop := run(t, roles)
	defer stop()

	aggregated := map[string]bool{}
	for _, r := range roles {
		if r.AggregationRule != nil {
			aggregated[r.Name] = true
		}
	}
	if !aggregated["view"] || !aggregated["edit"] || !aggregated["admin"] {
		t.Fatalf("bootstrap aggregated roles %v lack admin, edit or view", aggregated)
	}
	var diff string
	deadline := time.Now().Add(20 * time.Second)
	for {
		diff = ""
		for name := range aggregated {
			kr, err := cs.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ours, _ := api.get(name)
			if len(kr.Rules) == 0 || !equality.Semantic.DeepEqual(kr.Rules, ours.Rules) {
				diff += fmt.Sprintf("%s: kube %d rules, ours %d\n", name, len(kr.Rules), len(ours.Rules))
			}
		}
		if diff == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("aggregated rules differ from kube's controller's:\n%s", diff)
		}
		time.Sleep(20 * time.Millisecond)
	}
	view, _ := api.get("view")
	canListPods := slices.ContainsFunc(view.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Resources, "pods") && slices.Contains(r.Verbs, "list") && slices.Contains(r.APIGroups, "")
	})
	if !canListPods || !slices.ContainsFunc(view.Rules, func(r rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(r, extra.Rules[0]) }) {
		t.Errorf("view does not let list pods or lacks pod-logs-reader's rule: %v", view.Rules)
	}
	edit, _ := api.get("edit")
	if !slices.ContainsFunc(edit.Rules, func(r rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(r, extra.Rules[0]) }) {
		t.Error("edit does not aggregate view's rules")
	}
}

func TestNewRequiresItsParts(t *testing.T) {
	inf := cache.NewSharedIndexInformer[*rbacv1.ClusterRole](cachetest.New[*rbacv1.ClusterRole](), cache.SharedInformerOptions{})
	if _, err := New(inf, nil, Options{}); err == nil {
		t.Error("New accepted no client")
	}
	if _, err := New(nil, &fakeAPI{}, Options{}); err == nil {
		t.Error("New accepted no informer")
	}
}
