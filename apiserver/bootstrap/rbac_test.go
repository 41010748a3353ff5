package bootstrap

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"

	"github.com/listwatch/listwatch/storage"
)

// TestWritePolicyReconcilesWhatExists writes the policy from templates
// to a store that holds it already, one role trimmed and one binding
// deleted, as when objects appear between the lists and the writes: what
// exists is reconciled (the role completed), what does not is stored.
func TestWritePolicyReconcilesWhatExists(t *testing.T) {
	ctx := t.Context()
	p := bootstrapRBAC()
	var tmpl []policyObject
	var objs []runtime.Object
	add := func(plural string, obj Object) {
		tmpl = append(tmpl, policyObject{plural: plural, obj: obj})
		objs = append(objs, obj.DeepCopyObject())
	}
	for i := range p.clusterRoles {
		add("clusterroles", &p.clusterRoles[i])
	}
	for i := range p.clusterBindings {
		add("clusterrolebindings", &p.clusterBindings[i])
	}
	for _, ns := range p.namespaces {
		for i := range p.roles[ns] {
			add("roles", &p.roles[ns][i])
		}
		for i := range p.bindings[ns] {
			add("rolebindings", &p.bindings[ns][i])
		}
	}
	c := fake.NewClientset(objs...)
	const role, binding = "system:aggregate-to-view", "system:basic-user"
	r, err := c.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := r.DeepCopy()
	r.Rules = r.Rules[:1]
	if _, err := c.RbacV1().ClusterRoles().Update(ctx, r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.RbacV1().ClusterRoleBindings().Delete(ctx, binding, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// Store creates through the client, as the server's storage would
	// refuse an object that exists.
	var stored []string
	store := func(ctx context.Context, plural string, obj Object, _ metav1.Time) error {
		var err error
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			_, err = c.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = c.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = c.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			return fmt.Errorf("%s: unexpected %T", plural, obj)
		}
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s %s: %w", plural, obj.GetName(), storage.ErrKeyExists)
		}
		if err == nil {
			stored = append(stored, policyKey(plural, obj.GetNamespace(), obj.GetName()))
		}
		return err
	}
	s := New(Config{Client: c, Store: store, Log: slog.New(slog.DiscardHandler)})
	reconcile, _ := reconcileJobs(c, p, newListedPolicy())
	if err := s.writePolicy(ctx, c, p, tmpl, reconcile); err != nil {
		t.Fatal(err)
	}
	if len(stored) != 1 || stored[0] != policyKey("clusterrolebindings", "", binding) {
		t.Errorf("stored %v, want the deleted binding alone", stored)
	}
	r, err = c.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if covers, _ := rbacvalidation.Covers(r.Rules, want.Rules); !covers {
		t.Errorf("%s not completed: %d rules", role, len(r.Rules))
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Get(ctx, binding, metav1.GetOptions{}); err != nil {
		t.Errorf("deleted binding not stored: %v", err)
	}
	if !s.PolicyWritten() {
		t.Error("PolicyWritten false after writePolicy")
	}
}
