package apiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// The answers below are kube-apiserver v1.37's (test/golden holds them as
// recorded); these tests pin the server's side of each on its own.

func TestKubeStatusShapes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		const cms = "/api/v1/namespaces/default/configmaps"
		c.mustDo("POST", cms, "", `{"metadata":{"name":"a"}}`, http.StatusCreated)

		// A delete's Success Status carries no code.
		got := c.mustDo("DELETE", cms+"/a", "", "", http.StatusOK)
		if got["status"] != "Success" || got["code"] != nil || nested(got, "details.kind") != "configmaps" {
			t.Errorf("delete: %v", got)
		}

		// A path nothing serves is Go's plain 404; an unknown resource of a
		// built-in group version is a Status.
		for _, path := range []string{"/apis/nope.example.com/v1", "/apis/nope.example.com", "/apis/apps/v9/pods", "/nothing"} {
			r := c.do("GET", path, "", "")
			if r.code != http.StatusNotFound || string(r.body) != "404 page not found\n" || !strings.HasPrefix(r.hdr.Get("Content-Type"), "text/plain") {
				t.Errorf("GET %s: %d %q %s", path, r.code, r.body, r.hdr.Get("Content-Type"))
			}
		}
		for _, path := range []string{"/api/v1/widgets", "/apis/apps/v1/namespaces/default/widgets", "/api/v9"} {
			r := c.do("GET", path, "", "")
			if st := r.status(t); r.code != http.StatusNotFound || st.Message != "the server could not find the requested resource" {
				t.Errorf("GET %s: %d %s", path, r.code, r.body)
			}
		}

		// The legacy group's resource list has no apiVersion.
		if got := c.mustDo("GET", "/api/v1", "", "", http.StatusOK); got["apiVersion"] != nil || got["groupVersion"] != "v1" {
			t.Errorf("/api/v1: apiVersion %v, groupVersion %v", got["apiVersion"], got["groupVersion"])
		}
		if got := c.mustDo("GET", "/apis/apps/v1", "", "", http.StatusOK); got["apiVersion"] != "v1" {
			t.Errorf("/apis/apps/v1: apiVersion %v", got["apiVersion"])
		}
	})
}

func TestKubeDecodeErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		const cms = "/api/v1/namespaces/default/configmaps"
		tests := []struct{ name, body, want string }{
			{"malformed", `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": `,
				`the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: unexpected end of JSON input ({"apiVersion": "v1", "kind": " ...)`},
			{"wrong kind", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}`,
				`Secret in version "v1" cannot be handled as a ConfigMap: converting (v1.Secret) to (core.ConfigMap): unknown conversion`},
			{"wrong type", `{"metadata":{"name":"x"},"data":{"k":1}}`,
				`ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string`},
		}
		for _, tt := range tests {
			r := c.do("POST", cms, "", tt.body)
			if st := r.status(t); r.code != http.StatusBadRequest || st.Message != tt.want {
				t.Errorf("%s: %d %q, want 400 %q", tt.name, r.code, st.Message, tt.want)
			}
		}
	})
}

func TestKubePatchErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		const cm = "/api/v1/namespaces/default/configmaps/a"
		c.mustDo("POST", "/api/v1/namespaces/default/configmaps", "", `{"metadata":{"name":"a"},"data":{"k":"v"}}`, http.StatusCreated)
		c.mustDo("POST", "/api/v1/namespaces/default/secrets", "", `{"metadata":{"name":"s"},"data":{"k":"dg=="}}`, http.StatusCreated)
		const (
			jsonPatch  = "application/json-patch+json"
			mergePatch = "application/merge-patch+json"
			rejected   = "the server rejected our request due to an error in our request"
		)
		tests := []struct {
			name, path, ct, body string
			code                 int
			want                 string
		}{
			{"not a patch type", cm, "application/json", `{}`, 415, "415: Unsupported Media Type"},
			{"no content type", cm, "", ``, 415, "415: Unsupported Media Type"},
			{"not JSON", cm, mergePatch, `{"data": `, 400, "invalid JSON patch"},
			{"not a list", cm, jsonPatch, `{"op":"add"}`, 400, "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"},
			{"test fails", cm, jsonPatch, `[{"op":"test","path":"/data/k","value":"w"}]`, 422, rejected},
			{"bad op", cm, jsonPatch, `[{"op":"frobnicate","path":"/data/k"}]`, 422, rejected},
			{"missing object first", "/api/v1/namespaces/default/configmaps/nope", jsonPatch, `{"op":"add"}`, 404, `configmaps "nope" not found`},
		}
		for _, tt := range tests {
			r := c.do("PATCH", tt.path, tt.ct, tt.body)
			st := r.status(t)
			if r.code != tt.code || st.Message != tt.want {
				t.Errorf("%s: %d %q, want %d %q", tt.name, r.code, st.Message, tt.code, tt.want)
			}
			if tt.code == 415 && st.Details != nil && st.Details.Kind != "" {
				t.Errorf("%s: details %+v, want none", tt.name, st.Details)
			}
		}

		// A patched object the decoder refuses: 422 on the field "patch",
		// quoting the patched object as kube-apiserver encodes it.
		r := c.do("PATCH", "/api/v1/namespaces/default/secrets/s", jsonPatch, `[{"op":"add","path":"/data/bad","value":"!!"}]`)
		st := r.status(t)
		if r.code != http.StatusUnprocessableEntity || st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "patch" {
			t.Fatalf("undecodable: %d %s", r.code, r.body)
		}
		msg := st.Details.Causes[0].Message
		if !strings.HasPrefix(msg, `Invalid value: "{\"apiVersion\":\"v1\",\"data\":{\"bad\":\"!!\",\"k\":\"dg==\"},\"kind\":\"Secret\",\"metadata\":{\"name\":\"s\",\"namespace\":\"default\",`) ||
			!strings.HasSuffix(msg, `: illegal base64 data at input byte 0`) {
			t.Errorf("undecodable: cause %q", msg)
		}
		// The same of a strategic merge patch quotes the patch.
		r = c.do("PATCH", cm, "application/strategic-merge-patch+json", `{"data":{"k":5}}`)
		st = r.status(t)
		if r.code != http.StatusUnprocessableEntity || st.Details == nil || len(st.Details.Causes) != 1 ||
			!strings.HasPrefix(st.Details.Causes[0].Message, `Invalid value: "map[data:map[k:5]]": `) {
			t.Errorf("undecodable strategic merge patch: %d %s", r.code, r.body)
		}
	})
}

