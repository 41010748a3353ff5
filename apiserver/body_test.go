package apiserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/apiserver/internal/respond"
	"github.com/listwatch/listwatch/apiserver/internal/wire"
)

// protoBody encodes obj as a typed client-go client does: the Kubernetes
// protobuf envelope with apiVersion and kind.
func protoBody(t *testing.T, obj runtime.Object, apiVersion, kind string) string {
	t.Helper()
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		t.Fatal(err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gv.WithKind(kind))
	b, err := wire.EncodeProto(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestProtobufRequestBodies(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		replicas := int32(2)
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
			Spec: appsv1.DeploymentSpec{
				Replicas: &replicas,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}}},
				},
			},
		}
		const depPath = "/apis/apps/v1/namespaces/default/deployments"
		// The request kubectl create deployment sends.
		created := c.mustDo("POST", depPath+"?fieldManager=kubectl-create&fieldValidation=Strict", respond.MediaProtobuf, protoBody(t, dep, "apps/v1", "Deployment"), 201)
		if str(created, "kind") != "Deployment" || nested(created, "spec.replicas") != float64(2) || str(created, "metadata.uid") == "" {
			t.Errorf("create: %v", created)
		}
		if cs, _ := nested(created, "spec.template.spec.containers").([]any); len(cs) != 1 || str(cs[0].(map[string]any), "image") != "nginx" {
			t.Errorf("containers: %v", nested(created, "spec.template.spec.containers"))
		}

		// Update through protobuf, with the resourceVersion precondition.
		dep.ResourceVersion = str(created, "metadata.resourceVersion")
		replicas = 3
		up := c.mustDo("PUT", depPath+"/web", respond.MediaProtobuf, protoBody(t, dep, "apps/v1", "Deployment"), 200)
		if nested(up, "spec.replicas") != float64(3) || nested(up, "metadata.generation") != float64(2) {
			t.Errorf("update: %v", up)
		}
		if r := c.do("PUT", depPath+"/web", respond.MediaProtobuf, protoBody(t, dep, "apps/v1", "Deployment")); r.code != http.StatusConflict {
			t.Errorf("stale protobuf update: %d %s", r.code, r.body)
		}

		// Status subresource.
		dep.ResourceVersion = ""
		dep.Status = appsv1.DeploymentStatus{Replicas: 3, ReadyReplicas: 1}
		st := c.mustDo("PUT", depPath+"/web/status", respond.MediaProtobuf, protoBody(t, dep, "apps/v1", "Deployment"), 200)
		if nested(st, "status.readyReplicas") != float64(1) {
			t.Errorf("status: %v", st)
		}

		// Scale subresource: an autoscaling/v1 Scale.
		sc := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: autoscalingv1.ScaleSpec{Replicas: 5}}
		scaled := c.mustDo("PUT", depPath+"/web/scale", respond.MediaProtobuf, protoBody(t, sc, "autoscaling/v1", "Scale"), 200)
		if nested(scaled, "spec.replicas") != float64(5) {
			t.Errorf("scale: %v", scaled)
		}

		// A pod, and a protobuf DeleteOptions.
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
		c.mustDo("POST", "/api/v1/namespaces/default/pods", respond.MediaProtobuf, protoBody(t, pod, "v1", "Pod"), 201)
		policy := metav1.DeletePropagationForeground
		del := &metav1.DeleteOptions{PropagationPolicy: &policy}
		c.mustDo("POST", rcPath, "", rcBody("rc", 1), 201)
		r := c.do("DELETE", rcPath+"/rc", respond.MediaProtobuf, protoBody(t, del, "v1", "DeleteOptions"))
		if r.code != 200 {
			t.Fatalf("protobuf delete: %d %s", r.code, r.body)
		}
		if fins := nested(r.obj(t), "metadata.finalizers"); fins == nil || !strings.Contains(strings.Join(toStrings(fins), ","), metav1.FinalizerDeleteDependents) {
			t.Errorf("foreground policy from protobuf DeleteOptions not applied: %s", r.body)
		}

		bad := []struct {
			name, path, ct, body string
			code                 int
		}{
			{"garbage protobuf", "/api/v1/namespaces/default/pods", respond.MediaProtobuf, "\x00\x01garbage", 400},
			{"wrong kind in envelope", "/api/v1/namespaces/default/pods", respond.MediaProtobuf, protoBody(t, dep, "apps/v1", "Deployment"), 400},
			{"protobuf for a custom resource", "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos", respond.MediaProtobuf, protoBody(t, pod, "v1", "Pod"), 415},
			{"unknown content type", "/api/v1/namespaces/default/pods", "text/plain", `{"metadata":{"name":"x"}}`, 415},
		}
		for _, b := range bad {
			r := c.do("POST", b.path, b.ct, b.body)
			if r.code != b.code || int(r.status(t).Code) != b.code {
				t.Errorf("%s: %d %s, want %d", b.name, r.code, r.body, b.code)
			}
		}

		// YAML bodies decode too.
		c.mustDo("POST", "/api/v1/namespaces/default/pods", "application/yaml", "metadata:\n  name: fromyaml\nspec:\n  containers:\n  - name: c\n    image: i\n", 201)
	})
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func TestFieldValidation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		const pods = "/api/v1/namespaces/default/pods"
		const foos = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos"
		unknown := `{"metadata":{"name":%q},"spec":{"containers":[{"name":"c","image":"i","imagee":"typo"}],"bogus":1}}`
		unknownMsgs := []string{`unknown field "spec.bogus"`, `unknown field "spec.containers[0].imagee"`}
		tests := []struct {
			name, path, query, body string
			code                    int
			// errMsgs must all be in the Status message; warnings in the
			// Warning headers.
			errMsgs, warnings []string
		}{
			{name: "strict unknown", path: pods, query: "?fieldValidation=Strict", body: unknown, code: 400,
				errMsgs: append([]string{`Pod in version "v1" cannot be handled as a Pod: strict decoding error:`}, unknownMsgs...)},
			{name: "warn unknown", path: pods, query: "?fieldValidation=Warn", body: unknown, code: 201, warnings: unknownMsgs},
			{name: "default is warn", path: pods, body: unknown, code: 201, warnings: unknownMsgs},
			{name: "ignore unknown", path: pods, query: "?fieldValidation=Ignore", body: unknown, code: 201},
			{name: "strict duplicate", path: pods, query: "?fieldValidation=Strict", body: `{"metadata":{"name":%q,"labels":{"a":"1","a":"2"}}}`, code: 400,
				errMsgs: []string{`duplicate field "metadata.labels.a"`}},
			{name: "strict clean", path: pods, query: "?fieldValidation=Strict", body: `{"metadata":{"name":%q},"spec":{"containers":[{"name":"c","image":"i"}]}}`, code: 201},
			// As kube's ValidateCreateOptions (golden core-bad-options).
			{name: "invalid directive", path: pods, query: "?fieldValidation=Loud", body: `{"metadata":{"name":%q}}`, code: 422, errMsgs: []string{"fieldValidation: Unsupported value"}},
			{name: "custom resource keeps unknown spec fields", path: foos, query: "?fieldValidation=Strict", body: `{"metadata":{"name":%q},"spec":{"anything":1}}`, code: 201},
			{name: "custom resource unknown metadata", path: foos, query: "?fieldValidation=Strict", body: `{"metadata":{"name":%q,"labelz":{}}}`, code: 400,
				errMsgs: []string{`unknown field "metadata.labelz"`}},
			{name: "custom resource duplicate", path: foos, query: "?fieldValidation=Strict", body: `{"metadata":{"name":%q},"spec":{"a":1,"a":2}}`, code: 400,
				errMsgs: []string{`duplicate field "spec.a"`}},
		}
		for i, tt := range tests {
			name := "fv" + string(rune('a'+i))
			body := strings.Replace(tt.body, "%q", `"`+name+`"`, 1)
			r := c.do("POST", tt.path+tt.query, "", body)
			if r.code != tt.code {
				t.Errorf("%s: %d %s, want %d", tt.name, r.code, r.body, tt.code)
				continue
			}
			if len(tt.errMsgs) > 0 {
				msg := r.status(t).Message
				for _, m := range tt.errMsgs {
					if !strings.Contains(msg, m) {
						t.Errorf("%s: message %q lacks %q", tt.name, msg, m)
					}
				}
			}
			got := r.hdr.Values("Warning")
			if len(got) != len(tt.warnings) {
				t.Errorf("%s: warnings %q, want %q", tt.name, got, tt.warnings)
			}
			for _, w := range tt.warnings {
				if !containsWarning(got, w) {
					t.Errorf("%s: warnings %q lack %q", tt.name, got, w)
				}
			}
		}

		// Patches: unknown fields in the result, duplicates in the patch.
		c.mustDo("POST", pods, "", `{"metadata":{"name":"target"},"spec":{"containers":[{"name":"c","image":"i"}]}}`, 201)
		patches := []struct {
			name, query, ct, patch string
			code                   int
			warning, errMsg        string
		}{
			{"merge strict unknown", "?fieldValidation=Strict", "application/merge-patch+json", `{"spec":{"bogus":1}}`, 422, "", `unknown field "spec.bogus"`},
			{"smp strict unknown", "?fieldValidation=Strict", "application/strategic-merge-patch+json", `{"spec":{"containers":[{"name":"c","imagee":"x"}]}}`, 422, "", `unknown field "spec.containers[0].imagee"`},
			{"merge warn unknown", "?fieldValidation=Warn", "application/merge-patch+json", `{"spec":{"bogus":1}}`, 200, `unknown field "spec.bogus"`, ""},
			{"json patch strict unknown", "?fieldValidation=Strict", "application/json-patch+json", `[{"op":"add","path":"/spec/bogus","value":1}]`, 422, "", `unknown field "spec.bogus"`},
			{"merge strict duplicate", "?fieldValidation=Strict", "application/merge-patch+json", `{"metadata":{"labels":{"a":"1","a":"2"}}}`, 400, "", `duplicate field "metadata.labels.a"`},
			{"merge strict clean", "?fieldValidation=Strict", "application/merge-patch+json", `{"metadata":{"labels":{"a":"1"}}}`, 200, "", ""},
		}
		for _, p := range patches {
			r := c.do("PATCH", pods+"/target"+p.query, p.ct, p.patch)
			if r.code != p.code {
				t.Errorf("%s: %d %s, want %d", p.name, r.code, r.body, p.code)
				continue
			}
			if p.errMsg != "" && !strings.Contains(r.status(t).Message, p.errMsg) {
				t.Errorf("%s: message %s lacks %q", p.name, r.body, p.errMsg)
			}
			if p.warning != "" && !containsWarning(r.hdr.Values("Warning"), p.warning) {
				t.Errorf("%s: warnings %q lack %q", p.name, r.hdr.Values("Warning"), p.warning)
			}
		}
		got := c.mustDo("GET", pods+"/target", "", "", 200)
		if str(got, "metadata.labels.a") != "1" || nested(got, "spec.bogus") != nil {
			t.Errorf("after patches: %v", got)
		}
	})
}

