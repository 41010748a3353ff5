package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubestorage "k8s.io/apiserver/pkg/storage"

	"github.com/listwatch/listwatch/apiserver/internal/registry"
)

// Paths of the objects the write-rule tests make in namespace default.
const (
	rulesPods = "/api/v1/namespaces/default/pods"
	rulesDeps = "/apis/apps/v1/namespaces/default/deployments"
	rulesFoos = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos"
)

// createRuleObjects makes pod a, replicationcontroller rc, deployment d
// and foo f.
func createRuleObjects(c *client) {
	c.t.Helper()
	c.mustDo("POST", rulesPods, "", `{"metadata":{"name":"a","labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"i"}]}}`, 201)
	c.mustDo("POST", rcPath, "", rcBody("rc", 1), 201)
	c.mustDo("POST", rulesDeps, "", `{"metadata":{"name":"d"},"spec":`+deploymentSpec("d", "")+`}`, 201)
	c.mustDo("POST", rulesFoos, "", `{"metadata":{"name":"f"},"spec":{"replicas":1}}`, 201)
}

// storedUID is a placeholder for the stored object's uid in a test body.
const storedUID = "<stored>"

// putBody is a PUT body made of the stored object cur with metadata.uid
// set to uid (storedUID: left as stored; "": removed) and a label set.
func putBody(t *testing.T, cur map[string]any, uid string) string {
	t.Helper()
	var obj map[string]any
	b, _ := json.Marshal(cur)
	if err := json.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	md := obj["metadata"].(map[string]any)
	switch uid {
	case storedUID:
	case "":
		delete(md, "uid")
	default:
		md["uid"] = uid
	}
	labels, _ := md["labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
	}
	// A value of its own for each stored version: the write changes
	// something.
	labels["written"] = "rv" + str(cur, "metadata.resourceVersion")
	md["labels"] = labels
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A PUT body's metadata.uid is a precondition, as in kube-apiserver (the
// uid of an update's object is a storage precondition, checked before the
// update runs): another uid than the stored one is 409 Conflict, before the
// resourceVersion is looked at, on the main resource and on /status alike,
// with kube-apiserver's storage error quoting its etcd key. On a missing
// object it is a precondition only where an update would create one
// (Endpoints: the failed precondition, nothing created); elsewhere the
// answer is NotFound. An empty uid is the stored one. A Scale's uid is
// checked likewise. test/golden records these from kube-apiserver.
func TestUpdateUIDPrecondition(t *testing.T) {
	const conflictOn = "Operation cannot be fulfilled on "
	plain := func(sent string) func(stored string) string {
		return func(stored string) string {
			return "Precondition failed: UID in precondition: " + sent + ", UID in object meta: " + stored
		}
	}
	// precondition is kube-apiserver's storage error for the object under
	// its etcd key (test/golden: *-other-uid, update-missing-with-uid).
	precondition := func(key, sent string) func(stored string) string {
		return func(stored string) string {
			return kubestorage.NewInvalidObjError(key, plain(sent)(stored)).Error()
		}
	}
	const (
		podKey = "/registry/pods/default/a"
		rcKey  = "/registry/controllers/default/rc"
		depKey = "/registry/deployments/default/d"
		fooKey = "/registry/samplecontroller.k8s.io/foos/default/f"
		epKey  = "/registry/services/endpoints/default/e"
	)
	tests := []struct {
		name   string
		method string
		path   string // of the request
		read   string // the object the body is made of, unchanged unless changes
		body   func(t *testing.T, cur map[string]any) string
		code   int
		// msg is the Status message given the stored uid; "" for success.
		msg     func(stored string) string
		prefix  string // of msg: the Conflict's resource and name
		changes bool
		absent  string // an object that must still be missing after
	}{
		{
			name: "pod, another uid", method: "PUT", path: rulesPods + "/a", read: rulesPods + "/a",
			body: func(t *testing.T, cur map[string]any) string { return putBody(t, cur, "other") },
			code: 409, prefix: conflictOn + `pods "a": `, msg: precondition(podKey, "other"),
		},
		{
			name: "pod, the stored uid", method: "PUT", path: rulesPods + "/a", read: rulesPods + "/a",
			body: func(t *testing.T, cur map[string]any) string { return putBody(t, cur, storedUID) },
			code: 200, changes: true,
		},
		{
			name: "pod, no uid", method: "PUT", path: rulesPods + "/a", read: rulesPods + "/a",
			body: func(t *testing.T, cur map[string]any) string { return putBody(t, cur, "") },
			code: 200, changes: true,
		},
		{
			name: "pod, another uid and a stale resourceVersion: the uid is checked first", method: "PUT",
			path: rulesPods + "/a", read: rulesPods + "/a",
			body: func(t *testing.T, cur map[string]any) string {
				b := putBody(t, cur, "other")
				return strings.Replace(b, `"resourceVersion":"`, `"resourceVersion":"1`, 1)
			},
			code: 409, prefix: conflictOn + `pods "a": `, msg: precondition(podKey, "other"),
		},
		{
			name: "pod, another uid, dry run", method: "PUT", path: rulesPods + "/a?dryRun=All", read: rulesPods + "/a",
			body: func(t *testing.T, cur map[string]any) string { return putBody(t, cur, "other") },
			code: 409, prefix: conflictOn + `pods "a": `, msg: precondition(podKey, "other"),
		},
		{
			name: "pods/status, another uid", method: "PUT", path: rulesPods + "/a/status", read: rulesPods + "/a",
			body: func(t *testing.T, cur map[string]any) string { return putBody(t, cur, "other") },
			code: 409, prefix: conflictOn + `pods "a": `, msg: precondition(podKey, "other"),
		},
		{
			name: "replicationcontroller, another uid", method: "PUT", path: rcPath + "/rc", read: rcPath + "/rc",
			body: func(t *testing.T, cur map[string]any) string { return putBody(t, cur, "other") },
			code: 409, prefix: conflictOn + `replicationcontrollers "rc": `, msg: precondition(rcKey, "other"),
		},
		{
			name: "deployment, another uid", method: "PUT", path: rulesDeps + "/d", read: rulesDeps + "/d",
			body: func(t *testing.T, cur map[string]any) string { return putBody(t, cur, "other") },
			code: 409, prefix: conflictOn + `deployments.apps "d": `, msg: precondition(depKey, "other"),
		},
		{
			name: "deployments/status, another uid", method: "PUT", path: rulesDeps + "/d/status", read: rulesDeps + "/d",
			body: func(t *testing.T, cur map[string]any) string { return putBody(t, cur, "other") },
			code: 409, prefix: conflictOn + `deployments.apps "d": `, msg: precondition(depKey, "other"),
		},
		{
			name: "custom resource, another uid", method: "PUT", path: rulesFoos + "/f", read: rulesFoos + "/f",
			body: func(t *testing.T, cur map[string]any) string { return putBody(t, cur, "other") },
			code: 409, prefix: conflictOn + `foos.samplecontroller.k8s.io "f": `, msg: precondition(fooKey, "other"),
		},
		{
			// The custom resource status rule would put the stored uid
			// back; the precondition comes first.
			name: "custom resource status, another uid", method: "PUT", path: rulesFoos + "/f/status", read: rulesFoos + "/f",
			body: func(t *testing.T, cur map[string]any) string { return putBody(t, cur, "other") },
			code: 409, prefix: conflictOn + `foos.samplecontroller.k8s.io "f": `, msg: precondition(fooKey, "other"),
		},
		{
			name: "custom resource, no uid", method: "PUT", path: rulesFoos + "/f", read: rulesFoos + "/f",
			body: func(t *testing.T, cur map[string]any) string { return putBody(t, cur, "") },
			code: 200, changes: true,
		},
		{
			name: "missing pod, a uid: not found, as an update creates no pod", method: "PUT", path: rulesPods + "/absent", read: rulesPods + "/a",
			body: func(t *testing.T, cur map[string]any) string {
				return strings.Replace(putBody(t, cur, "other"), `"name":"a"`, `"name":"absent"`, 1)
			},
			code: 404, prefix: "", msg: func(string) string { return `pods "absent" not found` },
			absent: rulesPods + "/absent",
		},
		{
			name: "missing pods/status, a uid", method: "PUT", path: rulesPods + "/absent/status", read: rulesPods + "/a",
			body: func(t *testing.T, cur map[string]any) string {
				return strings.Replace(putBody(t, cur, "other"), `"name":"a"`, `"name":"absent"`, 1)
			},
			code: 404, prefix: "", msg: func(string) string { return `pods "absent" not found` },
			absent: rulesPods + "/absent",
		},
		{
			name: "missing pod, no uid", method: "PUT", path: rulesPods + "/absent", read: rulesPods + "/a",
			body: func(t *testing.T, cur map[string]any) string {
				return strings.Replace(putBody(t, cur, ""), `"name":"a"`, `"name":"absent"`, 1)
			},
			code: 404, prefix: "", msg: func(string) string { return `pods "absent" not found` },
			absent: rulesPods + "/absent",
		},
		{
			name: "missing endpoints, a uid: not created", method: "PUT", path: "/api/v1/namespaces/default/endpoints/e", read: rulesPods + "/a",
			body: func(*testing.T, map[string]any) string { return `{"metadata":{"name":"e","uid":"other"}}` },
			code: 409, prefix: conflictOn + `endpoints "e": `, msg: func(string) string { return precondition(epKey, "other")("") },
			absent: "/api/v1/namespaces/default/endpoints/e",
		},
		{
			name: "scale, another uid", method: "PUT", path: rcPath + "/rc/scale", read: rcPath + "/rc",
			body: func(*testing.T, map[string]any) string {
				return `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"rc","uid":"other"},"spec":{"replicas":4}}`
			},
			code: 409, prefix: conflictOn + `replicationcontrollers "rc": `, msg: precondition(rcKey, "other"),
		},
		{
			name: "missing scale, a uid", method: "PUT", path: rcPath + "/absent/scale", read: rcPath + "/rc",
			body: func(*testing.T, map[string]any) string {
				return `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"absent","uid":"other"},"spec":{"replicas":4}}`
			},
			code: 404, prefix: "", msg: func(string) string { return `replicationcontrollers "absent" not found` },
			absent: rcPath + "/absent",
		},
		{
			name: "scale, the stored uid", method: "PUT", path: rcPath + "/rc/scale", read: rcPath + "/rc",
			body: func(_ *testing.T, cur map[string]any) string {
				return fmt.Sprintf(`{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"rc","uid":%q},"spec":{"replicas":4}}`, str(cur, "metadata.uid"))
			},
			code: 200, changes: true,
		},
		{
			// kube-apiserver's scale subresource checks the uid of the
			// Scale a patch makes too, as a conflict on <plural>/scale.
			name: "scale patch changing the uid", method: "PATCH", path: rcPath + "/rc/scale", read: rcPath + "/rc",
			body: func(*testing.T, map[string]any) string { return `{"metadata":{"uid":"other"},"spec":{"replicas":5}}` },
			code: 409, prefix: conflictOn + `replicationcontrollers/scale "rc": `, msg: plain("other"),
		},
	}
	forEachBackend(t, func(t *testing.T, c *client) {
		createRuleObjects(c)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				c := *c
				c.t = t
				before := c.mustDo("GET", tt.read, "", "", 200)
				ct := ""
				if tt.method == "PATCH" {
					ct = "application/merge-patch+json"
				}
				r := c.do(tt.method, tt.path, ct, tt.body(t, before))
				if r.code != tt.code {
					t.Fatalf("%s %s: %d %s, want %d", tt.method, tt.path, r.code, r.body, tt.code)
				}
				uid := str(before, "metadata.uid")
				if tt.msg != nil {
					st := r.status(t)
					if want := tt.prefix + tt.msg(uid); st.Message != want || int(st.Code) != tt.code {
						t.Errorf("Status %d %q, want %d %q", st.Code, st.Message, tt.code, want)
					}
					if tt.code == 409 && st.Reason != metav1.StatusReasonConflict {
						t.Errorf("reason %q, want Conflict", st.Reason)
					}
				}
				after := c.mustDo("GET", tt.read, "", "", 200)
				if str(after, "metadata.uid") != uid {
					t.Errorf("uid %s became %s", uid, str(after, "metadata.uid"))
				}
				if moved := str(after, "metadata.resourceVersion") != str(before, "metadata.resourceVersion"); moved != tt.changes {
					t.Errorf("resourceVersion %s -> %s, want a change: %v", str(before, "metadata.resourceVersion"), str(after, "metadata.resourceVersion"), tt.changes)
				}
				if tt.absent != "" {
					c.mustDo("GET", tt.absent, "", "", http.StatusNotFound)
				}
			})
		}
	})
}