func TestKubeAdmission(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		// TaintNodesByCondition.
		node := c.mustDo("POST", "/api/v1/nodes", "", `{"metadata":{"name":"n1"}}`, http.StatusCreated)
		if taints := fmt.Sprint(nested(node, "spec.taints")); taints != "[map[effect:NoSchedule key:node.kubernetes.io/not-ready]]" {
			t.Errorf("node taints: %s", taints)
		}
		// StorageObjectInUseProtection.
		pvc := c.mustDo("POST", "/api/v1/namespaces/default/persistentvolumeclaims", "",
			`{"metadata":{"name":"c"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}`, http.StatusCreated)
		if fmt.Sprint(nested(pvc, "metadata.finalizers")) != "[kubernetes.io/pvc-protection]" {
			t.Errorf("claim finalizers: %v", nested(pvc, "metadata.finalizers"))
		}
		pv := c.mustDo("POST", "/api/v1/persistentvolumes", "",
			`{"metadata":{"name":"v"},"spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"],"hostPath":{"path":"/tmp"}}}`, http.StatusCreated)
		if fmt.Sprint(nested(pv, "metadata.finalizers")) != "[kubernetes.io/pv-protection]" {
			t.Errorf("volume finalizers: %v", nested(pv, "metadata.finalizers"))
		}
		// DefaultTolerationSeconds.
		pod := c.mustDo("POST", "/api/v1/namespaces/default/pods", "", podBody(`{"name":"p"}`, ""), http.StatusCreated)
		tol, _ := nested(pod, "spec.tolerations").([]any)
		if len(tol) != 2 || nested(tol[0].(map[string]any), "key") != "node.kubernetes.io/not-ready" || nested(tol[1].(map[string]any), "tolerationSeconds") != float64(300) {
			t.Errorf("pod tolerations: %v", tol)
		}
		// CertificateSubjectRestriction.
		r := c.do("POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests", "", fmt.Sprintf(
			`{"metadata":{"name":"masters"},"spec":{"request":%q,"signerName":"kubernetes.io/kube-apiserver-client","usages":["client auth"]}}`,
			csrPEM(t, "system:masters")))
		if st := r.status(t); r.code != http.StatusForbidden || !strings.Contains(st.Message, "use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed") {
			t.Errorf("CSR for system:masters: %d %s", r.code, r.body)
		}
	})
}

