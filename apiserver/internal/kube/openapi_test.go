package kube

import (
	"encoding/json"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"

	restful "github.com/emicklei/go-restful/v3"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kube-openapi/pkg/handler3"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/listwatch/listwatch/resources"
)

// builtinResources are the server's built-in resources, as package
// apiserver hands them to NewOpenAPI.
func builtinResources() []OpenAPIResource {
	var out []OpenAPIResource
	for _, def := range resources.Builtin.All() {
		out = append(out, OpenAPIResource{
			GVK: def.GVK, Plural: def.Plural, Singular: def.Singular, Namespaced: def.Namespaced,
			Verbs: def.DiscoveryVerbs(), Subresources: def.Subresources,
		})
	}
	return out
}

// TestOpenAPIModelsTypeConverter builds server-side apply's TypeConverter
// from the models of the built-in kinds, as kube-apiserver does, and checks
// that it knows the kinds' structure: objects convert, unknown fields are
// refused, and lists are keyed by their map keys.
func TestOpenAPIModelsTypeConverter(t *testing.T) {
	kinds := OpenAPIKinds(builtinResources())
	models, err := OpenAPIModels(kinds)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"io.k8s.api.core.v1.Pod", "io.k8s.api.core.v1.PodList", "io.k8s.api.autoscaling.v1.Scale", "io.k8s.api.core.v1.Binding", "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"} {
		if models[name] == nil {
			t.Errorf("no model %s", name)
		}
	}
	tc, err := managedfields.NewTypeConverter(models, false)
	if err != nil {
		t.Fatal(err)
	}
	replicas, holder := int32(2), "me"
	tests := []struct {
		name string
		obj  k8sruntime.Object
		// fields are field paths the object's field set must hold.
		fields  []string
		wantErr string
	}{
		{name: "pod", obj: &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "X", Name: "x", UID: "u1"}}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "i", Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: "TCP"}}}}},
		}, fields: []string{
			`.spec.containers[name="a"].image`,
			`.spec.containers[name="a"].ports[containerPort=80,protocol="TCP"].containerPort`,
			`.metadata.ownerReferences[uid="u1"]`,
		}},
		{name: "deployment", obj: &appsv1.Deployment{
			TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			Spec:     appsv1.DeploymentSpec{Replicas: &replicas, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}},
		}, fields: []string{`.spec.replicas`, `.spec.template.spec.containers[name="c"].name`}},
		{name: "scale", obj: &autoscalingv1.Scale{
			TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
			Spec:     autoscalingv1.ScaleSpec{Replicas: 3},
		}, fields: []string{`.spec.replicas`}},
		{name: "lease", obj: &coordinationv1.Lease{
			TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			Spec:     coordinationv1.LeaseSpec{HolderIdentity: &holder},
		}, fields: []string{`.spec.holderIdentity`}},
		{name: "unknown field", obj: &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c"}, "dataa": map[string]any{"k": "v"},
		}}, wantErr: "dataa"},
	}
	for _, tt := range tests {
		typed, err := tc.ObjectToTyped(tt.obj)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: %v, want an error about %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		set, err := typed.ToFieldSet()
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		have := sets.New[string]()
		set.Iterate(func(p fieldpath.Path) { have.Insert(p.String()) })
		for _, f := range tt.fields {
			if !have.Has(f) {
				t.Errorf("%s: no field %s among %v", tt.name, f, sets.List(have))
			}
		}
	}
}

// TestOpenAPIRoutes checks that every built-in resource gets its routes
// and that the document paths known without building them are those the
// routes make.
func TestOpenAPIRoutes(t *testing.T) {
	res := builtinResources()
	c, err := installRoutes("1.37", res)
	if err != nil {
		t.Fatal(err)
	}
	paths := sets.New[string]()
	for _, ws := range c.RegisteredWebServices() {
		paths.Insert(strings.TrimPrefix(ws.RootPath(), "/"))
	}
	if want := builtinV3Paths(res); !paths.Equal(want) {
		t.Errorf("web services %v, want %v", sets.List(paths), sets.List(want))
	}
	bad := []struct {
		name string
		r    OpenAPIResource
	}{
		{"unknown kind", OpenAPIResource{GVK: corev1.SchemeGroupVersion.WithKind("Nope"), Plural: "nopes", Verbs: allVerbs}},
		{"unknown verbs", OpenAPIResource{GVK: corev1.SchemeGroupVersion.WithKind("Pod"), Plural: "pods", Verbs: []string{"get"}}},
		{"unknown subresource", OpenAPIResource{GVK: corev1.SchemeGroupVersion.WithKind("Pod"), Plural: "pods", Verbs: allVerbs, Subresources: []string{"log"}}},
	}
	for _, tt := range bad {
		if _, err := installRoutes("1.37", []OpenAPIResource{tt.r}); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
}

// TestOpenAPILazy checks that nothing of the built-in API is built before
// the first request for a document (custom resources may come and go
// before), and that it is built once.
func TestOpenAPILazy(t *testing.T) {
	res := builtinResources()
	b := newBuiltinAPI("1.37", res)
	routes, built := b.routes, 0
	b.routes = func() (*restful.Container, error) {
		built++
		return routes()
	}
	o := newOpenAPI(b, res)
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "foos.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.ClusterScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: "foos", Kind: "Foo"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true}},
		},
	}
	if err := o.SetCustomResourceDefinition(crd); err != nil {
		t.Fatal(err)
	}
	o.RemoveCustomResourceDefinition(crd.Name)
	if err := o.SetCustomResourceDefinition(crd); err != nil {
		t.Fatal(err)
	}
	if built != 0 {
		t.Fatalf("routes built %d times before any request", built)
	}
	for _, path := range []string{"/openapi/v3/apis/example.com/v1", "/openapi/v3/api/v1", "/openapi/v2", "/openapi/v3"} {
		req, _ := http.NewRequest(http.MethodGet, path, nil)
		w := &recorder{header: http.Header{}, code: http.StatusOK}
		o.ServeHTTP(w, req)
		if w.code != http.StatusOK {
			t.Errorf("%s: %d %s", path, w.code, w.body.String())
		}
	}
	// The custom resource's document needs none of the built-in API's;
	// the v3 documents are built once while held.
	if built != 2 {
		t.Errorf("routes built %d times, want 2 (v3, v2)", built)
	}
}

