package golden

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	v, ok := decodeJSON([]byte(s))
	if !ok {
		t.Fatalf("bad JSON %s", s)
	}
	return v
}

func TestMaskObject(t *testing.T) {
	m := NewMasker("golden-abcd1234")
	raw := decode(t, `{
		"kind": "Pod",
		"metadata": {"name": "web-x7k2p", "generateName": "web-", "namespace": "golden-abcd1234",
			"uid": "0b3b6f1e-8c1a-4f34-9d7e-2b1d0f7c9a11", "resourceVersion": "42",
			"creationTimestamp": "2026-01-02T03:04:05Z", "deletionTimestamp": null,
			"managedFields": [{"manager": "x", "time": "2026-01-02T03:04:05Z"}],
			"labels": {"kubernetes.io/metadata.name": "golden-abcd1234"}},
		"spec": {"volumes": [{"name": "kube-api-access-8fz2q"}],
			"template": {"metadata": {"creationTimestamp": null}}},
		"status": {"startTime": "2026-01-02T03:04:05Z", "conditions": [{"lastTransitionTime": "2026-01-02T03:04:05Z", "reason": "2026-01-02"}]}
	}`)
	m.Learn(raw.(map[string]any))
	got := m.Mask(raw)
	want := decode(t, `{
		"kind": "Pod",
		"metadata": {"name": "web-<suffix>", "generateName": "web-", "namespace": "{{ns}}",
			"uid": "<uid>", "resourceVersion": "<resourceVersion>",
			"creationTimestamp": "<timestamp>", "deletionTimestamp": null,
			"labels": {"kubernetes.io/metadata.name": "{{ns}}"}},
		"spec": {"volumes": [{"name": "kube-api-access-<suffix>"}],
			"template": {"metadata": {"creationTimestamp": null}}},
		"status": {"startTime": "<timestamp>", "conditions": [{"lastTransitionTime": "<timestamp>", "reason": "2026-01-02"}]}
	}`)
	if d := Diff(Response{Body: want}, Response{Body: got}); len(d) > 0 {
		t.Fatalf("masked:\n%s", strings.Join(d, "\n"))
	}
	// Masking is idempotent, so that goldens can be masked again.
	if again := NewMasker("").Mask(got); !reflect.DeepEqual(again, got) {
		t.Fatalf("masking a masked object changed it: %v", Diff(Response{Body: got}, Response{Body: again}))
	}
	// A later message quoting the generated name masks it too.
	if s := m.String(`pods "web-x7k2p" not found`); s != `pods "web-<suffix>" not found` {
		t.Errorf("message: %s", s)
	}
}

func TestMaskService(t *testing.T) {
	m := NewMasker("ns1")
	raw := decode(t, `{"kind": "Service", "spec": {"clusterIP": "10.0.0.57", "clusterIPs": ["10.0.0.57", "fd00::5"],
		"ports": [{"port": 80, "nodePort": 31234}], "healthCheckNodePort": 0, "externalIPs": ["192.0.2.1"]}}`)
	m.Learn(raw.(map[string]any))
	got := m.Mask(raw)
	want := decode(t, `{"kind": "Service", "spec": {"clusterIP": "<ipv4>", "clusterIPs": ["<ipv4>", "<ipv6>"],
		"ports": [{"port": 80, "nodePort": "<port>"}], "healthCheckNodePort": 0, "externalIPs": ["192.0.2.1"]}}`)
	if d := Diff(Response{Body: want}, Response{Body: got}); len(d) > 0 {
		t.Fatalf("masked:\n%s", strings.Join(d, "\n"))
	}
	for in, out := range map[string]string{
		`Invalid value: ["10.0.0.57"]: may not change once set`: `Invalid value: ["<ipv4>"]: may not change once set`,
		`IP 10.0.0.5 and 10.0.0.571`:                            `IP 10.0.0.5 and 10.0.0.571`,
		`port 31234 is already allocated`:                       `port <port> is already allocated`,
		`headless Services use "None"`:                          `headless Services use "None"`,
		`the ResourceVersion in the precondition (349) does not match the ResourceVersion in record (356).`: `the ResourceVersion in the precondition (<resourceVersion>) does not match the ResourceVersion in record (<resourceVersion>).`,
	} {
		if got := m.String(in); got != out {
			t.Errorf("String(%q) = %q, want %q", in, got, out)
		}
	}
}

func TestMaskEmbeddedJSON(t *testing.T) {
	obj := map[string]any{"metadata": map[string]any{
		"name": "x", "uid": "0b3b6f1e-8c1a-4f34-9d7e-2b1d0f7c9a11", "resourceVersion": "512",
		"creationTimestamp": "2026-11-25T16:31:45Z",
		"managedFields":     []any{map[string]any{"manager": "m", "fieldsV1": map[string]any{"f:data": map[string]any{}}}},
	}}
	js, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	quoted, err := json.Marshal(string(js))
	if err != nil {
		t.Fatal(err)
	}
	msg := `patch: Invalid value: ` + string(quoted) + `: illegal base64 data at input byte 0`
	got := NewMasker("").String(msg)
	want := `patch: Invalid value: "{\"metadata\":{\"creationTimestamp\":\"<timestamp>\",\"name\":\"x\",\"resourceVersion\":\"<resourceVersion>\",\"uid\":\"<uid>\"}}": illegal base64 data at input byte 0`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// managedFields first in its object: the comma after it goes.
	if got := dropEmbeddedManagedFields(`{"managedFields":[{"a":[1]}],"name":"x"}`); got != `{"name":"x"}` {
		t.Errorf("first member: %s", got)
	}
	// Unbalanced input is left alone rather than cut.
	if got := dropEmbeddedManagedFields(`{"x":1,"managedFields":[{"a":1}`); got != `{"x":1,"managedFields":[{"a":1}` {
		t.Errorf("unbalanced: %s", got)
	}
}

