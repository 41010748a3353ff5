package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// seedCRD is the sample controller's crd-status-subresource.yaml (seed
// 002), with the group and names given.
func seedCRD(group, plural, kind string) string {
	return `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"` + plural + `.` + group + `","annotations":{"api-approved.kubernetes.io":"unapproved, experimental-only"}},
"spec":{"group":"` + group + `","scope":"Namespaced",
 "names":{"kind":"` + kind + `","plural":"` + plural + `"},
 "versions":[{"name":"v1alpha1","served":true,"storage":true,
  "schema":{"openAPIV3Schema":{"type":"object","properties":{
   "spec":{"type":"object","properties":{"deploymentName":{"type":"string"},"replicas":{"type":"integer","minimum":1,"maximum":10}}},
   "status":{"type":"object","properties":{"availableReplicas":{"type":"integer"}}}}}},
  "subresources":{"status":{}}}]}}`
}

// createCRD creates a definition and waits until its first version's
// resources are served.
func (c *client) createCRD(body string) map[string]any {
	c.t.Helper()
	crd := c.mustDo("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "", body, http.StatusCreated)
	group, plural := str(crd, "spec.group"), str(crd, "spec.names.plural")
	versions, _ := nested(crd, "spec.versions").([]any)
	version := versions[0].(map[string]any)["name"].(string)
	c.waitFor(func() bool {
		r := c.do("GET", "/apis/"+group+"/"+version+"/"+plural, "", "")
		return r.code == http.StatusOK
	})
	c.waitFor(func() bool {
		r := c.do("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+str(crd, "metadata.name"), "", "")
		return strings.Contains(string(r.body), `"Established","status":"True"`) || strings.Contains(string(r.body), `"status":"True","type":"Established"`)
	})
	return crd
}

// waitFor polls cond until it holds, failing the test after 10 s.
func (c *client) waitFor(cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCRDSeedFoo(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		c.createCRD(seedCRD("crdtest.k8s.io", "foos", "Foo"))
		foos := "/apis/crdtest.k8s.io/v1alpha1/namespaces/default/foos"
		tests := []struct {
			name, method, path, body string
			code                     int
			want                     []string
		}{
			{"create", "POST", foos, `{"apiVersion":"crdtest.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"example-foo"},"spec":{"deploymentName":"example-foo","replicas":1},"status":{"availableReplicas":3},"extra":1}`,
				201, []string{`"generation":1`, `"replicas":1`}},
			{"too many replicas", "POST", foos, `{"apiVersion":"crdtest.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"big"},"spec":{"replicas":11}}`,
				422, []string{`spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10`}},
			{"wrong type", "POST", foos, `{"apiVersion":"crdtest.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"str"},"spec":{"replicas":"two"}}`,
				422, []string{`spec.replicas in body must be of type integer`}},
			{"status ignored on update", "PUT", foos + "/example-foo", `{"apiVersion":"crdtest.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"example-foo","resourceVersion":"RV"},"spec":{"deploymentName":"example-foo","replicas":2},"status":{"availableReplicas":5}}`,
				200, []string{`"generation":2`, `"replicas":2`}},
			{"status update", "PUT", foos + "/example-foo/status", `{"apiVersion":"crdtest.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"example-foo","resourceVersion":"RV"},"spec":{"replicas":9},"status":{"availableReplicas":2}}`,
				200, []string{`"availableReplicas":2`, `"replicas":2`}},
		}
		rv := ""
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := c.do(tt.method, tt.path, "", strings.ReplaceAll(tt.body, "RV", rv))
				if r.code != tt.code {
					t.Fatalf("%s %s: %d %s", tt.method, tt.path, r.code, r.body)
				}
				for _, w := range tt.want {
					if !strings.Contains(string(r.body), w) {
						t.Errorf("answer lacks %s: %s", w, r.body)
					}
				}
				if strings.Contains(string(r.body), `"extra"`) {
					t.Errorf("unknown field kept: %s", r.body)
				}
				if tt.name == "create" && strings.Contains(string(r.body), `"availableReplicas"`) {
					t.Errorf("status kept on create: %s", r.body)
				}
				if tt.code < 300 {
					var m map[string]any
					if err := json.Unmarshal(r.body, &m); err == nil {
						rv = str(m, "metadata.resourceVersion")
					}
				}
			})
		}
	})
}