// TestOpenAPIV3BuiltAgain: the v3 documents are let go after a while and
// built again when asked for, the index kept; a document built again is
// served under the hash the index gives it (200 with that ETag, not a
// redirect to another hash).
func TestOpenAPIV3BuiltAgain(t *testing.T) {
	res := builtinResources()
	b := newBuiltinAPI("1.37", res)
	build, built := b.held.build, 0
	b.held.build = func() (*handler3.OpenAPIService, error) {
		built++
		return build()
	}
	o := newOpenAPI(b, res)
	get := func(url string) *recorder {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		w := &recorder{header: http.Header{}, code: http.StatusOK}
		o.ServeHTTP(w, req)
		return w
	}
	w := get("/openapi/v3")
	if w.code != http.StatusOK {
		t.Fatalf("/openapi/v3: %d %s", w.code, w.body.String())
	}
	var index handler3.OpenAPIV3Discovery
	if err := json.Unmarshal(w.body.Bytes(), &index); err != nil {
		t.Fatal(err)
	}
	first := w.body.String()
	if len(index.Paths) != len(builtinV3Paths(res)) {
		t.Fatalf("index of %d documents, want %d", len(index.Paths), len(builtinV3Paths(res)))
	}
	b.held.drop()
	for path, entry := range index.Paths {
		u, err := url.Parse(entry.ServerRelativeURL)
		if err != nil {
			t.Fatal(err)
		}
		w := get(entry.ServerRelativeURL)
		if w.code != http.StatusOK || w.header.Get("Etag") != strconv.Quote(u.Query().Get("hash")) {
			t.Errorf("%s built again: %d, ETag %s, want 200 and the index's hash %s", path, w.code, w.header.Get("Etag"), u.Query().Get("hash"))
		}
	}
	if built != 2 {
		t.Errorf("documents built %d times, want 2 (for the index, and again once let go)", built)
	}
	if again := get("/openapi/v3"); again.code != http.StatusOK || again.body.String() != first {
		t.Errorf("index served again: %d, the same %v", again.code, again.body.String() == first)
	}
}

// BenchmarkOpenAPIBuild measures what the first requests for the
// documents cost: building the built-in API's routes and documents and
// encoding them as served (the v3 index needs every v3 document, and so
// builds them all). It reports the heap the documents keep afterwards as
// retained-B.
func BenchmarkOpenAPIBuild(b *testing.B) {
	res := builtinResources()
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	type request struct{ path, accept string }
	v3, v2 := request{"/openapi/v3", ""}, request{"/openapi/v2", "application/json"}
	v2proto := request{"/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"}
	for _, bc := range []struct {
		name     string
		requests []request
	}{
		{"v3", []request{v3}},
		{"v2", []request{v2}},
		{"v2-protobuf", []request{v2proto}},
		{"v3+v2", []request{v3, v2}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			before := heap()
			var o *OpenAPI
			for b.Loop() {
				o = newOpenAPI(newBuiltinAPI("1.37", res), res)
				for _, r := range bc.requests {
					req, _ := http.NewRequest(http.MethodGet, r.path, nil)
					req.Header.Set("Accept", r.accept)
					w := &recorder{header: http.Header{}, code: http.StatusOK}
					o.ServeHTTP(w, req)
					if w.code != http.StatusOK || w.body.Len() == 0 {
						b.Fatalf("%s: %d", r.path, w.code)
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(heap())-float64(before), "retained-B")
			runtime.KeepAlive(o)
		})
	}
}
