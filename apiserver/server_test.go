package apiserver

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestDiscovery(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		tests := []struct {
			path   string
			code   int
			accept string
			want   string // substring of the body
		}{
			{"/version", 200, "", `"gitVersion":"v1.37.2"`},
			{"/api", 200, "", `"versions":["v1"]`},
			// Aggregated discovery when asked for (discovery_aggregated_test.go).
			{"/api", 200, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json", `"kind":"APIGroupDiscoveryList"`},
			{"/api", 200, "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", `"kind":"APIVersions"`},
			{"/api/v1", 200, "", `"name":"pods/status"`},
			{"/api/v1", 200, "", `"shortNames":["po"]`},
			{"/api/v1", 200, "", `"name":"replicationcontrollers/scale","singularName":"","namespaced":true,"group":"autoscaling","version":"v1","kind":"Scale"`},
			{"/apis", 200, "", `"name":"apps"`},
			{"/apis", 200, "", `"name":"samplecontroller.k8s.io"`},
			{"/apis/apps", 200, "", `"preferredVersion":{"groupVersion":"apps/v1"`},
			{"/apis/apps/v1", 200, "", `"shortNames":["deploy"]`},
			{"/apis/coordination.k8s.io/v1", 200, "", `"name":"leases"`},
			{"/apis/samplecontroller.k8s.io/v1alpha1", 200, "", `"kind":"Foo"`},
			// kube-apiserver answers paths nothing serves with Go's
			// plain-text 404, not a Status.
			{"/apis/nope/v1", 404, "", "404 page not found"},
			{"/api/v2", 404, "", `"reason":"NotFound"`},
			{"/nothing", 404, "", "404 page not found"},
			{"/api/v1/widgets", 404, "", `"code":404`},
			{"/api/v1/namespaces/default/pods/x/exec", 404, "", `"code":404`},
			{"/api/v1/namespaces/default/services/x/scale", 404, "", `"code":404`},
		}
		for _, tt := range tests {
			r := c.do("GET", tt.path, "", "", "Accept", tt.accept)
			if r.code != tt.code || !strings.Contains(string(r.body), tt.want) {
				t.Errorf("GET %s: %d %s; want %d containing %s", tt.path, r.code, r.body, tt.code, tt.want)
			}
			wantCT := "application/json"
			if strings.Contains(tt.want, "APIGroupDiscoveryList") {
				wantCT = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
			}
			if ct := r.hdr.Get("Content-Type"); ct != wantCT && !strings.HasPrefix(tt.want, "404 page") {
				t.Errorf("GET %s: Content-Type %q", tt.path, ct)
			}
		}
	})
}

