package kube

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/resources"
)

// Every resource of the registry has Kubernetes' strategy, and a printer
// that prints a minimal object of it without failing.
func TestEveryBuiltinHasRules(t *testing.T) {
	for _, def := range resources.Builtin.All() {
		t.Run(def.GVR().String(), func(t *testing.T) {
			k, ok := For(def.GVR(), def.GVK)
			if !ok {
				t.Fatal("no strategy")
			}
			if def.HasSubresource(resources.Status) {
				if _, err := k.updateStrategy(Request{Subresource: "status"}); err != nil {
					t.Errorf("status subresource without a status strategy: %v", err)
				}
			}
			p, err := k.Printer()
			if err != nil {
				t.Fatal(err)
			}
			name := -1
			for i, c := range p.Columns() {
				if c.Name == "Name" {
					name = i
				}
			}
			if name < 0 {
				t.Fatalf("no Name column in %d columns", len(p.Columns()))
			}
			u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "x", "namespace": "ns"}}}
			row, err := p.Row(u)
			if err != nil {
				t.Fatal(err)
			}
			if len(row.Cells) != len(p.Columns()) || row.Cells[name] != "x" {
				t.Errorf("row %v for %d columns, Name at %d", row.Cells, len(p.Columns()), name)
			}
		})
	}
}

func pods(t *testing.T) *Rules {
	t.Helper()
	r, _ := resources.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "pods"})
	k, ok := For(r.GVR(), r.GVK)
	if !ok {
		t.Fatal("no pod rules")
	}
	return k
}

// newPod is a pod as the server hands it to Create: uid and
// creationTimestamp set.
func newPod(spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "namespace": "ns", "uid": "0b4b2c4e-0000-4000-8000-000000000001", "creationTimestamp": "2026-01-01T00:00:00Z"},
		"spec":     spec,
		"status":   map[string]any{"phase": "Running"},
	}}
}

