package client

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/resources"
)

// registryServer answers, for every resource of the registry, a JSON list
// of one object of its kind, a get of that object and a watch with one
// ADDED event of it; with partial set it answers the metadata forms
// (as=PartialObjectMetadata[List]) a client asks for, as kube-apiserver
// does. It records each request's path and Accept header.
type registryServer struct {
	partial bool

	mu   sync.Mutex
	reqs []string // "path accept"
}

func (s *registryServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r.URL.Path+" "+r.Header.Get("Accept"))
	s.mu.Unlock()
	res, ns, name, ok := parsePath(r.URL.Path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	obj := map[string]any{
		"apiVersion": res.APIVersion(), "kind": res.GVK.Kind,
		"metadata": map[string]any{"name": "x", "namespace": ns, "uid": "uid-" + res.Plural, "resourceVersion": "5",
			"labels": map[string]any{"app": "web"}},
	}
	listKind, apiVersion := res.GVK.Kind+"List", res.APIVersion()
	accept := r.Header.Get("Accept")
	if s.partial && strings.Contains(accept, "as=PartialObjectMetadata") {
		obj["apiVersion"], obj["kind"] = "meta.k8s.io/v1", "PartialObjectMetadata"
		listKind, apiVersion = "PartialObjectMetadataList", "meta.k8s.io/v1"
	} else if res.GVK.Kind == "ConfigMap" {
		obj["data"] = map[string]any{"k": "v"}
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	switch {
	case name != "":
		_ = enc.Encode(obj)
	case r.URL.Query().Get("watch") == "true":
		_ = enc.Encode(map[string]any{"type": "ADDED", "object": obj})
	default:
		_ = enc.Encode(map[string]any{"apiVersion": apiVersion, "kind": listKind,
			"metadata": map[string]any{"resourceVersion": "7"}, "items": []any{obj}})
	}
}

// parsePath finds the registry's resource of a request path, with the
// namespace and object name it names.
func parsePath(path string) (res *resources.Resource, ns, name string, ok bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var gv schema.GroupVersion
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		gv, parts = schema.GroupVersion{Version: parts[1]}, parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		gv, parts = schema.GroupVersion{Group: parts[1], Version: parts[2]}, parts[3:]
	default:
		return nil, "", "", false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		ns, parts = parts[1], parts[2:]
	}
	if len(parts) == 0 || len(parts) > 2 {
		return nil, "", "", false
	}
	res, ok = resources.Lookup(gv.WithResource(parts[0]))
	if !ok || res.Namespaced != (ns != "") {
		return nil, "", "", false
	}
	if len(parts) == 2 {
		name = parts[1]
	}
	return res, ns, name, true
}

// TestListerWatcherReadsEveryBuiltinAsItsType: the informer source decodes
// each resource of the registry into the Go type the registry states, which
// cache.Unerase hands on typed, and reaches a cluster-scoped one without
// the namespace it was given.
func TestListerWatcherReadsEveryBuiltinAsItsType(t *testing.T) {
	srv := startServer(t, &registryServer{})
	c := newTestClient(t, srv.URL, func(cfg *Config) { cfg.PreferJSON = true })
	all := resources.Builtin.All()
	if len(all) < 40 {
		t.Fatalf("the registry holds %d resources", len(all))
	}
	for _, res := range all {
		t.Run(res.GVR().String(), func(t *testing.T) {
			lw := c.ListerWatcher(res.GVR(), "default", nil)
			l, err := lw.List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Items) != 1 || reflect.TypeOf(l.Items[0]) != res.GoType() {
				t.Fatalf("list items %#v, want one %s", l.Items, res.GoType())
			}
			if gvk := l.Items[0].GetObjectKind().GroupVersionKind(); gvk != res.GVK || l.Items[0].GetName() != "x" {
				t.Errorf("item %s %s, want %s x", gvk, l.Items[0].GetName(), res.GVK)
			}
			w, err := lw.Watch(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			ev, err := w.Next()
			if err != nil || ev.Type != cache.EventAdded || reflect.TypeOf(ev.Object) != res.GoType() {
				t.Fatalf("watch event %+v, %v; want ADDED of a %s", ev, err, res.GoType())
			}
			obj, err := c.Get(t.Context(), res.GVR(), "default", "x")
			if err != nil || reflect.TypeOf(obj) != res.GoType() {
				t.Fatalf("Get = %T, %v; want a %s", obj, err, res.GoType())
			}
		})
	}
	t.Run("unknown resource is unstructured", func(t *testing.T) {
		// Not served: only the type of the failure's absence matters.
		lw := c.ListerWatcher(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, "default", nil)
		if _, ok := cache.Unerase[*unstructured.Unstructured](lw).(*Resource[*unstructured.Unstructured]); !ok {
			t.Errorf("a custom resource's ListerWatcher is not the unstructured client")
		}
	})
}

