package crdcontroller

import (
	"context"
	"log/slog"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/listwatch/listwatch/apiserver/internal/crd"
)

// TestCalculateNames checks the naming decisions against the names other
// definitions of the group hold: stored, or accepted by the controller
// before their status write is seen.
func TestCalculateNames(t *testing.T) {
	def := func(name, group, plural, kind string) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: group,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: plural[:len(plural)-1], Kind: kind, ListKind: kind + "List"},
			},
		}
	}
	stored := func(name, group, plural, kind string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"group": group},
			"status":   map[string]any{"acceptedNames": map[string]any{"plural": plural, "kind": kind}},
		}}
	}
	tests := []struct {
		name       string
		others     []*unstructured.Unstructured
		accepted   map[string]acceptedNames
		wantStatus apiextensionsv1.ConditionStatus
		wantReason string
		wantPlural string
	}{
		{name: "no other definition", wantStatus: apiextensionsv1.ConditionTrue, wantReason: "NoConflicts", wantPlural: "widgets"},
		{
			name:       "plural stored by another of the group",
			others:     []*unstructured.Unstructured{stored("widgets.b.example.com", "example.com", "widgets", "Other")},
			wantStatus: apiextensionsv1.ConditionFalse, wantReason: "PluralConflict",
		},
		{
			name:       "plural of another group",
			others:     []*unstructured.Unstructured{stored("widgets.other.io", "other.io", "widgets", "Widget")},
			wantStatus: apiextensionsv1.ConditionTrue, wantReason: "NoConflicts", wantPlural: "widgets",
		},
		{
			name: "kind accepted for another, not yet stored",
			accepted: map[string]acceptedNames{"gadgets.example.com": {group: "example.com", names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: "gadgets", Kind: "Widget",
			}}},
			wantStatus: apiextensionsv1.ConditionFalse, wantReason: "KindConflict", wantPlural: "widgets",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Controller{accepted: tt.accepted}
			if c.accepted == nil {
				c.accepted = map[string]acceptedNames{}
			}
			names, cond, _ := c.calculateNames(def("widgets.example.com", "example.com", "widgets", "Widget"), tt.others)
			if cond.Status != tt.wantStatus || cond.Reason != tt.wantReason {
				t.Errorf("NamesAccepted %s (%s: %s), want %s (%s)", cond.Status, cond.Reason, cond.Message, tt.wantStatus, tt.wantReason)
			}
			if names.Plural != tt.wantPlural {
				t.Errorf("accepted plural %q, want %q", names.Plural, tt.wantPlural)
			}
		})
	}
}

// orderServer is a Server that records whether a definition's resources
// were served (Commit) when the status write that makes it Established
// was made.
type orderServer struct {
	Server // the methods sync does not call: nil, they panic
	def    *unstructured.Unstructured
	served bool
	// servedAtEstablished is whether the resources were served when the
	// Established status was written; nil before it was.
	servedAtEstablished *bool
}

func (s *orderServer) Definition(string) (*unstructured.Unstructured, bool) { return s.def, true }
func (s *orderServer) Definitions(context.Context) ([]*unstructured.Unstructured, error) {
	return nil, nil
}
func (s *orderServer) Prepare(*apiextensionsv1.CustomResourceDefinition) (Installation, error) {
	if s.served {
		return nil, nil
	}
	return orderInstallation{s}, nil
}
func (s *orderServer) UpdateDefinition(_ context.Context, _, _ string, change func(*unstructured.Unstructured) (*unstructured.Unstructured, error)) error {
	out, err := change(s.def.DeepCopy())
	if err != nil {
		return err
	}
	d, err := crd.FromUnstructured(out)
	if err != nil {
		return err
	}
	if apihelpers.IsCRDConditionTrue(d, apiextensionsv1.Established) && s.servedAtEstablished == nil {
		served := s.served
		s.servedAtEstablished = &served
	}
	s.def = out
	return nil
}

type orderInstallation struct{ s *orderServer }

func (i orderInstallation) Commit() { i.s.served = true }
func (i orderInstallation) Abort()  {}

// TestServedBeforeEstablished: a new definition's resources are served
// before the status write that makes it Established, so that a client
// (or the garbage collector) that sees it Established finds them served.
func TestServedBeforeEstablished(t *testing.T) {
	def, err := crd.ToUnstructured(&apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := &orderServer{def: def}
	c := New(s, slog.New(slog.DiscardHandler))
	if _, err := c.sync(t.Context(), "widgets.example.com"); err != nil {
		t.Fatal(err)
	}
	switch {
	case s.servedAtEstablished == nil:
		t.Fatal("never written Established")
	case !*s.servedAtEstablished:
		t.Error("written Established before its resources were served")
	}
}
