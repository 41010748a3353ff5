package apiserver

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const rcPath = "/api/v1/namespaces/default/replicationcontrollers"

func TestUpdate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		rc := c.mustDo("POST", rcPath, "", rcBody("rc", 1), 201)
		rv := str(rc, "metadata.resourceVersion")
		uid := str(rc, "metadata.uid")

		// Spec change bumps generation; status in the body is ignored.
		// (A uid other than the stored one is a failed precondition:
		// TestUpdateUIDPrecondition.)
		body := fmt.Sprintf(`{"metadata":{"name":"rc","resourceVersion":%q,"uid":%q,"labels":{"x":"y"}},"spec":%s,"status":{"replicas":7}}`, rv, uid, rcSpec(`"replicas":3`))
		up := c.mustDo("PUT", rcPath+"/rc", "", body, 200)
		if nested(up, "metadata.generation") != float64(2) || nested(up, "status.replicas") != float64(0) || str(up, "metadata.uid") != uid || str(up, "metadata.labels.x") != "y" {
			t.Errorf("update: %v", up)
		}
		// Stale resourceVersion: 409 with kube's message.
		r := c.do("PUT", rcPath+"/rc", "", body)
		if st := r.status(t); r.code != 409 || st.Reason != "Conflict" ||
			st.Message != `Operation cannot be fulfilled on replicationcontrollers "rc": the object has been modified; please apply your changes to the latest version and try again` {
			t.Errorf("stale: %d %s", r.code, r.body)
		}
		// No resourceVersion: unconditional for built-ins; metadata-only change keeps generation.
		up = c.mustDo("PUT", rcPath+"/rc", "", `{"metadata":{"name":"rc","labels":{"x":"z"}},"spec":`+rcSpec(`"replicas":3`)+`}`, 200)
		if nested(up, "metadata.generation") != float64(2) || str(up, "metadata.labels.x") != "z" {
			t.Errorf("unconditional: %v", up)
		}
		// A no-op update writes nothing.
		same := c.mustDo("PUT", rcPath+"/rc", "", `{"metadata":{"name":"rc","labels":{"x":"z"}},"spec":`+rcSpec(`"replicas":3`)+`}`, 200)
		if str(same, "metadata.resourceVersion") != str(up, "metadata.resourceVersion") {
			t.Errorf("no-op update moved resourceVersion %s -> %s", str(up, "metadata.resourceVersion"), str(same, "metadata.resourceVersion"))
		}

		// /status leaves spec alone; an RC's labels it changes, as
		// kube-apiserver's status strategy for RCs does
		// (TestStatusUpdateMetadata has every resource).
		st := c.mustDo("PUT", rcPath+"/rc/status", "", `{"metadata":{"name":"rc","labels":{"x":"w"}},"spec":{"replicas":100},"status":{"replicas":3,"observedGeneration":2}}`, 200)
		if nested(st, "status.replicas") != float64(3) || nested(st, "spec.replicas") != float64(3) || str(st, "metadata.labels.x") != "w" || nested(st, "metadata.generation") != float64(2) {
			t.Errorf("status: %v", st)
		}
		got := c.mustDo("GET", rcPath+"/rc/status", "", "", 200)
		if nested(got, "status.replicas") != float64(3) {
			t.Errorf("get status: %v", got)
		}
		// And a main-resource write keeps it.
		up = c.mustDo("PUT", rcPath+"/rc", "", `{"metadata":{"name":"rc"},"spec":`+rcSpec(`"replicas":3`)+`}`, 200)
		if nested(up, "status.replicas") != float64(3) {
			t.Errorf("status lost: %v", up)
		}

		// /scale.
		sc := c.mustDo("GET", rcPath+"/rc/scale", "", "", 200)
		if str(sc, "kind") != "Scale" || str(sc, "apiVersion") != "autoscaling/v1" || nested(sc, "spec.replicas") != float64(3) || str(sc, "status.selector") != "a=b" {
			t.Errorf("scale: %v", sc)
		}
		sc = c.mustDo("PUT", rcPath+"/rc/scale", "", `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"rc"},"spec":{"replicas":5}}`, 200)
		if nested(sc, "spec.replicas") != float64(5) {
			t.Errorf("scale put: %v", sc)
		}
		sc = c.mustDo("PATCH", rcPath+"/rc/scale", "application/merge-patch+json", `{"spec":{"replicas":6}}`, 200)
		after := c.mustDo("GET", rcPath+"/rc", "", "", 200)
		if nested(sc, "spec.replicas") != float64(6) || nested(after, "spec.replicas") != float64(6) || nested(after, "metadata.generation") != float64(4) {
			t.Errorf("scale patch: %v / %v", sc, after)
		}
		// The scale write stored the RC as a map encodes it (keys
		// sorted); putting it back unchanged, which is encoded from its Go
		// type (fields in their order), still writes nothing.
		js, err := json.Marshal(after)
		if err != nil {
			t.Fatal(err)
		}
		if same := c.mustDo("PUT", rcPath+"/rc", "", string(js), 200); str(same, "metadata.resourceVersion") != str(after, "metadata.resourceVersion") {
			t.Errorf("no-op update after a scale moved resourceVersion %s -> %s", str(after, "metadata.resourceVersion"), str(same, "metadata.resourceVersion"))
		}
		r = c.do("PUT", rcPath+"/rc/scale", "", `{"metadata":{"name":"rc","resourceVersion":"1"},"spec":{"replicas":5}}`)
		if r.code != 409 {
			t.Errorf("stale scale: %d %s", r.code, r.body)
		}
		r = c.do("PUT", rcPath+"/rc/scale", "", `{"metadata":{"name":"rc"},"spec":{"replicas":-1}}`)
		if r.code != 422 {
			t.Errorf("negative scale: %d %s", r.code, r.body)
		}
		dep := c.mustDo("POST", "/apis/apps/v1/namespaces/default/deployments", "", `{"metadata":{"name":"d"},"spec":`+deploymentSpec("d", "")+`}`, 201)
		if nested(dep, "spec.replicas") != float64(1) {
			t.Errorf("deployment: %v", dep)
		}
		sc = c.mustDo("GET", "/apis/apps/v1/namespaces/default/deployments/d/scale", "", "", 200)
		if str(sc, "status.selector") != "app=d" {
			t.Errorf("deployment scale: %v", sc)
		}

		errs := []struct {
			name, path, body string
			code             int
		}{
			{"name mismatch", rcPath + "/rc", `{"metadata":{"name":"other"}}`, 400},
			{"missing", rcPath + "/nope", `{"metadata":{"name":"nope"}}`, 404},
			{"malformed", rcPath + "/rc", `{`, 400},
			{"put on collection", rcPath, `{"metadata":{"name":"rc"}}`, 405},
			{"custom resource needs resourceVersion", "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos/f", `{"metadata":{"name":"f"}}`, 422},
			// kube's storage's parser error, a 500 (golden core-bad-options:update-rv-abc).
			{"bad resourceVersion", rcPath + "/rc", `{"metadata":{"name":"rc","resourceVersion":"x"}}`, 500},
		}
		c.mustDo("POST", "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos", "", `{"metadata":{"name":"f"}}`, 201)
		for _, e := range errs {
			r := c.do("PUT", e.path, "", e.body)
			if r.code != e.code || int(r.status(t).Code) != e.code {
				t.Errorf("%s: %d %s, want %d", e.name, r.code, r.body, e.code)
			}
		}
		// Endpoints are created by PUT.
		c.mustDo("PUT", "/api/v1/namespaces/default/endpoints/e", "", `{"metadata":{"name":"e"}}`, 201)
	})
}

func TestPatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		const pods = "/api/v1/namespaces/default/pods"
		p := c.mustDo("POST", pods, "", `{"metadata":{"name":"p","labels":{"a":"1"}},"spec":{"containers":[{"name":"c1","image":"i1"},{"name":"c2","image":"i2"}]}}`, 201)
		rv := str(p, "metadata.resourceVersion")

		got := c.mustDo("PATCH", pods+"/p", "application/merge-patch+json", `{"metadata":{"labels":{"b":"2"}}}`, 200)
		if str(got, "metadata.labels.a") != "1" || str(got, "metadata.labels.b") != "2" {
			t.Errorf("merge: %v", got["metadata"])
		}
		got = c.mustDo("PATCH", pods+"/p", "application/json-patch+json", `[{"op":"replace","path":"/metadata/labels/a","value":"3"}]`, 200)
		if str(got, "metadata.labels.a") != "3" {
			t.Errorf("json patch: %v", got["metadata"])
		}
		// Strategic merge patch merges the containers list by name.
		got = c.mustDo("PATCH", pods+"/p", "application/strategic-merge-patch+json", `{"spec":{"containers":[{"name":"c2","image":"new"}]}}`, 200)
		cs, _ := nested(got, "spec.containers").([]any)
		if len(cs) != 2 || str(cs[1].(map[string]any), "image") != "new" || str(cs[0].(map[string]any), "image") != "i1" {
			t.Errorf("strategic: %v", cs)
		}
		// A patch naming a stale resourceVersion conflicts.
		r := c.do("PATCH", pods+"/p", "application/merge-patch+json", fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"labels":{"c":"1"}}}`, rv))
		if r.code != 409 {
			t.Errorf("stale patch: %d %s", r.code, r.body)
		}
		// /status patch leaves spec alone.
		got = c.mustDo("PATCH", pods+"/p/status", "application/merge-patch+json", `{"status":{"phase":"Running"},"spec":{"nodeName":"n"}}`, 200)
		if str(got, "status.phase") != "Running" || str(got, "spec.nodeName") != "" {
			t.Errorf("status patch: %v", got)
		}
		// Spec patch of a custom resource bumps generation.
		const foos = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos"
		c.mustDo("POST", foos, "", `{"metadata":{"name":"f"},"spec":{"replicas":1}}`, 201)
		got = c.mustDo("PATCH", foos+"/f", "application/merge-patch+json", `{"spec":{"replicas":2}}`, 200)
		if nested(got, "metadata.generation") != float64(2) {
			t.Errorf("cr generation: %v", got["metadata"])
		}

		errs := []struct {
			name, path, ct, body string
			code                 int
		}{
			{"strategic on custom resource", foos + "/f", "application/strategic-merge-patch+json", `{}`, 415},
			{"unknown type", pods + "/p", "text/plain", `{}`, 415},
			{"apply without a field manager", pods + "/p", "application/apply-patch+yaml", `{}`, 422},
			{"bad merge", pods + "/p", "application/merge-patch+json", `{`, 400},
			{"bad json patch", pods + "/p", "application/json-patch+json", `{"op":1}`, 400},
			{"json patch fails", pods + "/p", "application/json-patch+json", `[{"op":"test","path":"/metadata/name","value":"x"}]`, 422},
			{"rename", pods + "/p", "application/merge-patch+json", `{"metadata":{"name":"q"}}`, 400},
			// A patched object the decoder refuses is 422 on the field
			// "patch", as kube-apiserver's patch handler answers.
			{"wrong type", pods + "/p", "application/merge-patch+json", `{"spec":{"containers":5}}`, 422},
			{"missing", pods + "/nope", "application/merge-patch+json", `{}`, 404},
			{"invalid label", pods + "/p", "application/merge-patch+json", `{"metadata":{"labels":{"a":"-x-"}}}`, 422},
		}
		for _, e := range errs {
			r := c.do("PATCH", e.path, e.ct, e.body)
			if r.code != e.code || int(r.status(t).Code) != e.code {
				t.Errorf("%s: %d %s, want %d", e.name, r.code, r.body, e.code)
			}
		}
	})
}

func TestDelete(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		const pods = "/api/v1/namespaces/default/pods"
		// Unbound pod: gone at once, returned.
		c.mustDo("POST", pods, "", podBody(`{"name":"unbound"}`, ""), 201)
		got := c.mustDo("DELETE", pods+"/unbound", "", "", 200)
		if str(got, "kind") != "Pod" {
			t.Errorf("delete pod: %v", got)
		}
		c.mustDo("GET", pods+"/unbound", "", "", 404)
		c.mustDo("DELETE", pods+"/unbound", "", "", 404)

		// Bound pod: graceful until the node agent confirms with grace 0.
		c.mustDo("POST", pods, "", podBody(`{"name":"bound"}`, `"nodeName":"n1","terminationGracePeriodSeconds":20`), 201)
		got = c.mustDo("DELETE", pods+"/bound", "", "", 200)
		if str(got, "metadata.deletionTimestamp") == "" || nested(got, "metadata.deletionGracePeriodSeconds") != float64(20) {
			t.Errorf("graceful: %v", got["metadata"])
		}
		got = c.mustDo("DELETE", pods+"/bound?gracePeriodSeconds=5", "", "", 200)
		if nested(got, "metadata.deletionGracePeriodSeconds") != float64(5) {
			t.Errorf("shorter grace: %v", got["metadata"])
		}
		// A negative grace period is not refused: kube's BeforeDelete
		// takes it as 1s.
		got = c.mustDo("DELETE", pods+"/bound?gracePeriodSeconds=-1", "", "", 200)
		if nested(got, "metadata.deletionGracePeriodSeconds") != float64(1) {
			t.Errorf("negative grace: %v", got["metadata"])
		}
		c.mustDo("GET", pods+"/bound", "", "", 200)
		c.mustDo("DELETE", pods+"/bound", "", `{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0}`, 200)
		c.mustDo("GET", pods+"/bound", "", "", 404)

		// Preconditions.
		svc := c.mustDo("POST", "/api/v1/namespaces/default/services", "", `{"metadata":{"name":"s"},"spec":{"ports":[{"port":80}]}}`, 201)
		r := c.do("DELETE", "/api/v1/namespaces/default/services/s", "", `{"preconditions":{"uid":"other"}}`)
		// kube's BeforeDelete checks the preconditions first, naming the kind.
		if r.code != 409 || !strings.Contains(string(r.body), `Operation cannot be fulfilled on Service \"s\": the UID in the precondition (other) does not match the UID in record`) {
			t.Errorf("uid precondition: %d %s", r.code, r.body)
		}
		r = c.do("DELETE", "/api/v1/namespaces/default/services/s", "", `{"preconditions":{"resourceVersion":"1"}}`)
		if r.code != 409 {
			t.Errorf("rv precondition: %d %s", r.code, r.body)
		}
		// kube-apiserver's service store returns the deleted object
		// (ReturnDeletedObject); a deployment's answers a Status, below.
		r = c.do("DELETE", "/api/v1/namespaces/default/services/s", "", fmt.Sprintf(`{"preconditions":{"uid":%q}}`, str(svc, "metadata.uid")))
		if got := r.obj(t); r.code != 200 || str(got, "kind") != "Service" || str(got, "metadata.name") != "s" || str(got, "metadata.uid") != str(svc, "metadata.uid") {
			t.Errorf("service delete: %d %s", r.code, r.body)
		}
		c.mustDo("GET", "/api/v1/namespaces/default/services/s", "", "", 404)

		// Finalizers keep the object until an update empties them.
		c.mustDo("POST", "/api/v1/namespaces/default/services", "", `{"metadata":{"name":"f","finalizers":["example.com/x"]},"spec":{"ports":[{"port":80}]}}`, 201)
		got = c.mustDo("DELETE", "/api/v1/namespaces/default/services/f", "", "", 200)
		if str(got, "metadata.deletionTimestamp") == "" || nested(got, "metadata.deletionGracePeriodSeconds") != float64(0) {
			t.Errorf("finalizer delete: %v", got["metadata"])
		}
		// kube's update validation of the metadata refuses it (422).
		r = c.do("PATCH", "/api/v1/namespaces/default/services/f", "application/merge-patch+json", `{"metadata":{"finalizers":["example.com/x","example.com/new"]}}`)
		if st := r.status(t); r.code != 422 || st.Reason != metav1.StatusReasonInvalid || st.Details == nil || len(st.Details.Causes) != 1 ||
			st.Details.Causes[0].Field != "metadata.finalizers" || !strings.Contains(st.Message, "no new finalizers can be added if the object is being deleted") {
			t.Errorf("new finalizer on deleting object: %d %s", r.code, r.body)
		}
		c.mustDo("PATCH", "/api/v1/namespaces/default/services/f", "application/merge-patch+json", `{"metadata":{"finalizers":null}}`, 200)
		c.mustDo("GET", "/api/v1/namespaces/default/services/f", "", "", 404)

		// Propagation: replicationcontrollers orphan by default, others
		// record the policy asked for.
		c.mustDo("POST", rcPath, "", rcBody("rc", 1), 201)
		got = c.mustDo("DELETE", rcPath+"/rc", "", "", 200)
		if fs := fmt.Sprint(nested(got, "metadata.finalizers")); fs != "[orphan]" || str(got, "metadata.deletionTimestamp") == "" {
			t.Errorf("rc default: %s", fs)
		}
		c.mustDo("POST", rcPath, "", rcBody("rc2", 1), 201)
		c.mustDo("DELETE", rcPath+"/rc2?propagationPolicy=Background", "", "", 200)
		c.mustDo("GET", rcPath+"/rc2", "", "", 404)
		const deps = "/apis/apps/v1/namespaces/default/deployments"
		c.mustDo("POST", deps, "", `{"metadata":{"name":"d"},"spec":`+deploymentSpec("d", "")+`}`, 201)
		got = c.mustDo("DELETE", deps+"/d", "", `{"propagationPolicy":"Foreground"}`, 200)
		if fs := fmt.Sprint(nested(got, "metadata.finalizers")); fs != "[foregroundDeletion]" {
			t.Errorf("foreground: %s", fs)
		}
		c.mustDo("POST", deps, "", `{"metadata":{"name":"d3","finalizers":["example.com/x"]},"spec":`+deploymentSpec("d", "")+`}`, 201)
		r = c.do("DELETE", deps+"/d3", "", `{"orphanDependents":false}`)
		if r.code != 202 {
			t.Errorf("orphanDependents=false on a kept object: %d", r.code)
		}
		c.mustDo("POST", deps, "", `{"metadata":{"name":"d2"},"spec":`+deploymentSpec("d", "")+`}`, 201)
		r = c.do("DELETE", deps+"/d2", "", "")
		if r.code != 200 || r.status(t).Status != "Success" {
			t.Errorf("deployment background: %d %s", r.code, r.body)
		}

		bad := []struct {
			name, path, body string
			code             int
		}{
			{"bad policy", "/api/v1/namespaces/default/pods/x?propagationPolicy=Sideways", "", 422},
			{"both", "/api/v1/namespaces/default/pods/x", `{"propagationPolicy":"Orphan","orphanDependents":true}`, 422},
			{"malformed", "/api/v1/namespaces/default/pods/x", `{`, 400},
			{"bad dryRun", "/api/v1/namespaces/default/pods/x", `{"dryRun":["Some"]}`, 422},
		}
		for _, b := range bad {
			r := c.do("DELETE", b.path, "", b.body)
			if r.code != b.code {
				t.Errorf("%s: %d %s", b.name, r.code, r.body)
			}
		}

		// DeleteCollection with a selector.
		for i := range 3 {
			c.mustDo("POST", "/api/v1/namespaces/default/endpoints", "", fmt.Sprintf(`{"metadata":{"name":"e%d","labels":{"del":"%v"}}}`, i, i < 2), 201)
		}
		c.mustDo("DELETE", "/api/v1/namespaces/default/endpoints?labelSelector=del%3Dtrue", "", "", 200)
		list := c.mustDo("GET", "/api/v1/namespaces/default/endpoints", "", "", 200)
		if items, _ := list["items"].([]any); len(items) != 1 {
			t.Errorf("after delete collection: %d left", len(items))
		}
	})
}

