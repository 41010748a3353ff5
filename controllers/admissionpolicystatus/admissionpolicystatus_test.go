package admissionpolicystatus_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/envtest"
	"github.com/listwatch/listwatch/internal/kubelog"
)

func TestMain(m *testing.M) {
	kubelog.ToStderr()
	goleak.VerifyTestMain(m)
}

// TestTypeChecking: the controller, run by the controller-manager against
// a real API server, writes each generation's type checking of a
// policy's expressions: none for expressions the matched kinds' schemas
// type, a warning at the expression's field for one naming a field the
// kind lacks, and again after the spec changes.
func TestTypeChecking(t *testing.T) {
	env := envtest.Start(t, envtest.Options{Controllers: []string{controllermanager.AdmissionPolicyStatus}})
	policies := client.For[*admissionregistrationv1.ValidatingAdmissionPolicy](env.Client, "")
	ctx := t.Context()
	policy := func(name string, expressions ...string) *admissionregistrationv1.ValidatingAdmissionPolicy {
		p := &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
					},
				}}},
			},
		}
		for _, e := range expressions {
			p.Spec.Validations = append(p.Spec.Validations, admissionregistrationv1.Validation{Expression: e})
		}
		return p
	}
	// await waits until the status of policy name reports generation and
	// returns its type checking. (Once the controller's warnings are gone,
	// server-side apply leaves no typeChecking at all.)
	await := func(t *testing.T, name string, generation int64) *admissionregistrationv1.TypeChecking {
		t.Helper()
		var last string
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			p, err := policies.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Status.ObservedGeneration == generation {
				return p.Status.TypeChecking
			}
			last = fmt.Sprintf("%+v", p.Status)
		}
		t.Fatalf("policy %s: status %s, want observedGeneration %d", name, last, generation)
		return nil
	}
	tests := []struct {
		name        string
		expressions []string
		// want are the fieldRefs warned about, and in each warning's text.
		want map[string]string
	}{
		{"well typed", []string{"object.spec.replicas >= 1"}, nil},
		{"unknown field", []string{"object.spec.replicas >= 1", "object.spec.nosuchfield == 'x'"},
			map[string]string{"spec.validations[1].expression": "undefined field 'nosuchfield'"}},
		{"type mismatch", []string{"object.spec.replicas == 'three'"},
			map[string]string{"spec.validations[0].expression": "no matching overload"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := strings.ReplaceAll(tt.name, " ", "-")
			if _, err := policies.Create(ctx, policy(name, tt.expressions...), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			tc := await(t, name, 1)
			if tc == nil {
				t.Fatal("no typeChecking in the status")
			}
			got := tc.ExpressionWarnings
			if len(got) != len(tt.want) {
				t.Fatalf("warnings %+v, want %d", got, len(tt.want))
			}
			for _, w := range got {
				if text, ok := tt.want[w.FieldRef]; !ok || !strings.Contains(w.Warning, text) {
					t.Errorf("warning %+v, want one of %v", w, tt.want)
				}
			}
		})
	}

	// A new generation is checked again: the unknown field fixed, no
	// warning is left.
	p, err := policies.Get(ctx, "unknown-field", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.Validations = p.Spec.Validations[:1]
	if _, err := policies.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if tc := await(t, "unknown-field", 2); tc != nil && len(tc.ExpressionWarnings) != 0 {
		t.Errorf("generation 2: warnings %+v, want none", tc.ExpressionWarnings)
	}
}