// containsWarning reports whether a Warning header carries msg as its
// quoted text.
func containsWarning(values []string, msg string) bool {
	for _, v := range values {
		if strings.HasPrefix(v, "299 - ") && strings.Contains(v, strings.ReplaceAll(msg, `"`, `\"`)) {
			return true
		}
	}
	return false
}

func TestDryRun(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		const pods = "/api/v1/namespaces/default/pods"
		// Create: validated and answered, not stored.
		dry := c.mustDo("POST", pods+"?dryRun=All", "", `{"metadata":{"name":"dry"},"spec":{"containers":[{"name":"c","image":"i"}]}}`, 201)
		if str(dry, "metadata.name") != "dry" || str(dry, "metadata.uid") == "" || str(dry, "metadata.resourceVersion") != "" {
			t.Errorf("dry create: %v", dry)
		}
		c.mustDo("GET", pods+"/dry", "", "", 404)
		if r := c.do("POST", "/api/v1/namespaces/nope/pods?dryRun=All", "", podBody(`{"name":"x"}`, "")); r.code != 404 {
			t.Errorf("dry create in a missing namespace: %d", r.code)
		}
		if r := c.do("POST", pods+"?dryRun=All", "", podBody(`{"name":"Bad_Name"}`, "")); r.code != 422 {
			t.Errorf("dry create of an invalid name: %d", r.code)
		}

		real := c.mustDo("POST", pods, "", `{"metadata":{"name":"p","labels":{"v":"1"}},"spec":{"containers":[{"name":"c","image":"i"}]}}`, 201)
		rv := str(real, "metadata.resourceVersion")
		if r := c.do("POST", pods+"?dryRun=All", "", podBody(`{"name":"p"}`, "")); r.code != 409 {
			t.Errorf("dry create of an existing name: %d", r.code)
		}
		// Update and patch: the answer shows the change, storage keeps the old.
		up := c.mustDo("PUT", pods+"/p?dryRun=All", "", `{"metadata":{"name":"p","labels":{"v":"2"}},"spec":{"containers":[{"name":"c","image":"i"}]}}`, 200)
		pa := c.mustDo("PATCH", pods+"/p?dryRun=All", "application/merge-patch+json", `{"metadata":{"labels":{"v":"3"}}}`, 200)
		if str(up, "metadata.labels.v") != "2" || str(pa, "metadata.labels.v") != "3" {
			t.Errorf("dry update/patch answers: %v / %v", up, pa)
		}
		// Delete: answered, kept.
		c.mustDo("DELETE", pods+"/p?dryRun=All", "", "", 200)
		c.mustDo("DELETE", pods+"/p", "", `{"dryRun":["All"]}`, 200)
		got := c.mustDo("GET", pods+"/p", "", "", 200)
		if str(got, "metadata.labels.v") != "1" || str(got, "metadata.resourceVersion") != rv {
			t.Errorf("dry runs changed the stored pod: %v", got)
		}
		// 422 naming PatchOptions, as kube-apiserver answers
		// (golden ssa-dryrun:dry-run-bad-value for CreateOptions).
		for _, q := range []string{"?dryRun=Some", "?dryRun=All&dryRun=x"} {
			if r := c.do("PATCH", pods+"/p"+q, "application/merge-patch+json", `{}`); r.code != 422 || !strings.Contains(r.status(t).Message, `PatchOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value`) {
				t.Errorf("%s: %d %s", q, r.code, r.body)
			}
		}
		if r := c.do("DELETE", pods+"/p", "", `{"dryRun":["Some"]}`); r.code != 422 {
			t.Errorf("invalid dryRun in DeleteOptions: %d %s", r.code, r.body)
		}
	})
}