func TestCreate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1","labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"i"}]}}`
		got := c.mustDo("POST", "/api/v1/namespaces/default/pods", "", pod, 201)
		if str(got, "metadata.uid") == "" || str(got, "metadata.creationTimestamp") == "" || str(got, "metadata.resourceVersion") == "" {
			t.Errorf("server fields missing: %v", got["metadata"])
		}
		if str(got, "metadata.namespace") != "default" || str(got, "status.phase") != "Pending" || str(got, "kind") != "Pod" {
			t.Errorf("namespace/status/kind: %v", got)
		}
		// Kubernetes' defaults and what its pod strategy sets on create.
		c0, _ := nested(got, "spec.containers").([]any)
		defaults := map[string]any{
			"metadata.generation":                float64(1),
			"spec.restartPolicy":                 "Always",
			"spec.dnsPolicy":                     "ClusterFirst",
			"spec.schedulerName":                 "default-scheduler",
			"spec.terminationGracePeriodSeconds": float64(30),
			"status.qosClass":                    "BestEffort",
		}
		for path, want := range defaults {
			if v := nested(got, path); v != want {
				t.Errorf("%s = %v, want %v", path, v, want)
			}
		}
		// An image without a tag is :latest, always pulled.
		if len(c0) != 1 || str(c0[0].(map[string]any), "imagePullPolicy") != "Always" || str(c0[0].(map[string]any), "terminationMessagePath") != "/dev/termination-log" {
			t.Errorf("container defaults: %v", c0)
		}
		gen := c.mustDo("POST", "/api/v1/namespaces/default/pods", "", podBody(`{"generateName":"web-"}`, ""), 201)
		if n := str(gen, "metadata.name"); !strings.HasPrefix(n, "web-") || len(n) != len("web-")+5 {
			t.Errorf("generated name %q", n)
		}
		rc := c.mustDo("POST", "/api/v1/namespaces/default/replicationcontrollers", "", `{"metadata":{"name":"rc"},"spec":`+rcSpec("")+`,"status":{"replicas":9}}`, 201)
		// The status sent is dropped: kube's status on create is the zero
		// value, whose replicas is not omitted.
		if nested(rc, "metadata.generation") != float64(1) || nested(rc, "spec.replicas") != float64(1) || !reflect.DeepEqual(nested(rc, "status"), map[string]any{"replicas": float64(0)}) {
			t.Errorf("rc create: generation %v replicas %v status %v", nested(rc, "metadata.generation"), nested(rc, "spec.replicas"), nested(rc, "status"))
		}

		tests := []struct {
			name, path, body string
			code             int
			reason, want     string
		}{
			{"exists", "/api/v1/namespaces/default/pods", pod, 409, "AlreadyExists", `pods \"p1\" already exists`},
			{"no namespace", "/api/v1/namespaces/nope/pods", pod, 404, "NotFound", `namespaces \"nope\" not found`},
			{"bad name", "/api/v1/namespaces/default/pods", podBody(`{"name":"Bad_Name"}`, ""), 422, "Invalid", "metadata.name"},
			{"no name", "/api/v1/namespaces/default/pods", podBody(`{}`, ""), 422, "Invalid", "name or generateName is required"},
			// Since v1.37 (RelaxedServiceNameValidation, GA) a service's
			// name is a DNS-1123 label ("1abc" is one); a dot is not.
			{"service name is a DNS-1123 label", "/api/v1/namespaces/default/services", `{"metadata":{"name":"a.b"},"spec":{"ports":[{"port":80}]}}`, 422, "Invalid", "metadata.name"},
			{"bad label", "/api/v1/namespaces/default/pods", podBody(`{"name":"x","labels":{"a":"-"}}`, ""), 422, "Invalid", "metadata.labels"},
			{"malformed", "/api/v1/namespaces/default/pods", `{"metadata":`, 400, "BadRequest", "the object provided is unrecognized (must be of type Pod)"},
			{"wrong type", "/api/v1/namespaces/default/pods", `{"metadata":{"name":"x"},"spec":{"containers":"no"}}`, 400, "BadRequest", "cannot unmarshal"},
			{"not an object", "/api/v1/namespaces/default/pods", `[1]`, 400, "BadRequest", "cannot unmarshal array"},
			{"empty", "/api/v1/namespaces/default/pods", ` `, 400, "BadRequest", "empty"},
			{"wrong apiVersion", "/api/v1/namespaces/default/pods", `{"apiVersion":"apps/v1","kind":"Pod","metadata":{"name":"x"}}`, 400, "BadRequest", `no kind \"Pod\" is registered for version \"apps/v1\"`},
			{"wrong kind", "/api/v1/namespaces/default/pods", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"x"}}`, 400, "BadRequest", `Service in version \"v1\" cannot be handled as a Pod`},
			{"namespace mismatch", "/api/v1/namespaces/default/pods", `{"metadata":{"name":"x","namespace":"other"}}`, 400, "BadRequest", "does not match the namespace"},
			{"post to an object", "/api/v1/namespaces/default/pods/p1", pod, 405, "MethodNotAllowed", ""},
			{"post to all namespaces", "/api/v1/pods", pod, 405, "MethodNotAllowed", ""},
			// kube's custom resource validation refuses the kind; its
			// decoder does not (apiextensions-apiserver's validator.go).
			{"custom resource wrong kind", "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos", `{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Bar","metadata":{"name":"x"}}`, 422, "Invalid", `kind: Invalid value: \"Bar\": must be Foo`},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := c.do("POST", tt.path, "", tt.body)
				st := r.status(t)
				if r.code != tt.code || int(st.Code) != tt.code || string(st.Reason) != tt.reason || !strings.Contains(string(r.body), tt.want) {
					t.Errorf("got %d %s, want %d %s containing %q", r.code, r.body, tt.code, tt.reason, tt.want)
				}
			})
		}
		// Cluster-scoped: the namespace is cleared.
		ns := c.mustDo("POST", "/api/v1/namespaces", "", `{"metadata":{"name":"ns2","namespace":"x"}}`, 201)
		if str(ns, "metadata.namespace") != "" || str(ns, "status.phase") != "Active" {
			t.Errorf("namespace: %v", ns)
		}
		cr := c.mustDo("POST", "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos", "", `{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"f"},"spec":{"x":{"deep":[1,2]}},"status":{"s":1}}`, 201)
		if nested(cr, "spec.x.deep") == nil || nested(cr, "status") != nil || nested(cr, "metadata.generation") != float64(1) {
			t.Errorf("custom resource: %v", cr)
		}
		// Unknown fields of built-in types are dropped, as decoding into the Go type does.
		u := c.mustDo("POST", "/api/v1/namespaces/default/services", "", `{"metadata":{"name":"s"},"spec":{"bogus":1,"ports":[{"port":80}]}}`, 201)
		if nested(u, "spec.bogus") != nil || nested(u, "spec.ports") == nil {
			t.Errorf("service: %v", u)
		}
		// A service is given a cluster IP, in clusterIP and clusterIPs.
		if ip := str(u, "spec.clusterIP"); ip == "" || !reflect.DeepEqual(nested(u, "spec.clusterIPs"), []any{ip}) {
			t.Errorf("service cluster IPs: %v", u["spec"])
		}
		// Since v1.37 a service's name need only be a DNS-1123 label.
		c.mustDo("POST", "/api/v1/namespaces/default/services", "", `{"metadata":{"name":"1abc"},"spec":{"ports":[{"port":80}]}}`, 201)
	})
}