func TestFor(t *testing.T) {
	fs := &registryServer{}
	srv := startServer(t, fs)
	c := newTestClient(t, srv.URL, func(cfg *Config) { cfg.PreferJSON = true })
	for _, tc := range []struct {
		name     string
		get      func() (cache.Object, error)
		wantPath string
	}{
		{name: "namespaced", wantPath: "/api/v1/namespaces/team-a/configmaps/x", get: func() (cache.Object, error) {
			return For[*corev1.ConfigMap](c, "team-a").Get(t.Context(), "x", metav1.GetOptions{})
		}},
		{name: "cluster-scoped ignores the namespace", wantPath: "/apis/rbac.authorization.k8s.io/v1/clusterroles/x", get: func() (cache.Object, error) {
			return For[*rbacv1.ClusterRole](c, "team-a").Get(t.Context(), "x", metav1.GetOptions{})
		}},
		{name: "Namespace moves a namespaced client", wantPath: "/api/v1/namespaces/b/configmaps/x", get: func() (cache.Object, error) {
			return For[*corev1.ConfigMap](c, "").Namespace("b").Get(t.Context(), "x", metav1.GetOptions{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := tc.get()
			if err != nil || obj.GetName() != "x" {
				t.Fatalf("Get = %v, %v", obj, err)
			}
			fs.mu.Lock()
			defer fs.mu.Unlock()
			if last := fs.reqs[len(fs.reqs)-1]; !strings.HasPrefix(last, tc.wantPath+" ") {
				t.Errorf("request %q, want path %s", last, tc.wantPath)
			}
		})
	}
	t.Run("a type the registry does not know", func(t *testing.T) {
		r := For[*unstructured.Unstructured](c, "default")
		if !errors.Is(r.Err(), ErrNotBuiltin) {
			t.Fatalf("Err = %v, want ErrNotBuiltin", r.Err())
		}
		if _, err := r.List(t.Context(), metav1.ListOptions{}); !errors.Is(err, ErrNotBuiltin) {
			t.Errorf("List = %v, want ErrNotBuiltin", err)
		}
		if err := r.Delete(t.Context(), "x", metav1.DeleteOptions{}); !errors.Is(err, ErrNotBuiltin) {
			t.Errorf("Delete = %v, want ErrNotBuiltin", err)
		}
		if err := For[*corev1.Pod](c, "").Err(); err != nil {
			t.Errorf("For[*corev1.Pod].Err() = %v", err)
		}
	})
}

// TestMetadata: metadata-only reads ask for kube-apiserver's partial forms
// and take the metadata out of whole objects from a server without them.
func TestMetadata(t *testing.T) {
	cmGVR := corev1.SchemeGroupVersion.WithResource("configmaps")
	for _, tc := range []struct {
		name    string
		partial bool
	}{{"server with the partial forms", true}, {"server without them", false}} {
		t.Run(tc.name, func(t *testing.T) {
			fs := &registryServer{partial: tc.partial}
			srv := startServer(t, fs)
			c := newTestClient(t, srv.URL, nil)
			check := func(what string, m *metav1.PartialObjectMetadata) {
				t.Helper()
				if m == nil || m.Name != "x" || m.UID != "uid-configmaps" || m.Labels["app"] != "web" ||
					m.Kind != "PartialObjectMetadata" || m.APIVersion != "meta.k8s.io/v1" {
					t.Errorf("%s: %+v", what, m)
				}
			}
			r := NewMetadata(c, cmGVR, "default")
			l, err := r.List(t.Context(), metav1.ListOptions{})
			if err != nil || len(l.Items) != 1 || l.ResourceVersion != "7" {
				t.Fatalf("List = %+v, %v", l, err)
			}
			check("list", l.Items[0])
			got, err := r.Get(t.Context(), "x", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			check("get", got)
			// The informer source's form: shared and without managedFields.
			lw := cache.Unerase[*metav1.PartialObjectMetadata](c.MetadataListerWatcher(cmGVR, "default", nil))
			w, err := lw.Watch(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			ev, err := w.Next()
			if err != nil || ev.Type != cache.EventAdded {
				t.Fatalf("watch event %+v, %v", ev, err)
			}
			check("watch", ev.Object)

			fs.mu.Lock()
			defer fs.mu.Unlock()
			want := []string{
				"/api/v1/namespaces/default/configmaps " + acceptMetadataList,
				"/api/v1/namespaces/default/configmaps/x " + acceptMetadata,
				"/api/v1/namespaces/default/configmaps " + acceptMetadata,
			}
			if strings.Join(fs.reqs, "\n") != strings.Join(want, "\n") {
				t.Errorf("requests\n%s\nwant\n%s", strings.Join(fs.reqs, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}
