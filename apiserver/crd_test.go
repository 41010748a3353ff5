package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
			// Deletes go through the generic store's BeforeDelete and
			// markAsDeleting, as for built-in resources.
			{"delete with another uid as precondition", "DELETE", foos + "/example-foo", `{"preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}`,
				409, []string{`the UID in the precondition (00000000-0000-0000-0000-000000000000) does not match the UID in record`}},
			{"delete with an unknown propagation policy", "DELETE", foos + "/example-foo", `{"propagationPolicy":"Sometimes"}`,
				422, nil},
			{"finalizer", "PATCH", foos + "/example-foo", `{"metadata":{"finalizers":["example.com/hold"]}}`,
				200, []string{`"generation":2`}},
			{"delete held by a finalizer moves the generation", "DELETE", foos + "/example-foo", "",
				200, []string{`"generation":3`, `"deletionTimestamp"`, `"deletionGracePeriodSeconds":0`}},
			{"delete again keeps the generation", "DELETE", foos + "/example-foo", "",
				200, []string{`"generation":3`}},
			{"finalizer removed", "PATCH", foos + "/example-foo", `{"metadata":{"finalizers":null}}`,
				200, nil},
			{"gone", "GET", foos + "/example-foo", "", 404, nil},
		}
		rv := ""
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ct := ""
				if tt.method == "PATCH" {
					ct = "application/merge-patch+json"
				}
				r := c.do(tt.method, tt.path, ct, strings.ReplaceAll(tt.body, "RV", rv))
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

// establishGuard bounds how long establishCRDs waits for a definition to
// be Established and served. It only keeps a hung server from holding the
// test until the binary's timeout: 25 definitions at once take about a
// second with the race detector on 2 CPUs (BenchmarkCRDEstablish measures
// the time they take).
const establishGuard = 2 * time.Minute

// establishCRDs creates n definitions at once, groups prefix0.example.com
// and on, and returns once each is Established and served: its discovery
// lists it and a custom resource of it is created. It returns what went
// wrong for each definition that did not get there before ctx ended. The
// client watches the definitions rather than polling each one, since a
// hundred pollers would load the server; once a definition is
// Established, its discovery and a create are tried every 5 ms until both
// succeed.
func establishCRDs(ctx context.Context, hc *http.Client, base, prefix string, n int) []error {
	do := func(method, path, body string) (int, error) {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}
	// established[name] is closed when the definition is seen Established.
	established := map[string]chan struct{}{}
	for i := range n {
		established[fmt.Sprintf("foos.%s%d.example.com", prefix, i)] = make(chan struct{})
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	req, err := http.NewRequestWithContext(watchCtx, "GET", base+"/apis/apiextensions.k8s.io/v1/customresourcedefinitions?watch=1", nil)
	if err != nil {
		return []error{err}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return []error{err}
	}
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		defer resp.Body.Close()
		// The map is read by the creators meanwhile: what has been closed
		// is kept here, not written into it.
		closed := map[string]bool{}
		dec := json.NewDecoder(resp.Body)
		for {
			var ev struct {
				Object apiextensionsv1.CustomResourceDefinition `json:"object"`
			}
			if dec.Decode(&ev) != nil {
				return
			}
			ch := established[ev.Object.Name]
			if ch == nil || closed[ev.Object.Name] {
				continue
			}
			for _, cond := range ev.Object.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					close(ch)
					closed[ev.Object.Name] = true
					break
				}
			}
		}
	}()
	defer func() { stopWatch(); <-watchDone }()

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			group := fmt.Sprintf("%s%d.example.com", prefix, i)
			if code, err := do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", seedCRD(group, "foos", "Foo")); code != http.StatusCreated {
				errs <- fmt.Errorf("create %s: %d %v", group, code, err)
				return
			}
			select {
			case <-established["foos."+group]:
			case <-ctx.Done():
				errs <- fmt.Errorf("%s not Established: %w", group, context.Cause(ctx))
				return
			}
			for {
				if code, _ := do("GET", "/apis/"+group+"/v1alpha1", ""); code == http.StatusOK {
					code, _ := do("POST", "/apis/"+group+"/v1alpha1/namespaces/default/foos",
						`{"apiVersion":"`+group+`/v1alpha1","kind":"Foo","metadata":{"name":"one"},"spec":{"replicas":1}}`)
					if code == http.StatusCreated {
						return
					}
				}
				select {
				case <-time.After(5 * time.Millisecond):
				case <-ctx.Done():
					errs <- fmt.Errorf("%s Established but not served: %w", group, context.Cause(ctx))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return all
}

// TestCRDEstablish: definitions created one alone and then 25 at once are
// each Established, listed in discovery and served. The time they take is
// logged; BenchmarkCRDEstablish measures it.
func TestCRDEstablish(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
		defer hc.CloseIdleConnections()
		for _, n := range []int{1, 25} {
			ctx, cancel := context.WithTimeoutCause(t.Context(), establishGuard, fmt.Errorf("not within %v", establishGuard))
			start := time.Now()
			for _, err := range establishCRDs(ctx, hc, c.base, fmt.Sprintf("n%d-", n), n) {
				t.Error(err)
			}
			cancel()
			t.Logf("%d definition(s) created at once, all served in %v", n, time.Since(start).Round(time.Millisecond))
		}
	})
}

