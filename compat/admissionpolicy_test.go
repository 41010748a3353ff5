package compat_test

// ValidatingAdmissionPolicies and MutatingAdmissionPolicies written with
// client-go's typed clients to listwatch's envtest, and the writes they
// judge seen through client-go and controller-runtime's client: the
// denial as kube words it, the Warn action's warning, and a mutation.

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/listwatch/listwatch/envtest"
)

// configMapRules match the creates and updates of configmaps.
var configMapRules = &admissionregistrationv1.MatchResources{
	ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
		RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
		},
	}},
}

func TestAdmissionPoliciesOnEnvtest(t *testing.T) {
	env := envtest.Start(t, envtest.Options{})
	cfg := rest.CopyConfig(env.Config)
	warned := warningLog{texts: make(chan string, 10)}
	cfg.WarningHandlerWithContext = warned
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := t.Context()
	policies := cs.AdmissionregistrationV1()

	for _, p := range []struct {
		name, expression, message string
		actions                   []admissionregistrationv1.ValidationAction
	}{
		{"no-bad", "!has(object.data) || !('x' in object.data) || object.data.x != 'bad'", "x must not be bad", []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
		{"warn-y", "!has(object.data) || !('y' in object.data)", "y is deprecated", []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn}},
	} {
		if _, err := policies.ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: p.name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				MatchConstraints: configMapRules,
				Validations:      []admissionregistrationv1.Validation{{Expression: p.expression, Message: p.message}},
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := policies.ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: p.name + "-binding"},
			Spec:       admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: p.name, ValidationActions: p.actions},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := policies.MutatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "label"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: configMapRules,
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType:          admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: `Object{metadata: Object.metadata{labels: {"policy": "label"}}}`},
			}},
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := policies.MutatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "label-binding"},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "label"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// kube's plugins compile the policies about a second after they are
	// written: wait until each of the three acts.
	cms := cs.CoreV1().ConfigMaps("default")
	bad := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Data: map[string]string{"x": "bad"}}
	// The whole message is in the golden admission-policies.
	const denied = `ValidatingAdmissionPolicy 'no-bad' with binding 'no-bad-binding' denied request: x must not be bad`
	eventually(t, "the policy no-bad denies", func() (bool, string) {
		_, err := cms.Create(ctx, bad, metav1.CreateOptions{})
		return apierrors.IsInvalid(err), fmt.Sprint(err)
	})
	n := 0
	eventually(t, "the policy label mutates and warn-y warns", func() (bool, string) {
		n++
		got, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("y-%d", n)}, Data: map[string]string{"y": "1"}}, metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		var warning string
		select {
		case warning = <-warned.texts:
		default:
		}
		return got.Labels["policy"] == "label" && warning != "", fmt.Sprintf("labels %v, warning %q", got.Labels, warning)
	})

	tests := []struct {
		name string
		do   func() error
	}{
		{"client-go create", func() error {
			_, err := cms.Create(ctx, bad, metav1.CreateOptions{})
			return err
		}},
		{"client-go dry-run create", func() error {
			_, err := cms.Create(ctx, bad, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}},
		{"controller-runtime create", func() error {
			c, err := crclient.New(env.Config, crclient.Options{Scheme: scheme.Scheme})
			if err != nil {
				return err
			}
			obj := bad.DeepCopy()
			obj.Namespace = "default"
			return c.Create(ctx, obj)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			var status apierrors.APIStatus
			if !errors.As(err, &status) || status.Status().Code != http.StatusUnprocessableEntity || !strings.HasSuffix(status.Status().Message, denied) {
				t.Errorf("%v, want 422 ending %q", err, denied)
			}
		})
	}

	// A policy's paramKind names a kind its writer must be allowed to
	// read: a user who may write policies but not read configmaps is
	// refused one with configmaps as parameters.
	writer := rest.CopyConfig(env.Config)
	writer.Impersonate = rest.ImpersonationConfig{UserName: "policy-writer"}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "policy-writer"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingadmissionpolicies"}, Verbs: []string{"create"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "policy-writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "policy-writer"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "policy-writer"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fail := admissionregistrationv1.Fail
	eventually(t, "a policy with parameters its writer may not read is refused", func() (bool, string) {
		_, err := kubernetes.NewForConfigOrDie(writer).AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "with-params"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				ParamKind:        &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
				MatchConstraints: configMapRules,
				Validations:      []admissionregistrationv1.Validation{{Expression: "true"}},
				FailurePolicy:    &fail,
			},
		}, metav1.CreateOptions{})
		return apierrors.IsInvalid(err), fmt.Sprint(err)
	})
}