func TestGenerateNameClash(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		// The suffixes drawn, in order: the first create takes "bbbbb",
		// the second draws it again twice before "ccccc".
		tests := []struct {
			name     string
			suffixes []string
			code     int
			want     string
		}{
			{"first", []string{"bbbbb"}, 201, "web-bbbbb"},
			{"clash, drawn again", []string{"bbbbb", "bbbbb", "ccccc"}, 201, "web-ccccc"},
			{"every draw taken", []string{"bbbbb", "ccccc", "bbbbb", "ccccc", "bbbbb", "ccccc", "bbbbb", "ccccc"}, 409, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var mu sync.Mutex
				drawn := 0
				f := func(int) string {
					mu.Lock()
					defer mu.Unlock()
					s := tt.suffixes[drawn%len(tt.suffixes)]
					drawn++
					return s
				}
				suffixSource.Store(&f)
				t.Cleanup(func() { suffixSource.Store(nil) })
				resp := c.do("POST", "/api/v1/namespaces/default/pods", "", `{"metadata":{"generateName":"web-"},"spec":{"containers":[{"name":"c","image":"i"}]}}`)
				if resp.code != tt.code {
					t.Fatalf("code %d, want %d: %s", resp.code, tt.code, resp.body)
				}
				mu.Lock()
				defer mu.Unlock()
				if drawn != len(tt.suffixes) {
					t.Errorf("%d names drawn, want %d", drawn, len(tt.suffixes))
				}
				if tt.want != "" && !strings.Contains(string(resp.body), `"name":"`+tt.want+`"`) {
					t.Errorf("created %s, want name %s", resp.body, tt.want)
				}
			})
		}
	})
}