// BenchmarkCRDEstablish creates 100 definitions at once per iteration and
// waits until each is Established and serves a custom resource
// (establishCRDs). Besides the time per 100 it reports the process's CPU
// time per definition (server, storage and this client) and the live heap
// each installed definition, with one custom resource, adds.
func BenchmarkCRDEstablish(b *testing.B) {
	const n = 100
	for _, backend := range backends {
		b.Run(backend.Name, func(b *testing.B) {
			c := newClient(b, backend.New(b))
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
			defer hc.CloseIdleConnections()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			cpu0 := processCPU(b)
			defs := 0
			for i := 0; b.Loop(); i++ {
				for _, err := range establishCRDs(b.Context(), hc, c.base, fmt.Sprintf("b%d-", i), n) {
					b.Fatal(err)
				}
				defs += n
			}
			b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(defs), "cpu-ns/crd")
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(defs), "heap-B/crd")
		})
	}
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

// TestCRDStorageVersion writes custom resources of a two-version
// definition through the version that is not stored and reads the bytes
// stored: they are at the storage version, as kube-apiserver stores them,
// while every read (get, list, watch, the write's own answer) is at the
// version asked for. Once the storage version changes, what was stored
// before is still served at both versions, new writes are stored at the
// new one, and status.storedVersions lists both.
func TestCRDStorageVersion(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		const group = "stored.example.com"
		crds := "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
		body := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"widgets.` + group + `"},