func TestDiff(t *testing.T) {
	want := Response{Code: 422, Body: decode(t, `{"kind":"Status","reason":"Invalid","details":{"causes":[{"field":"spec.containers","reason":"FieldValueRequired"}]}}`)}
	got := Response{Code: 201, Body: decode(t, `{"kind":"Status","reason":"Invalid","details":{"causes":[]},"extra":{"a.b/c":1}}`)}
	lines := Diff(want, got)
	for _, w := range []string{
		`status code: want 422, got 201`,
		`details.causes[0]: want {"field":"spec.containers","reason":"FieldValueRequired"}, got <absent>`,
		`extra: want <absent>, got {"a.b/c":1}`,
	} {
		found := false
		for _, l := range lines {
			found = found || l == w
		}
		if !found {
			t.Errorf("missing %q in\n%s", w, strings.Join(lines, "\n"))
		}
	}
	asObject := Response{Code: 201, Body: decode(t, `{"kind":"ConfigMap","metadata":{"name":"x"}}`)}
	if d := Diff(want, asObject); !reflect.DeepEqual(d, []string{"status code: want 422, got 201", "kind: want Status, got ConfigMap"}) {
		t.Errorf("Status for object: %v", d)
	}
	if d := Diff(want, want); len(d) != 0 {
		t.Errorf("equal answers differ: %v", d)
	}
}

func TestParseCaseRejects(t *testing.T) {
	for name, yaml := range map[string]string{
		"no steps":          `steps: []`,
		"unknown field":     "steps:\n- name: a\n  method: GET\n  path: /x\n  bogus: 1\n",
		"bad method":        "steps:\n- name: a\n  method: FETCH\n  path: /x\n",
		"relative path":     "steps:\n- name: a\n  method: GET\n  path: x\n",
		"duplicate":         "steps:\n- name: a\n  method: GET\n  path: /x\n- name: a\n  method: GET\n  path: /x\n",
		"forward reference": "steps:\n- name: a\n  method: GET\n  path: /x/{{name:b}}\n- name: b\n  method: GET\n  path: /x\n",
		"unknown holder":    "steps:\n- name: a\n  method: GET\n  path: /x/{{nope}}\n",
		"bad content type":  "steps:\n- name: a\n  method: PATCH\n  path: /x\n  contentType: jsonpatch\n",
		"body and raw body": "steps:\n- name: a\n  method: POST\n  path: /x\n  body: {}\n  rawBody: '{}'\n",
		"not yaml":          "steps: [",
	} {
		if _, err := ParseCase("t", []byte(yaml)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	c, err := ParseCase("t", []byte("steps:\n- name: a\n  method: POST\n  path: /x/{{ns}}\n  body: {num: 12345678901234567890}\n- name: b\n  method: GET\n  path: /x/{{name:a}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if js, _ := json.Marshal(c.Steps[0].Body); string(js) != `{"num":12345678901234567890}` {
		t.Errorf("large integer: %s", js)
	}
}

func TestDiffAlignsNamedLists(t *testing.T) {
	want := Response{Code: 200, Body: decode(t, `{"containers":[{"name":"a","image":"x"},{"name":"b","image":"y"}]}`)}
	got := Response{Code: 200, Body: decode(t, `{"containers":[{"name":"b","image":"y"},{"name":"a","image":"z"},{"name":"c"}]}`)}
	lines := Diff(want, got)
	wantLines := []string{
		`containers[name=a].image: want "x", got "z"`,
		`containers[name=c]: want <absent>, got {"name":"c"}`,
	}
	if !reflect.DeepEqual(lines, wantLines) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(wantLines, "\n"))
	}
	reordered := Response{Code: 200, Body: decode(t, `{"containers":[{"name":"b","image":"y"},{"name":"a","image":"x"}]}`)}
	if lines := Diff(want, reordered); len(lines) != 1 || !strings.Contains(lines[0], "order differs") {
		t.Errorf("reordered: %v", lines)
	}
}

func TestDiscoveryView(t *testing.T) {
	v := discoveryView(decode(t, `{"kind":"APIResourceList","groupVersion":"v1","resources":[
		{"name":"pods","singularName":"pod","namespaced":true,"kind":"Pod","verbs":["list","get"],"shortNames":["po"],"storageVersionHash":"x"},
		{"name":"pods/status","singularName":"","namespaced":true,"kind":"Pod","verbs":["patch","get"]}]}`))
	want := decode(t, `{"kind":"APIResourceList","groupVersion":"v1","resources":{
		"pods":{"singularName":"pod","namespaced":true,"kind":"Pod","verbs":["get","list"],"shortNames":["po"]},
		"pods/status":{"singularName":"","namespaced":true,"kind":"Pod","verbs":["get","patch"]}}}`)
	if d := Diff(Response{Body: want}, Response{Body: v}); len(d) > 0 {
		t.Errorf("view:\n%s", strings.Join(d, "\n"))
	}
}