// csrPEM is a base64 PEM certificate request for CN=someone in
// organisation org.
func csrPEM(t *testing.T, org string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "someone", Organization: []string{org}},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

func TestKubeReadBack(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		// Stored as protobuf: an empty list comes back null.
		es := c.mustDo("POST", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", "",
			`{"metadata":{"name":"e"},"addressType":"IPv4","endpoints":[]}`, http.StatusCreated)
		if v, ok := es["endpoints"]; !ok || v != nil {
			t.Errorf("endpoints: %v (present %v), want null", v, ok)
		}
		// Defaulted when read back: a Job's labels come from its template,
		// a claim's phase is Pending.
		job := c.mustDo("POST", "/apis/batch/v1/namespaces/default/jobs", "",
			fmt.Sprintf(`{"metadata":{"name":"j"},"spec":{"template":{"spec":{"restartPolicy":"Never",%s}}}}`, testContainers), http.StatusCreated)
		if nested(job, "metadata.labels") == nil || str(job, "metadata.labels.job-name") != "j" {
			t.Errorf("job labels: %v", nested(job, "metadata.labels"))
		}
		if got := c.mustDo("GET", "/apis/batch/v1/namespaces/default/jobs/j", "", "", http.StatusOK); str(got, "metadata.labels.job-name") != "j" {
			t.Errorf("job labels read: %v", nested(got, "metadata.labels"))
		}
		pvc := c.mustDo("POST", "/api/v1/namespaces/default/persistentvolumeclaims", "",
			`{"metadata":{"name":"c"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}`, http.StatusCreated)
		if str(pvc, "status.phase") != "Pending" {
			t.Errorf("claim phase: %v", nested(pvc, "status"))
		}
		// Converted to the served version: embedded objects have their kind.
		sts := c.mustDo("POST", "/apis/apps/v1/namespaces/default/statefulsets", "", fmt.Sprintf(
			`{"metadata":{"name":"s"},"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{%s}},`+
				`"volumeClaimTemplates":[{"metadata":{"name":"d"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}]}}`,
			testContainers), http.StatusCreated)
		tmpl, _ := nested(sts, "spec.volumeClaimTemplates").([]any)
		if len(tmpl) != 1 || nested(tmpl[0].(map[string]any), "kind") != "PersistentVolumeClaim" || nested(tmpl[0].(map[string]any), "apiVersion") != "v1" {
			t.Errorf("volumeClaimTemplates: %v", tmpl)
		}
	})
}

func TestKubeStoreRules(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		const pods = "/api/v1/namespaces/default/pods"
		c.mustDo("POST", pods, "", podBody(`{"name":"p"}`, `"nodeName":"n1"`), http.StatusCreated)

		// An update of a pod waiting out its grace period keeps it.
		c.mustDo("DELETE", pods+"/p", "", "", http.StatusOK)
		c.mustDo("PATCH", pods+"/p", "application/merge-patch+json", `{"metadata":{"labels":{"late":"true"}}}`, http.StatusOK)
		if got := c.mustDo("GET", pods+"/p", "", "", http.StatusOK); str(got, "metadata.labels.late") != "true" || nested(got, "metadata.deletionTimestamp") == nil {
			t.Errorf("pod after update while terminating: %v", got["metadata"])
		}

		// Binding a bound pod: a conflict on pods/binding.
		c.mustDo("POST", pods, "", podBody(`{"name":"b"}`, `"nodeName":"n1"`), http.StatusCreated)
		r := c.do("POST", pods+"/b/binding", "", `{"metadata":{"name":"b"},"target":{"kind":"Node","name":"n2"}}`)
		if st := r.status(t); r.code != http.StatusConflict || st.Details == nil || st.Details.Kind != "pods/binding" {
			t.Errorf("bind again: %d %s", r.code, r.body)
		}

		// A Scale of no replicas has no spec.replicas, as its Go type says.
		c.mustDo("POST", "/apis/apps/v1/namespaces/default/replicasets", "", fmt.Sprintf(
			`{"metadata":{"name":"rs"},"spec":{"replicas":0,"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{%s}}}}`,
			testContainers), http.StatusCreated)
		sc := c.mustDo("GET", "/apis/apps/v1/namespaces/default/replicasets/rs/scale", "", "", http.StatusOK)
		if spec, _ := sc["spec"].(map[string]any); spec == nil || spec["replicas"] != nil || str(sc, "status.selector") != "a=b" {
			t.Errorf("scale: %v", sc)
		}
	})
}