"spec":{"group":"` + group + `","scope":"Namespaced","names":{"kind":"Widget","plural":"widgets"},
 "versions":[
  {"name":"v1beta1","served":true,"storage":false,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}},
  {"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`
		c.createCRD(body)
		c.waitFor(func() bool { return c.do("GET", "/apis/"+group+"/v1/widgets", "", "").code == http.StatusOK })
		path := func(version, name string) string {
			return "/apis/" + group + "/" + version + "/namespaces/default/widgets" + name
		}
		widget := func(version, name string) string {
			return `{"apiVersion":"` + group + `/` + version + `","kind":"Widget","metadata":{"name":"` + name + `"},"spec":{"size":1}}`
		}
		// stored is the apiVersion in the bytes stored for name.
		stored := func(t *testing.T, name string) string {
			t.Helper()
			kv, err := c.st.Get(t.Context(), StorageKey(group, "widgets", "default", name))
			if err != nil {
				t.Fatal(err)
			}
			var m struct {
				APIVersion string `json:"apiVersion"`
			}
			if err := json.Unmarshal(kv.Value, &m); err != nil {
				t.Fatal(err)
			}
			return m.APIVersion
		}
		// served checks the apiVersion of every read of name at version.
		served := func(t *testing.T, version, name string) {
			t.Helper()
			want := group + "/" + version
			if got := str(c.mustDo("GET", path(version, "/"+name), "", "", http.StatusOK), "apiVersion"); got != want {
				t.Errorf("GET at %s: apiVersion %q", version, got)
			}
			for _, q := range []string{"", "?resourceVersion=0"} {
				l := c.mustDo("GET", path(version, q), "", "", http.StatusOK)
				for _, it := range nested(l, "items").([]any) {
					if got := str(it.(map[string]any), "apiVersion"); got != want {
						t.Errorf("list%s at %s: item apiVersion %q", q, version, got)
					}
				}
			}
			w := c.do("GET", path(version, "?watch=1&resourceVersion=0&timeoutSeconds=1&fieldSelector=metadata.name%3D"+name), "", "")
			events := 0
			for line := range strings.Lines(string(w.body)) {
				var ev struct {
					Object struct {
						APIVersion string `json:"apiVersion"`
					} `json:"object"`
				}
				if err := json.Unmarshal([]byte(line), &ev); err != nil {
					t.Fatalf("watch at %s: %v: %s", version, err, line)
				}
				if events++; ev.Object.APIVersion != want {
					t.Errorf("watch at %s: event at %q", version, ev.Object.APIVersion)
				}
			}
			if events == 0 {
				t.Errorf("watch at %s: no event: %s", version, w.body)
			}
		}

		created := c.mustDo("POST", path("v1beta1", ""), "", widget("v1beta1", "old"), http.StatusCreated)
		if got := str(created, "apiVersion"); got != group+"/v1beta1" {
			t.Errorf("create answered at %q", got)
		}
		if got := stored(t, "old"); got != group+"/v1" {
			t.Errorf("created through v1beta1, stored at %q, want the storage version v1", got)
		}
		patched := c.mustDo("PATCH", path("v1beta1", "/old"), "application/merge-patch+json", `{"spec":{"size":2}}`, http.StatusOK)
		if got := str(patched, "apiVersion"); got != group+"/v1beta1" {
			t.Errorf("patch answered at %q", got)
		}
		if got := stored(t, "old"); got != group+"/v1" {
			t.Errorf("patched through v1beta1, stored at %q", got)
		}
		served(t, "v1beta1", "old")
		served(t, "v1", "old")

		// The storage version moves to v1beta1.
		patch := `[{"op":"replace","path":"/spec/versions/0/storage","value":true},{"op":"replace","path":"/spec/versions/1/storage","value":false}]`
		c.mustDo("PATCH", crds+"/widgets."+group, "application/json-patch+json", patch, http.StatusOK)
		c.waitFor(func() bool {
			r := c.do("POST", path("v1", ""), "", widget("v1", "probe"))
			if r.code != http.StatusCreated {
				return false
			}
			// Served by the new installation once it stores at v1beta1.
			at := storedAt(c, group, "probe")
			c.mustDo("DELETE", path("v1", "/probe"), "", "", http.StatusOK)
			return at == group+"/v1beta1"
		})
		c.mustDo("POST", path("v1", ""), "", widget("v1", "new"), http.StatusCreated)
		if got := stored(t, "new"); got != group+"/v1beta1" {
			t.Errorf("created through v1 after the change, stored at %q, want v1beta1", got)
		}
		if got := stored(t, "old"); got != group+"/v1" {
			t.Errorf("an object stored before the change was rewritten: %q", got)
		}
		for _, name := range []string{"old", "new"} {
			served(t, "v1beta1", name)
			served(t, "v1", name)
		}
		vs := fmt.Sprint(nested(c.mustDo("GET", crds+"/widgets."+group, "", "", http.StatusOK), "status.storedVersions"))
		if vs != "[v1 v1beta1]" {
			t.Errorf("status.storedVersions %s, want [v1 v1beta1]", vs)
		}
	})
}

// storedAt is the apiVersion stored for the widget name of group, "" when
// there is none.
func storedAt(c *client, group, name string) string {
	kv, err := c.st.Get(c.t.Context(), StorageKey(group, "widgets", "default", name))
	if err != nil {
		return ""
	}
	var m struct {
		APIVersion string `json:"apiVersion"`
	}
	_ = json.Unmarshal(kv.Value, &m)
	return m.APIVersion
}
