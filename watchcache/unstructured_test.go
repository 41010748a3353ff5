package watchcache

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/storage"
)

// Custom resources are cached as *unstructured.Unstructured, with the
// default New for bookmarks.
func TestUnstructured(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	decode := func(kv storage.KeyValue) (*unstructured.Unstructured, error) {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(kv.Value); err != nil {
			return nil, err
		}
		u.SetResourceVersion(fmt.Sprint(kv.Revision))
		return u, nil
	}
	c, err := New(Config[*unstructured.Unstructured]{Storage: st, Prefix: "/foos/", Decode: decode})
	if err != nil {
		t.Fatal(err)
	}
	runCache(t, c)
	yes := true
	w, err := c.Watch(ctx, WatchOptions{ResourceVersion: "0", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, SendInitialEvents: &yes, AllowBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if e := <-w.Events(); e.Type != watch.Bookmark || e.Object().GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
		t.Fatalf("first event %v %v, want the initial-events-end bookmark", e.Type, e.Object())
	}
	rev, err := st.Create(ctx, "/foos/default/x", []byte(`{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"x","namespace":"default"}}`))
	if err != nil {
		t.Fatal(err)
	}
	e := <-w.Events()
	if e.Type != watch.Added || e.Object().GetName() != "x" || e.Object().GetKind() != "Foo" || e.Object().GetResourceVersion() != fmt.Sprint(rev) {
		t.Fatalf("event %v %v", e.Type, e.Object())
	}
	res, err := c.List(ctx, ListOptions{ResourceVersion: "0", Namespace: "default"})
	if err != nil || len(res.Items) != 1 {
		t.Fatalf("List = %v, %v", res, err)
	}
}
