package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/client"
)

// examplesDir holds the examples the README walks through; the tests
// apply the very files a newcomer does.
var examplesDir = filepath.Join("..", "..", "examples")

// startCLICluster starts an API server on the memory backend that serves
// the example custom resources.
func startCLICluster(t *testing.T) *e2eCluster {
	t.Helper()
	return startTestCluster(t, backendMemory, filepath.Join(examplesDir, "custom-resources.yaml"))
}

// runCLI runs one of the client commands with the cluster's kubeconfig
// and returns what it printed.
func runCLI(t *testing.T, c *e2eCluster, stdin string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append(args, "--kubeconfig", c.kubeconfig)
	ctx := context.Background()
	var err error
	switch args[0] {
	case "apply":
		err = runApply(ctx, args[1:], strings.NewReader(stdin), &out, &errOut)
	case "delete":
		err = runDelete(ctx, args[1:], strings.NewReader(stdin), &out, &errOut)
	case "scale":
		err = runScale(ctx, args[1:], &out, &errOut)
	default:
		t.Fatalf("no command %q", args[0])
	}
	return out.String(), err
}

func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadManifests(t *testing.T) {
	tests := []struct {
		name      string
		data      string
		wantNames []string
		wantErr   string
	}{
		{name: "one yaml document", data: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", wantNames: []string{"a"}},
		{name: "several documents with empty ones", data: "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\n# only a comment\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b}\n", wantNames: []string{"a", "b"}},
		{name: "json", data: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`, wantNames: []string{"a"}},
		{name: "concatenated json", data: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}} {"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}}`, wantNames: []string{"a", "b"}},
		{name: "list", data: "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n", wantNames: []string{"a", "b"}},
		{name: "empty file", data: "", wantNames: nil},
		{name: "no kind", data: "apiVersion: v1\nmetadata: {name: a}\n", wantErr: "apiVersion and kind are required"},
		{name: "no name", data: "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n", wantErr: "metadata.name is required"},
		{name: "not yaml", data: "apiVersion: v1\nkind: [unclosed\n", wantErr: "document 1"},
		{name: "error names the document", data: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: ConfigMap\n", wantErr: "document 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, viaStdin := range []bool{false, true} {
				path := "-"
				if !viaStdin {
					path = writeFile(t, "m.yaml", tt.data)
				}
				objs, err := readManifests(path, strings.NewReader(tt.data))
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("stdin %v: err %v, want %q", viaStdin, err, tt.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatalf("stdin %v: %v", viaStdin, err)
				}
				var names []string
				for _, o := range objs {
					names = append(names, o.GetName())
				}
				if strings.Join(names, ",") != strings.Join(tt.wantNames, ",") {
					t.Errorf("stdin %v: names %v, want %v", viaStdin, names, tt.wantNames)
				}
			}
		})
	}
	if _, err := readManifests(filepath.Join(t.TempDir(), "missing.yaml"), nil); err == nil {
		t.Error("a missing file read without error")
	}
}