func TestBinding(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		const pods = "/api/v1/namespaces/default/pods"
		c.mustDo("POST", pods, "", `{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}`, 201)
		r := c.do("POST", pods+"/p/binding", "", `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"p","annotations":{"scheduled-by":"test"}},"target":{"kind":"Node","name":"n1"}}`)
		if st := r.status(t); r.code != 201 || st.Status != metav1.StatusSuccess || st.Code != 201 {
			t.Fatalf("bind: %d %s", r.code, r.body)
		}
		pod := c.mustDo("GET", pods+"/p", "", "", 200)
		conds, _ := nested(pod, "status.conditions").([]any)
		if str(pod, "spec.nodeName") != "n1" || str(pod, "metadata.annotations.scheduled-by") != "test" || len(conds) != 1 ||
			str(conds[0].(map[string]any), "type") != "PodScheduled" || str(conds[0].(map[string]any), "status") != "True" {
			t.Errorf("bound pod: %v", pod)
		}
		// Field selectors see the binding.
		list := c.mustDo("GET", pods+"?fieldSelector=spec.nodeName%3Dn1", "", "", 200)
		if items, _ := list["items"].([]any); len(items) != 1 {
			t.Errorf("pods on n1: %v", list["items"])
		}

		// Through protobuf, as a typed scheduler client sends it.
		c.mustDo("POST", pods, "", `{"metadata":{"name":"q"},"spec":{"containers":[{"name":"c","image":"i"}]}}`, 201)
		b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "default"}, Target: corev1.ObjectReference{Kind: "Node", Name: "n2"}}
		c.mustDo("POST", pods+"/q/binding", respond.MediaProtobuf, protoBody(t, b, "v1", "Binding"), 201)
		if got := c.mustDo("GET", pods+"/q", "", "", 200); str(got, "spec.nodeName") != "n2" {
			t.Errorf("protobuf binding: %v", got)
		}

		// A PodScheduled condition already True keeps its transition time
		// and loses its reason (kube's UpdatePodCondition; golden
		// core-pods:get-bound-prescheduled, whose masks hide the time); one
		// that was False moves to now.
		for _, tt := range []struct{ name, status string }{{"was-true", "True"}, {"was-false", "False"}} {
			c.mustDo("POST", pods, "", `{"metadata":{"name":"`+tt.name+`"},"spec":{"containers":[{"name":"c","image":"i"}]}}`, 201)
			c.mustDo("PATCH", pods+"/"+tt.name+"/status", "application/merge-patch+json",
				`{"status":{"conditions":[{"type":"PodScheduled","status":"`+tt.status+`","reason":"Before","lastTransitionTime":"2020-01-01T00:00:00Z"}]}}`, 200)
			c.mustDo("POST", pods+"/"+tt.name+"/binding", "", `{"metadata":{"name":"`+tt.name+`"},"target":{"name":"n1"}}`, 201)
			got := c.mustDo("GET", pods+"/"+tt.name, "", "", 200)
			conds, _ := nested(got, "status.conditions").([]any)
			if len(conds) != 1 {
				t.Fatalf("%s: conditions %v", tt.name, conds)
			}
			cond := conds[0].(map[string]any)
			kept := str(cond, "lastTransitionTime") == "2020-01-01T00:00:00Z"
			if str(cond, "status") != "True" || str(cond, "reason") != "" || kept != (tt.status == "True") {
				t.Errorf("%s: condition after binding %v", tt.name, cond)
			}
		}

		// The bindings resource binds the pod its Binding names.
		c.mustDo("POST", pods, "", `{"metadata":{"name":"by-collection"},"spec":{"containers":[{"name":"c","image":"i"}]}}`, 201)
		c.mustDo("POST", "/api/v1/namespaces/default/bindings", "", `{"metadata":{"name":"by-collection"},"target":{"name":"n3"}}`, 201)
		if got := c.mustDo("GET", pods+"/by-collection", "", "", 200); str(got, "spec.nodeName") != "n3" {
			t.Errorf("bound through bindings: %v", got)
		}

		c.mustDo("POST", pods, "", `{"metadata":{"name":"gone"},"spec":{"containers":[{"name":"c","image":"i"}]}}`, 201)
		c.mustDo("POST", pods, "", `{"metadata":{"name":"fin","finalizers":["x/y"]},"spec":{"containers":[{"name":"c","image":"i"}]}}`, 201)
		c.mustDo("DELETE", pods+"/fin", "", "", 200)
		bad := []struct {
			name, method, path, body string
			code                     int
			msg                      string
		}{
			{"already bound", "POST", pods + "/p/binding", `{"metadata":{"name":"p"},"target":{"name":"n2"}}`, 409, `pod p is already assigned to node "n1"`},
			{"missing pod", "POST", pods + "/nope/binding", `{"metadata":{"name":"nope"},"target":{"name":"n1"}}`, 404, `pods "nope" not found`},
			{"being deleted", "POST", pods + "/fin/binding", `{"metadata":{"name":"fin"},"target":{"name":"n1"}}`, 409, "is being deleted"},
			{"name mismatch", "POST", pods + "/gone/binding", `{"metadata":{"name":"other"},"target":{"name":"n1"}}`, 400, "does not match"},
			// kube's storage returns ValidatePodBinding's errors bare: 500
			// (golden core-bindings:subresource-no-target).
			{"no target", "POST", pods + "/gone/binding", `{"metadata":{"name":"gone"},"target":{}}`, 500, "target.name: Required value"},
			{"target not a node", "POST", pods + "/gone/binding", `{"metadata":{"name":"gone"},"target":{"kind":"Pod","name":"x"}}`, 500, "target.kind: Unsupported value"},
			{"no name", "POST", pods + "/gone/binding", `{"target":{"name":"n1"}}`, 400, "does not match"},
			{"bindings without a name", "POST", "/api/v1/namespaces/default/bindings", `{"target":{"name":"n1"}}`, 400, "Name parameter required."},
			{"bindings listed", "GET", "/api/v1/namespaces/default/bindings", "", 405, "does not allow this method"},
			{"uid precondition", "POST", pods + "/gone/binding", `{"metadata":{"name":"gone","uid":"nope"},"target":{"name":"n1"}}`, 409, "Precondition failed"},
			{"get", "GET", pods + "/gone/binding", "", 405, ""},
			{"not on rcs", "POST", rcPath + "/x/binding", `{}`, 404, ""},
		}
		for _, tt := range bad {
			r := c.do(tt.method, tt.path, "", tt.body)
			if r.code != tt.code || !strings.Contains(r.status(t).Message, tt.msg) {
				t.Errorf("%s: %d %s, want %d with %q", tt.name, r.code, r.body, tt.code, tt.msg)
			}
		}
		if got := c.mustDo("GET", pods+"/gone", "", "", 200); str(got, "spec.nodeName") != "" {
			t.Errorf("failed bindings bound the pod: %v", got)
		}
		// Discovery lists the subresource.
		res := c.mustDo("GET", "/api/v1", "", "", 200)
		if !bytes.Contains(mustJSON(t, res), []byte(`"name":"pods/binding"`)) {
			t.Errorf("discovery lacks pods/binding")
		}
	})
}
