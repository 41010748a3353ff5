package cachetest

import (
	"context"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
)

func widget(ns, name, color string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.com/v1")
	u.SetKind("Widget")
	u.SetNamespace(ns)
	u.SetName(name)
	_ = unstructured.SetNestedField(u.Object, color, "spec", "color")
	return u
}

func TestUnstructured(t *testing.T) {
	gr := schema.GroupResource{Group: "example.com", Resource: "widgets"}
	for _, tc := range []struct {
		name string
		opts []Option[*unstructured.Unstructured]
		kind string // of bookmark objects
	}{
		{"default NewObject", nil, ""},
		{"given NewObject", []Option[*unstructured.Unstructured]{WithNewObject(func() *unstructured.Unstructured {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("example.com/v1")
			u.SetKind("Widget")
			return u
		})}, "Widget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]Option[*unstructured.Unstructured]{
				WithResource[*unstructured.Unstructured](gr),
				WithField("spec.color", func(u *unstructured.Unstructured) string {
					c, _, _ := unstructured.NestedString(u.Object, "spec", "color")
					return c
				}),
			}, tc.opts...)
			s := New(opts...)
			in := widget("ns", "a", "red")
			if _, err := s.Create(in); err != nil {
				t.Fatal(err)
			}
			if in.GetResourceVersion() != "" {
				t.Fatalf("Create mutated its argument")
			}
			if _, err := s.Create(widget("ns", "b", "blue")); err != nil {
				t.Fatal(err)
			}
			_, err := s.Create(widget("ns", "a", "red"))
			var st apierrors.APIStatus
			if !apierrors.IsAlreadyExists(err) || !errorsAs(err, &st) || st.Status().Details.Group != "example.com" || st.Status().Details.Kind != "widgets" {
				t.Fatalf("duplicate Create: %v", err)
			}
			var nilU *unstructured.Unstructured
			if _, err := s.Create(nilU); !apierrors.IsBadRequest(err) {
				t.Fatalf("Create(nil) = %v", err)
			}

			l, err := s.List(context.Background(), metav1.ListOptions{FieldSelector: "spec.color=blue"})
			if err != nil || !slices.Equal(keys(l.Items), []string{"ns/b@2"}) {
				t.Fatalf("List = %v, %v", keys(l.Items), err)
			}

			w, err := s.Watch(context.Background(), metav1.ListOptions{
				ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
				SendInitialEvents:    ptr(true),
				AllowWatchBookmarks:  true,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			s.Bookmark()
			evs := takeAll(t, w)
			eqEvents(t, shortAll(evs), []ev{{added, "ns/a", "1"}, {added, "ns/b", "2"}, {bookmark, "", "2"}, {bookmark, "", "2"}})
			end := evs[2].Object
			if end.GetAnnotations()[cache.InitialEventsEndAnnotation] != "true" || end.GetKind() != tc.kind {
				t.Fatalf("end bookmark %v", end.Object)
			}
			if evs[3].Object.GetAnnotations() != nil {
				t.Fatalf("plain bookmark has annotations %v", evs[3].Object.GetAnnotations())
			}
		})
	}
}
