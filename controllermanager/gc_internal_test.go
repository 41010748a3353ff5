package controllermanager

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
)

// TestServedChanges: the garbage collector re-syncs its discovery when a
// definition is established, changes while established, or goes, and not
// for the definitions of the first list, for resyncs or for changes of a
// definition not yet established.
func TestServedChanges(t *testing.T) {
	crd := func(gen int64, est apiextensionsv1.ConditionStatus, names ...string) *apiextensionsv1.CustomResourceDefinition {
		c := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", Generation: gen}}
		if est != "" {
			c.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: est}}
		}
		c.Status.AcceptedNames.Plural = "widgets"
		if len(names) > 0 {
			c.Status.AcceptedNames.ShortNames = names
		}
		return c
	}
	est := crd(1, apiextensionsv1.ConditionTrue)
	tests := []struct {
		name string
		call func(h handlerOf)
		want bool
	}{
		{"established, first list", func(h handlerOf) { h.OnAdd(est, true) }, false},
		{"established, added later", func(h handlerOf) { h.OnAdd(est, false) }, true},
		{"not established, added", func(h handlerOf) { h.OnAdd(crd(1, ""), false) }, false},
		{"becomes established", func(h handlerOf) { h.OnUpdate(crd(1, apiextensionsv1.ConditionFalse), est) }, true},
		{"no longer established", func(h handlerOf) { h.OnUpdate(est, crd(1, apiextensionsv1.ConditionFalse)) }, true},
		{"spec changed while established", func(h handlerOf) { h.OnUpdate(est, crd(2, apiextensionsv1.ConditionTrue)) }, true},
		{"names changed while established", func(h handlerOf) { h.OnUpdate(est, crd(1, apiextensionsv1.ConditionTrue, "wd")) }, true},
		{"same state, new object", func(h handlerOf) { h.OnUpdate(est, crd(1, apiextensionsv1.ConditionTrue)) }, false},
		{"resync", func(h handlerOf) { h.OnUpdate(est, est) }, false},
		{"spec changed, not established", func(h handlerOf) { h.OnUpdate(crd(1, ""), crd(2, "")) }, false},
		{"deleted", func(h handlerOf) { h.OnDelete(est, false) }, true},
		{"deleted unseen", func(h handlerOf) { h.OnDelete(est, true) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called := false
			tt.call(servedChanges(func() { called = true }))
			if called != tt.want {
				t.Errorf("re-synced %v, want %v", called, tt.want)
			}
		})
	}
}

type handlerOf = cache.ResourceEventHandler[*apiextensionsv1.CustomResourceDefinition]