func TestCreate(t *testing.T) {
	container := map[string]any{"name": "c", "image": "nginx:1.27"}
	tests := []struct {
		name string
		spec map[string]any
		// want are fields of the stored object; cause, when set, is the
		// field of the 422 expected instead.
		want  map[string]any
		cause string
	}{
		{
			name: "defaults filled in",
			spec: map[string]any{"containers": []any{container}},
			want: map[string]any{
				"spec.restartPolicy": "Always", "spec.dnsPolicy": "ClusterFirst", "spec.schedulerName": "default-scheduler",
				"spec.terminationGracePeriodSeconds": int64(30), "status.phase": "Pending", "status.qosClass": "BestEffort",
				"metadata.generation": int64(1),
			},
		},
		{name: "no containers", spec: map[string]any{}, cause: "spec.containers"},
		{name: "bad restart policy", spec: map[string]any{"containers": []any{container}, "restartPolicy": "Sometimes"}, cause: "spec.restartPolicy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newPod(tt.spec)
			err := createUnstructured(context.Background(), pods(t), Request{Verb: "create", Namespace: "ns", Name: "p"}, u)
			if tt.cause != "" {
				if !apierrors.IsInvalid(err) || !hasCause(err, tt.cause) {
					t.Fatalf("err = %v, want 422 on %s", err, tt.cause)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for path, want := range tt.want {
				if got := nested(u.Object, path); got != want {
					t.Errorf("%s = %v (%T), want %v", path, got, got, want)
				}
			}
		})
	}
}

// A status update may change status only, and a main update not status, as
// kube's pod strategies rule.
func TestUpdateKeepsWhatTheSubresourceMayNotChange(t *testing.T) {
	k := pods(t)
	ctx := context.Background()
	old := newPod(map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx:1.27"}}})
	if err := createUnstructured(ctx, k, Request{Verb: "create", Namespace: "ns", Name: "p"}, old); err != nil {
		t.Fatal(err)
	}
	// The server sets the stored resourceVersion on both before the
	// strategy runs.
	old.SetResourceVersion("7")
	tests := []struct {
		sub        string
		phase      string
		wantPhase  string
		wantImage  string
		setImageTo string
	}{
		{sub: "status", phase: "Running", wantPhase: "Running", setImageTo: "nginx:1.28", wantImage: "nginx:1.27"},
		{sub: "", phase: "Running", wantPhase: "Pending", setImageTo: "nginx:1.28", wantImage: "nginx:1.28"},
	}
	for _, tt := range tests {
		t.Run("sub="+tt.sub, func(t *testing.T) {
			u := old.DeepCopy()
			_ = unstructured.SetNestedField(u.Object, tt.phase, "status", "phase")
			cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "containers")
			cs[0].(map[string]any)["image"] = tt.setImageTo
			_ = unstructured.SetNestedSlice(u.Object, cs, "spec", "containers")
			if err := k.Update(ctx, Request{Verb: "update", Namespace: "ns", Name: "p", Subresource: tt.sub}, u, old); err != nil {
				t.Fatal(err)
			}
			if got := nested(u.Object, "status.phase"); got != tt.wantPhase {
				t.Errorf("status.phase = %v, want %v", got, tt.wantPhase)
			}
			cs, _, _ = unstructured.NestedSlice(u.Object, "spec", "containers")
			if got := cs[0].(map[string]any)["image"]; got != tt.wantImage {
				t.Errorf("image = %v, want %v", got, tt.wantImage)
			}
		})
	}
	if _, err := k.updateStrategy(Request{Subresource: "binding"}); !apierrors.IsNotFound(err) {
		t.Errorf("a subresource without a strategy: %v, want NotFound", err)
	}
}

// An unscheduled pod is deleted gracefully with a period of 0, a bound one
// with its terminationGracePeriodSeconds; a config map not gracefully.
func TestBeforeDelete(t *testing.T) {
	ctx := context.Background()
	cm, _ := resources.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	cmRules, _ := For(cm.GVR(), cm.GVK)
	tests := []struct {
		name      string
		rules     *Rules
		obj       *unstructured.Unstructured
		graceful  bool
		wantGrace int64
	}{
		{"unscheduled pod", pods(t), newPod(map[string]any{"containers": []any{map[string]any{"name": "c", "image": "i"}}}), true, 0},
		{"bound pod", pods(t), newPod(map[string]any{"nodeName": "n1", "containers": []any{map[string]any{"name": "c", "image": "i"}}}), true, 30},
		{"config map", cmRules, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "ns"}}}, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts metav1.DeleteOptions
			graceful, pending, out, err := tt.rules.BeforeDeleteTyped(ctx, Request{Verb: "delete", Namespace: "ns"}, tt.obj, &opts)
			if err != nil || pending || graceful != tt.graceful || (out != nil) != graceful {
				t.Fatalf("BeforeDeleteTyped = %v, %v, %T, %v; want graceful %v", graceful, pending, out, err, tt.graceful)
			}
			if tt.obj.GetDeletionTimestamp() != nil {
				t.Errorf("the object given was changed: deletionTimestamp %v", tt.obj.GetDeletionTimestamp())
			}
			if !graceful {
				return
			}
			pod, ok := out.(*corev1.Pod)
			if !ok {
				t.Fatalf("graceful delete of a pod gave %T", out)
			}
			if pod.DeletionTimestamp == nil || pod.DeletionGracePeriodSeconds == nil || *pod.DeletionGracePeriodSeconds != tt.wantGrace {
				t.Errorf("deletionTimestamp %v, grace %v; want grace %d", pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds, tt.wantGrace)
			}
		})
	}
}

func hasCause(err error, field string) bool {
	st, ok := err.(apierrors.APIStatus)
	if !ok || st.Status().Details == nil {
		return false
	}
	for _, c := range st.Status().Details.Causes {
		if c.Field == field {
			return true
		}
	}
	return false
}

// nested reads a dotted path of a map.
func nested(obj map[string]any, path string) any {
	var v any = obj
	start := 0
	for i := 0; i <= len(path); i++ {
		if i < len(path) && path[i] != '.' {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[path[start:i]]
		start = i + 1
	}
	return v
}

// createUnstructured runs k.Create on u, decoded into its Go type, and
// sets u to the object Create returns.
func createUnstructured(ctx context.Context, k *Rules, req Request, u *unstructured.Unstructured) error {
	obj, err := k.External(u)
	if err != nil {
		return err
	}
	stored, err := k.Create(ctx, req, obj)
	if err != nil {
		return err
	}
	return k.SetUnstructured(u, stored)
}
