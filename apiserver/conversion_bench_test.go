package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/listwatch/listwatch/internal/webhookserver"
)

// benchGizmos is the number of custom resources BenchmarkConversion lists.
const benchGizmos = 1000

// BenchmarkConversion measures what a conversion webhook costs, in
// process (the webhook is HTTPS on 127.0.0.1): a definition whose v2 is
// converted from its storage version v1 by a webhook against the same
// definition with the None strategy, listing benchGizmos objects
// (resourceVersion=0, from the watch cache), getting one, and creating
// (each create at v1 is converted for v2's watch cache; one at v2 is
// converted to v1 to be stored and back for the answer), at v1 and v2.
// On a shared 2-core machine (medians of 3): a list of 1000 at v2 costs
// about 1.3 times one at v1 with the same bytes and no webhook call (each
// object was converted once, when v2's cache took it in); a get at v2
// about 4 times one at v1 (a ConversionReview over HTTPS on 127.0.0.1,
// +48 KB, +650 allocations); a create at v2 about 2.2 times one at v1 (two
// conversions), and a create at v1 about 1.6 times one with the None
// strategy (v2's cache converting the new object).
func BenchmarkConversion(b *testing.B) {
	srv, _, _ := benchServer(b)
	hook, err := webhookserver.Start(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(hook.Close)
	benchDo(b, srv, http.MethodPost, "/api/v1/namespaces", `{"metadata":{"name":"creates"}}`, http.StatusCreated)
	for _, strategy := range []apiextensionsv1.ConversionStrategyType{apiextensionsv1.NoneConverter, apiextensionsv1.WebhookConverter} {
		group := fmt.Sprintf("%s.bench.example.com", map[apiextensionsv1.ConversionStrategyType]string{"None": "none", "Webhook": "webhook"}[strategy])
		u := hook.URL + webhookserver.ConvertPath + "/bench"
		crd := conversionCRD(group, apiextensionsv1.WebhookClientConfig{URL: &u, CABundle: hook.CABundle})
		if strategy == apiextensionsv1.NoneConverter {
			crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: strategy}
		}
		js, err := json.Marshal(crd)
		if err != nil {
			b.Fatal(err)
		}
		benchDo(b, srv, http.MethodPost, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", string(js), http.StatusCreated)
		// The lists read default's objects; the creates write to
		// another namespace, so that every list is of benchGizmos.
		path := func(version string) string {
			return "/apis/" + group + "/" + version + "/namespaces/default/gizmos"
		}
		createPath := func(version string) string {
			return "/apis/" + group + "/" + version + "/namespaces/creates/gizmos"
		}
		for deadline := time.Now().Add(30 * time.Second); ; {
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path("v2"), nil))
			if rec.Code == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s not served: %d", group, rec.Code)
			}
			time.Sleep(10 * time.Millisecond)
		}
		body := func(version, name string) string {
			field := map[string]string{"v1": webhookserver.V1Field, "v2": webhookserver.V2Field}[version]
			return fmt.Sprintf(`{"apiVersion":%q,"kind":"Gizmo","metadata":{"name":%q,"labels":{"app":"bench"}},"spec":{%q:"red"}}`, group+"/"+version, name, field)
		}
		for i := range benchGizmos {
			benchDo(b, srv, http.MethodPost, path("v1"), body("v1", fmt.Sprintf("g-%06d", i)), http.StatusCreated)
		}
		// A consistent list waits until both caches hold every object.
		for _, v := range []string{"v1", "v2"} {
			var l struct{ Items []json.RawMessage }
			if err := json.Unmarshal(benchDo(b, srv, http.MethodGet, path(v), "", http.StatusOK), &l); err != nil || len(l.Items) != benchGizmos {
				b.Fatalf("list at %s: %d items (%v)", v, len(l.Items), err)
			}
		}
		created := 0 // names of the objects the create benchmarks make
		for _, v := range []string{"v1", "v2"} {
			b.Run(fmt.Sprintf("%s/list-%s", strategy, v), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					benchDo(b, srv, http.MethodGet, path(v)+"?resourceVersion=0", "", http.StatusOK)
				}
			})
			b.Run(fmt.Sprintf("%s/get-%s", strategy, v), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					benchDo(b, srv, http.MethodGet, path(v)+"/g-000000", "", http.StatusOK)
				}
			})
			b.Run(fmt.Sprintf("%s/create-%s", strategy, v), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					created++
					benchDo(b, srv, http.MethodPost, createPath(v), body(v, fmt.Sprintf("c-%08d", created)), http.StatusCreated)
				}
			})
		}
	}
}