func TestApply(t *testing.T) {
	c := startCLICluster(t)
	ctx := context.Background()
	rcFile := filepath.Join(examplesDir, "rc.yaml")
	svcFile := filepath.Join(examplesDir, "service.yaml")
	widgetFile := filepath.Join(examplesDir, "widget.yaml")
	rcData, err := os.ReadFile(rcFile)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		stdin   string
		want    string
		wantErr string
	}{
		{name: "creates an rc", args: []string{"apply", "-f", rcFile}, want: "replicationcontroller/web created\n"},
		{name: "again is unchanged", args: []string{"apply", "-f", rcFile}, want: "replicationcontroller/web unchanged\n"},
		{name: "a changed file configures", args: []string{"apply", "-f", "-"}, stdin: strings.Replace(string(rcData), "replicas: 5", "replicas: 3", 1),
			want: "replicationcontroller/web configured\n"},
		{name: "several files", args: []string{"apply", "-f", svcFile, "-f", widgetFile},
			want: "service/web created\nwidget.example.listwatch.dev/gadget created\nwidget.example.listwatch.dev/gizmo created\n"},
		{name: "json from stdin into another namespace", args: []string{"apply", "-f", "-", "-n", "kube-public"},
			stdin: `{"apiVersion":"v1","kind":"Service","metadata":{"name":"db"},"spec":{"selector":{"app":"db"},"ports":[{"port":5432}]}}`, want: "service/db created\n"},
		{name: "namespace contradicting -n", args: []string{"apply", "-n", "default", "-f", "-"},
			stdin: "apiVersion: v1\nkind: Service\nmetadata: {name: x, namespace: kube-system}\n", wantErr: "does not match -n default"},
		{name: "kind the server lacks", args: []string{"apply", "-f", "-"},
			stdin: "apiVersion: example.com/v1\nkind: Nope\nmetadata: {name: x}\n", wantErr: `serves no kind "Nope"`},
		{name: "no file", args: []string{"apply"}, wantErr: "want -f FILE"},
		{name: "stray argument", args: []string{"apply", "-f", rcFile, "extra"}, wantErr: "want -f FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runCLI(t, c, tt.stdin, tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q (output %q)", err, tt.wantErr, out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out != tt.want {
				t.Errorf("output %q, want %q", out, tt.want)
			}
		})
	}
	// What the server holds is what was applied last.
	rc, err := c.rcs.Namespace("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *rc.Spec.Replicas != 3 || rc.Spec.Template.Spec.Containers[0].Image != "nginx:1.27" {
		t.Errorf("rc after apply: replicas %d, image %s", *rc.Spec.Replicas, rc.Spec.Template.Spec.Containers[0].Image)
	}
	svc, err := client.NewResource[*corev1.Service](c.client, corev1.SchemeGroupVersion.WithResource("services"), "kube-public").Get(ctx, "db", metav1.GetOptions{})
	if err != nil || svc.Spec.Selector["app"] != "db" {
		t.Errorf("service in kube-public: %v %v", svc, err)
	}
	widgets := client.NewUnstructured(c.client, schema.GroupVersionResource{Group: "example.listwatch.dev", Version: "v1", Resource: "widgets"}, "default")
	w, err := widgets.Get(ctx, "gizmo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if color, _, _ := unstructuredString(w.Object, "spec", "color"); color != "red" {
		t.Errorf("widget gizmo color %q, want red", color)
	}
}

func unstructuredString(obj map[string]any, path ...string) (string, bool, error) {
	cur := any(obj)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[p]
	}
	s, ok := cur.(string)
	return s, ok, nil
}

func TestResourceMapper(t *testing.T) {
	c := startCLICluster(t)
	m, err := newResourceMapper(context.Background(), c.client)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, want, wantErr string
	}{
		{name: "rc", want: "/v1, Resource=replicationcontrollers"},
		{name: "replicationcontrollers", want: "/v1, Resource=replicationcontrollers"},
		{name: "ReplicationController", want: "/v1, Resource=replicationcontrollers"},
		{name: "po", want: "/v1, Resource=pods"},
		{name: "deploy", want: "apps/v1, Resource=deployments"},
		{name: "wd", want: "example.listwatch.dev/v1, Resource=widgets"},
		{name: "widget.example.listwatch.dev", want: "example.listwatch.dev/v1, Resource=widgets"},
		{name: "widgets.v1.example.listwatch.dev", want: "example.listwatch.dev/v1, Resource=widgets"},
		{name: "widgets.other.dev", wantErr: "doesn't have a resource type"},
		{name: "nope", wantErr: "doesn't have a resource type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := m.forName(tt.name)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := r.GVR.String(); got != tt.want {
				t.Errorf("%s → %s, want %s", tt.name, got, tt.want)
			}
		})
	}
}