func TestGetList(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		c.mustDo("POST", "/api/v1/namespaces", "", `{"metadata":{"name":"other"}}`, 201)
		for i := range 5 {
			node := ""
			if i%2 == 0 {
				node = "n1"
			}
			c.mustDo("POST", "/api/v1/namespaces/default/pods", "", podBody(fmt.Sprintf(`{"name":"p%d","labels":{"i":"%d"}}`, i, i%2), fmt.Sprintf(`"nodeName":%q`, node)), 201)
		}
		c.mustDo("POST", "/api/v1/namespaces/other/pods", "", podBody(`{"name":"q"}`, ""), 201)

		got := c.mustDo("GET", "/api/v1/namespaces/default/pods/p1", "", "", 200)
		if str(got, "kind") != "Pod" || str(got, "apiVersion") != "v1" || str(got, "metadata.resourceVersion") == "" {
			t.Errorf("get: %v", got)
		}
		r := c.do("GET", "/api/v1/namespaces/default/pods/nope", "", "")
		if st := r.status(t); r.code != 404 || st.Message != `pods "nope" not found` || st.Details.Name != "nope" || st.Details.Kind != "pods" {
			t.Errorf("get missing: %d %s", r.code, r.body)
		}

		names := func(list map[string]any) string {
			var out []string
			items, _ := list["items"].([]any)
			for _, it := range items {
				out = append(out, str(it.(map[string]any), "metadata.name"))
			}
			return strings.Join(out, ",")
		}
		tests := []struct {
			query, want string
		}{
			{"/api/v1/namespaces/default/pods", "p0,p1,p2,p3,p4"},
			{"/api/v1/pods", "p0,p1,p2,p3,p4,q"},
			{"/api/v1/namespaces/other/pods", "q"},
			{"/api/v1/pods?labelSelector=i%3D1", "p1,p3"},
			{"/api/v1/pods?labelSelector=i+in+(0)", "p0,p2,p4"},
			{"/api/v1/pods?fieldSelector=spec.nodeName%3Dn1", "p0,p2,p4"},
			{"/api/v1/pods?fieldSelector=spec.nodeName%3D", "p1,p3,q"},
			{"/api/v1/pods?fieldSelector=metadata.namespace%3Dother", "q"},
			{"/api/v1/pods?fieldSelector=metadata.name!%3Dp0,status.phase%3DPending&labelSelector=i%3D0", "p2,p4"},
		}
		// resourceVersion=0 is served from the watch cache, which may
		// lag behind the writes just acknowledged (kube-apiserver's may
		// too): once it answers at a revision not older than the last
		// pod write, it must hold every pod. (The list's own revision may
		// be newer: the server writes other resources in the background,
		// its start-up objects among them, which the pods' cache does not
		// see.)
		var latest int64
		for _, it := range c.mustDo("GET", "/api/v1/pods", "", "", 200)["items"].([]any) {
			rv, _ := strconv.ParseInt(str(it.(map[string]any), "metadata.resourceVersion"), 10, 64)
			latest = max(latest, rv)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			list := c.mustDo("GET", "/api/v1/pods?resourceVersion=0", "", "", 200)
			if rv, _ := strconv.ParseInt(str(list, "metadata.resourceVersion"), 10, 64); rv >= latest {
				if got := names(list); got != "p0,p1,p2,p3,p4,q" {
					t.Errorf("resourceVersion=0 at %d: got %s, want p0,p1,p2,p3,p4,q", rv, got)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("resourceVersion=0 never reached revision %d", latest)
			}
		}
		for _, tt := range tests {
			list := c.mustDo("GET", tt.query, "", "", 200)
			if got := names(list); got != tt.want {
				t.Errorf("%s: got %s, want %s", tt.query, got, tt.want)
			}
			if str(list, "kind") != "PodList" || str(list, "apiVersion") != "v1" || str(list, "metadata.resourceVersion") == "" {
				t.Errorf("%s: list meta %v %v", tt.query, list["kind"], list["metadata"])
			}
		}

		// Paging: every page at the revision of the first.
		var all []string
		q := "/api/v1/pods?limit=2"
		first := ""
		for pages := 0; ; pages++ {
			list := c.mustDo("GET", q, "", "", 200)
			if first == "" {
				first = str(list, "metadata.resourceVersion")
				if nested(list, "metadata.remainingItemCount") != float64(4) {
					t.Errorf("remainingItemCount %v", nested(list, "metadata.remainingItemCount"))
				}
				// A write between pages is not seen.
				c.mustDo("POST", "/api/v1/namespaces/default/pods", "", podBody(`{"name":"late"}`, ""), 201)
			} else if rv := str(list, "metadata.resourceVersion"); rv != first {
				t.Errorf("page at %s, first at %s", rv, first)
			}
			all = append(all, names(list))
			cont := str(list, "metadata.continue")
			if cont == "" {
				break
			}
			q = "/api/v1/pods?limit=2&continue=" + cont
			if pages > 5 {
				t.Fatal("too many pages")
			}
		}
		if got := strings.Join(all, ","); got != "p0,p1,p2,p3,p4,q" {
			t.Errorf("paged: %s", got)
		}

		bad := []struct {
			query string
			code  int
		}{
			{"/api/v1/pods?fieldSelector=spec.bogus%3Dx", 400},
			{"/api/v1/namespaces?fieldSelector=metadata.namespace%3Dx", 400},
			{"/api/v1/pods?labelSelector=%3D%3D%3D", 400},
			{"/api/v1/pods?resourceVersion=abc", 400},
			{"/api/v1/pods?resourceVersionMatch=Exact", 422}, // ValidateListOptions, as kube (golden core-list-options)
			{"/api/v1/pods?continue=garbage", 400},
			{"/api/v1/pods?resourceVersion=99999999&resourceVersionMatch=NotOlderThan", 504},
			{"/api/v1/pods?sendInitialEvents=true", 422},
		}
		for _, b := range bad {
			r := c.do("GET", b.query, "", "")
			if r.code != b.code || int(r.status(t).Code) != b.code {
				t.Errorf("%s: %d %s, want %d", b.query, r.code, r.body, b.code)
			}
		}
		r = c.do("GET", "/api/v1/pods", "", "", "Accept", "application/yaml")
		if r.code != 406 {
			t.Errorf("yaml: %d", r.code)
		}
		// A shape the server does not produce falls back to a plain list.
		r = c.do("GET", "/api/v1/pods", "", "", "Accept", "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json")
		if r.code != 200 || str(r.obj(t), "kind") != "PodList" || r.hdr.Get("Content-Type") != "application/json" {
			t.Errorf("fallback: %d %s", r.code, r.hdr.Get("Content-Type"))
		}
	})
}