// A patch that changes metadata.uid is 422 Invalid with a field error on
// metadata.uid, as kube-apiserver's update validation of object metadata
// answers (a patch carries no uid precondition): for every patch type, on
// the main resource and on /status of built-in resources. A patch that
// drops the uid, or sets the stored one, is fine. On a custom resource's
// /status, whose rule keeps everything but status, the uid a patch sets is
// dropped, as there.
func TestPatchUID(t *testing.T) {
	const (
		merge     = "application/merge-patch+json"
		strategic = "application/strategic-merge-patch+json"
		jsonPatch = "application/json-patch+json"
	)
	tests := []struct {
		name    string
		path    string
		ct      string
		patch   string
		code    int
		changes bool
	}{
		{"pod, merge", rulesPods + "/a", merge, `{"metadata":{"uid":"other"}}`, 422, false},
		{"pod, strategic", rulesPods + "/a", strategic, `{"metadata":{"uid":"other","labels":{"x":"y"}}}`, 422, false},
		{"pod, json patch", rulesPods + "/a", jsonPatch, `[{"op":"replace","path":"/metadata/uid","value":"other"}]`, 422, false},
		{"pods/status, merge", rulesPods + "/a/status", merge, `{"metadata":{"uid":"other"},"status":{"phase":"Running"}}`, 422, false},
		{"replicationcontrollers/status, strategic", rcPath + "/rc/status", strategic, `{"metadata":{"uid":"other"}}`, 422, false},
		{"deployment, merge", rulesDeps + "/d", merge, `{"metadata":{"uid":"other"}}`, 422, false},
		{"custom resource, merge", rulesFoos + "/f", merge, `{"metadata":{"uid":"other"}}`, 422, false},
		{"custom resource, json patch", rulesFoos + "/f", jsonPatch, `[{"op":"replace","path":"/metadata/uid","value":"other"}]`, 422, false},
		{"custom resource status: the uid is dropped", rulesFoos + "/f/status", merge, `{"metadata":{"uid":"other"}}`, 200, false},
		{"custom resource status: dropped, status written", rulesFoos + "/f/status", merge, `{"metadata":{"uid":"other"},"status":{"ready":true}}`, 200, true},
		{"pod, uid removed by merge", rulesPods + "/a", merge, `{"metadata":{"uid":null}}`, 200, false},
		{"pod, uid removed by json patch", rulesPods + "/a", jsonPatch, `[{"op":"remove","path":"/metadata/uid"}]`, 200, false},
		{"pod, uid removed, a label set", rulesPods + "/a/status", merge, `{"metadata":{"uid":null,"labels":{"x":"z"}}}`, 200, true},
	}
	forEachBackend(t, func(t *testing.T, c *client) {
		createRuleObjects(c)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				c := *c
				c.t = t
				read := strings.TrimSuffix(tt.path, "/status")
				before := c.mustDo("GET", read, "", "", 200)
				r := c.do("PATCH", tt.path, tt.ct, tt.patch)
				if r.code != tt.code {
					t.Fatalf("%d %s, want %d", r.code, r.body, tt.code)
				}
				if tt.code == 422 {
					st := r.status(t)
					want := `metadata.uid: Invalid value: "other": field is immutable`
					// A custom resource's cause comes twice, as from
					// kube-apiserver: BeforeUpdate and the strategy's
					// ValidateUpdate both check the metadata.
					onUID := st.Details != nil && len(st.Details.Causes) > 0
					for i := 0; onUID && i < len(st.Details.Causes); i++ {
						onUID = st.Details.Causes[i].Field == "metadata.uid"
					}
					if st.Reason != metav1.StatusReasonInvalid || !strings.HasSuffix(st.Message, " is invalid: "+want) || !onUID {
						t.Errorf("Status %s, want Invalid %q with causes on metadata.uid", r.body, want)
					}
				}
				after := c.mustDo("GET", read, "", "", 200)
				if str(after, "metadata.uid") != str(before, "metadata.uid") {
					t.Errorf("uid %s became %s", str(before, "metadata.uid"), str(after, "metadata.uid"))
				}
				if moved := str(after, "metadata.resourceVersion") != str(before, "metadata.resourceVersion"); moved != tt.changes {
					t.Errorf("resourceVersion %s -> %s, want a change: %v", str(before, "metadata.resourceVersion"), str(after, "metadata.resourceVersion"), tt.changes)
				}
			})
		}
	})
}

