package controllermanager

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
)

// TestDefinitionChanges: the garbage collector re-syncs its discovery when
// a definition is created after the first list, written (established,
// changed) or deleted, and not for the definitions of the first list or an
// informer's resync.
func TestDefinitionChanges(t *testing.T) {
	crd := func(rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", ResourceVersion: rv}}
	}
	type handler = cache.ResourceEventHandler[*metav1.PartialObjectMetadata]
	tests := []struct {
		name string
		call func(h handler)
		want bool
	}{
		{"first list", func(h handler) { h.OnAdd(crd("1"), true) }, false},
		{"created", func(h handler) { h.OnAdd(crd("1"), false) }, true},
		{"written (established)", func(h handler) { h.OnUpdate(crd("1"), crd("2")) }, true},
		{"resync", func(h handler) { c := crd("2"); h.OnUpdate(c, c) }, false},
		{"resync, another copy", func(h handler) { h.OnUpdate(crd("2"), crd("2")) }, false},
		{"deleted", func(h handler) { h.OnDelete(crd("2"), false) }, true},
		{"deleted unseen", func(h handler) { h.OnDelete(crd("2"), true) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called := false
			tt.call(definitionChanges(func() { called = true }))
			if called != tt.want {
				t.Errorf("re-synced %v, want %v", called, tt.want)
			}
		})
	}
}