// TestCRDEstablishTime creates 1 and then 100 definitions at once and
// measures the time from the first create to the last one served
// (discovery lists it and a custom resource of it is created), and the
// heap each installed definition costs.
func TestCRDEstablishTime(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	forEachBackend(t, func(t *testing.T, c *client) {
		for _, n := range []int{1, 100} {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			var wg sync.WaitGroup
			errs := make(chan string, n)
			for i := range n {
				wg.Go(func() {
					group := fmt.Sprintf("n%d-%d.example.com", n, i)
					r := c.do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "", seedCRD(group, "foos", "Foo"))
					if r.code != http.StatusCreated {
						errs <- fmt.Sprintf("create %s: %d %s", group, r.code, r.body)
						return
					}
					deadline := time.Now().Add(30 * time.Second)
					for {
						d := c.do("GET", "/apis/"+group+"/v1alpha1", "", "")
						if d.code == http.StatusOK {
							cr := c.do("POST", "/apis/"+group+"/v1alpha1/namespaces/default/foos", "",
								`{"apiVersion":"`+group+`/v1alpha1","kind":"Foo","metadata":{"name":"one"},"spec":{"replicas":1}}`)
							if cr.code == http.StatusCreated {
								return
							}
						}
						if time.Now().After(deadline) {
							errs <- group + " not served within 30s"
							return
						}
						time.Sleep(20 * time.Millisecond)
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			close(errs)
			for e := range errs {
				t.Error(e)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			t.Logf("%d CRD(s) created at once, all served in %v; heap +%d bytes per CRD (with one custom resource each)",
				n, elapsed.Round(time.Millisecond), (int64(after.HeapAlloc)-int64(before.HeapAlloc))/int64(n))
		}
	})
}

// testCRD is a namespaced definition of one served version whose schema
// keeps every field, with a status subresource.
func testCRD(group, version, kind, plural string) *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve,
				}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
}

// crdCondition returns the status of the condition typ of the definition
// name, "" when it has none.
func (c *client) crdCondition(name, typ string) (status, reason string) {
	c.t.Helper()
	r := c.do("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+name, "", "")
	var crd struct {
		Status struct {
			Conditions []struct{ Type, Status, Reason string } `json:"conditions"`
		} `json:"status"`
	}
	_ = json.Unmarshal(r.body, &crd)
	for _, cond := range crd.Status.Conditions {
		if cond.Type == typ {
			return cond.Status, cond.Reason
		}
	}
	return "", ""
}

func TestCRDLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		crds := "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
		c.createCRD(seedCRD("life.example.com", "foos", "Foo"))
		foos := "/apis/life.example.com/v1alpha1/namespaces/default/foos"
		foo := func(name, extra string) string {
			return `{"apiVersion":"life.example.com/v1alpha1","kind":"Foo","metadata":{"name":"` + name + `"` + extra + `},"spec":{"replicas":1}}`
		}
		c.mustDo("POST", foos, "", foo("plain", ""), http.StatusCreated)
		c.mustDo("POST", foos, "", foo("held", `,"finalizers":["example.com/hold"]`), http.StatusCreated)

		steps := []struct {
			name string
			run  func(t *testing.T)
		}{
			{"names conflict", func(t *testing.T) {
				// Another definition of the group asking for the kind Foo.
				body := strings.Replace(seedCRD("life.example.com", "others", "Foo"), `"plural":"others"`, `"plural":"others","singular":"other"`, 1)
				c.mustDo("POST", crds, "", body, http.StatusCreated)
				c.waitFor(func() bool { s, _ := c.crdCondition("others.life.example.com", "NamesAccepted"); return s == "False" })
				if _, reason := c.crdCondition("others.life.example.com", "NamesAccepted"); reason != "ListKindConflict" {
					t.Errorf("NamesAccepted reason %q, want ListKindConflict (the last conflict found, as kube reports it)", reason)
				}
				if s, _ := c.crdCondition("others.life.example.com", "Established"); s != "False" {
					t.Errorf("a definition whose names conflict is Established: %q", s)
				}
				if r := c.do("GET", "/apis/life.example.com/v1alpha1/others", "", ""); r.code != http.StatusNotFound {
					t.Errorf("conflicting definition served: %d", r.code)
				}
				c.mustDo("DELETE", crds+"/others.life.example.com", "", "", http.StatusOK)
			}},
			{"new version served live", func(t *testing.T) {
				patch := `[{"op":"add","path":"/spec/versions/-","value":{"name":"v1","served":true,"storage":false,
"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}},
"additionalPrinterColumns":[{"name":"Replicas","type":"integer","jsonPath":".spec.replicas"}]}}]`
				c.mustDo("PATCH", crds+"/foos.life.example.com", "application/json-patch+json", patch, http.StatusOK)
				c.waitFor(func() bool {
					return c.do("GET", "/apis/life.example.com/v1/namespaces/default/foos/plain", "", "").code == http.StatusOK
				})
				r := c.do("GET", "/apis/life.example.com/v1/namespaces/default/foos", "", "", "Accept", "application/json;as=Table;g=meta.k8s.io;v=v1")
				if !strings.Contains(string(r.body), `"name":"Replicas"`) || !strings.Contains(string(r.body), `"cells":["held",1]`) {
					t.Errorf("v1 Table lacks the Replicas column: %s", r.body)
				}
			}},
			{"delete terminates", func(t *testing.T) {
				got := c.mustDo("DELETE", crds+"/foos.life.example.com", "", "", http.StatusOK)
				if fs := nested(got, "metadata.finalizers"); !strings.Contains(fmt.Sprint(fs), "customresourcecleanup.apiextensions.k8s.io") {
					t.Errorf("finalizers %v", fs)
				}
				c.waitFor(func() bool {
					return c.do("GET", foos+"/plain", "", "").code == http.StatusNotFound
				})
				if r := c.do("POST", foos, "", foo("late", "")); r.code != http.StatusForbidden && r.code != http.StatusNotFound {
					t.Errorf("create while terminating: %d %s", r.code, r.body)
				}
				// The held Foo keeps its definition.
				if r := c.do("GET", crds+"/foos.life.example.com", "", ""); r.code != http.StatusOK {
					t.Errorf("definition gone with a custom resource left: %d", r.code)
				}
				c.mustDo("PATCH", foos+"/held", "application/merge-patch+json", `{"metadata":{"finalizers":null}}`, http.StatusOK)
				c.waitFor(func() bool { return c.do("GET", crds+"/foos.life.example.com", "", "").code == http.StatusNotFound })
				if r := c.do("GET", "/apis/life.example.com/v1alpha1", "", ""); r.code != http.StatusNotFound {
					t.Errorf("discovery after delete: %d", r.code)
				}
			}},
		}
		for _, s := range steps {
			t.Run(s.name, s.run)
		}
	})
}