// A /status write keeps what kube-apiserver's status strategy of the
// resource keeps (PrepareForUpdate): spec always; of the metadata, the
// ownerReferences of a pod and the labels of a deployment; everything but
// status on a custom resource. The rest of the metadata the write sent is
// stored, by PUT and by patch alike, but for the kubernetes.io/metadata.name
// label kube's namespace strategy keeps on every namespace; generation does
// not move.
func TestStatusUpdateMetadata(t *testing.T) {
	const owner = `{"apiVersion":"v1","kind":"ConfigMap","name":"%s","uid":"%s"}`
	type kept struct{ labels, annotations, finalizers, owners bool }
	tests := []struct {
		name   string
		path   string // the collection
		create string // spec of the object made
		spec   string // the spec the write sends, to be ignored
		status string // the status the write sends
		check  string // a path into the stored status that the write set
		kept   kept   // the metadata kept from the stored object
		// nameLabel: the strategy labels the object
		// kubernetes.io/metadata.name=<its name>, whatever the write sends.
		nameLabel bool
	}{
		{
			name: "pods", path: rulesPods,
			create: `{"containers":[{"name":"c","image":"i"}]}`, spec: `{"containers":[{"name":"c","image":"changed"}]}`,
			status: `{"phase":"Running"}`, check: "status.phase",
			kept: kept{owners: true},
		},
		{
			name: "namespaces", path: "/api/v1/namespaces",
			create: `{"finalizers":["kubernetes"]}`, spec: `{}`,
			status: `{"phase":"Active","conditions":[{"type":"NamespaceDeletionDiscoveryFailure","status":"False"}]}`, check: "status.conditions",
			nameLabel: true,
		},
		{
			name: "services", path: "/api/v1/namespaces/default/services",
			// A load balancer's ingress is only valid on a service of
			// type LoadBalancer.
			create: `{"type":"LoadBalancer","ports":[{"port":80}]}`, spec: `{"type":"LoadBalancer","ports":[{"port":81}]}`,
			status: `{"loadBalancer":{"ingress":[{"ip":"10.0.0.9"}]}}`, check: "status.loadBalancer.ingress",
		},
		{
			name: "replicationcontrollers", path: rcPath,
			create: rcSpec(`"replicas":1`), spec: rcSpec(`"replicas":5`),
			status: `{"replicas":1,"observedGeneration":1}`, check: "status.observedGeneration",
		},
		{
			name: "deployments", path: rulesDeps,
			create: deploymentSpec("d", ""),
			spec:   deploymentSpec("d", `"replicas":5`),
			status: `{"replicas":1,"observedGeneration":1}`, check: "status.observedGeneration",
			kept: kept{labels: true},
		},
		{
			name: "custom resource", path: rulesFoos,
			create: `{"replicas":1}`, spec: `{"replicas":2}`,
			status: `{"ready":true}`, check: "status.ready",
			kept: kept{labels: true, annotations: true, finalizers: true, owners: true},
		},
	}
	writes := []struct {
		name string
		do   func(c *client, path string, cur map[string]any, meta, spec, status string) map[string]any
	}{
		{"put", func(c *client, path string, cur map[string]any, meta, spec, status string) map[string]any {
			body := fmt.Sprintf(`{"metadata":%s,"spec":%s,"status":%s}`, meta, spec, status)
			// The write names the stored resourceVersion.
			body = strings.Replace(body, `{"metadata":{`, fmt.Sprintf(`{"metadata":{"resourceVersion":%q,`, str(cur, "metadata.resourceVersion")), 1)
			return c.mustDo("PUT", path+"/status", "", body, 200)
		}},
		{"merge patch", func(c *client, path string, _ map[string]any, meta, spec, status string) map[string]any {
			return c.mustDo("PATCH", path+"/status", "application/merge-patch+json", fmt.Sprintf(`{"metadata":%s,"spec":%s,"status":%s}`, meta, spec, status), 200)
		}},
	}
	forEachBackend(t, func(t *testing.T, c *client) {
		for _, w := range writes {
			for _, tt := range tests {
				t.Run(w.name+"/"+tt.name, func(t *testing.T) {
					c := *c
					c.t = t
					name := strings.ReplaceAll(w.name, " ", "-") + "-" + strings.ReplaceAll(tt.name, " ", "-")
					path := tt.path + "/" + name
					created := c.mustDo("POST", tt.path, "", fmt.Sprintf(`{"metadata":{"name":%q,"labels":{"a":"1"},"annotations":{"n":"1"},"finalizers":["example.com/f1"],"ownerReferences":[`+owner+`]},"spec":%s}`,
						name, "o1", "u1", tt.create), 201)
					meta := fmt.Sprintf(`{"name":%q,"labels":{"a":"2","new":"x"},"annotations":{"n":"2"},"finalizers":["example.com/f2"],"ownerReferences":[`+owner+`]}`, name, "o2", "u2")
					got := w.do(&c, path, created, meta, tt.spec, tt.status)
					stored := c.mustDo("GET", path, "", "", 200)
					if str(got, "metadata.resourceVersion") != str(stored, "metadata.resourceVersion") {
						t.Errorf("answered resourceVersion %s, stored %s", str(got, "metadata.resourceVersion"), str(stored, "metadata.resourceVersion"))
					}
					written := map[string]any{
						"labels":          map[string]any{"a": "2", "new": "x"},
						"annotations":     map[string]any{"n": "2"},
						"finalizers":      []any{"example.com/f2"},
						"ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "o2", "uid": "u2"}},
					}
					for field, keep := range map[string]bool{"labels": tt.kept.labels, "annotations": tt.kept.annotations, "finalizers": tt.kept.finalizers, "ownerReferences": tt.kept.owners} {
						want := written[field]
						if keep {
							want = nested(created, "metadata."+field)
						} else if field == "labels" && tt.nameLabel {
							want = map[string]any{"a": "2", "new": "x", "kubernetes.io/metadata.name": name}
						}
						if g := nested(stored, "metadata."+field); !reflect.DeepEqual(g, want) {
							t.Errorf("metadata.%s = %v, want %v (kept: %v)", field, g, want, keep)
						}
					}
					if !reflect.DeepEqual(stored["spec"], created["spec"]) {
						t.Errorf("spec %v, want %v", stored["spec"], created["spec"])
					}
					if nested(stored, tt.check) == nil {
						t.Errorf("%s not written: %v", tt.check, stored["status"])
					}
					if !reflect.DeepEqual(nested(stored, "metadata.generation"), nested(created, "metadata.generation")) {
						t.Errorf("generation %v -> %v", nested(created, "metadata.generation"), nested(stored, "metadata.generation"))
					}
				})
			}
		}
	})
}

// Every built-in resource has Kubernetes' rules (the registry refuses a
// resource without them: registry.TestAddRefusesResourcesWithoutRules).
func TestStatusRuleDeclared(t *testing.T) {
	for _, r := range registry.Builtins() {
		if r.Kube == nil {
			t.Errorf("%s: no Kubernetes rules", r.Plural)
		}
	}
}
