package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// getServer serves two pods and one replication controller in JSON, and a
// watch of one pod change, as an API server does.
func getServer(t *testing.T, watches *atomic.Int32, onSecondWatch func()) string {
	created := metav1.NewTime(time.Now().Add(-3 * time.Hour))
	pod := func(name, ns string, ready bool, restarts int32, phase corev1.PodPhase) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, ResourceVersion: "5", CreationTimestamp: created},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}, NodeName: "node-1"},
			Status: corev1.PodStatus{Phase: phase, PodIP: "10.0.0.1",
				ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Ready: ready, RestartCount: restarts}}}}
	}
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	pods := []corev1.Pod{pod("web-b", "default", true, 2, corev1.PodRunning), pod("web-a", "default", false, 0, corev1.PodPending)}
	mux.HandleFunc("/api/v1/namespaces/default/pods", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" {
			writeJSON(w, corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: "7"}, Items: pods})
			return
		}
		if watches.Add(1) > 1 {
			onSecondWatch()
			<-r.Context().Done()
			return
		}
		p := pod("web-c", "default", true, 0, corev1.PodRunning)
		p.Kind, p.APIVersion = "Pod", "v1"
		writeJSON(w, map[string]any{"type": "ADDED", "object": p})
	})
	mux.HandleFunc("/api/v1/pods", func(w http.ResponseWriter, r *http.Request) {
		all := append([]corev1.Pod{pod("db-0", "data", true, 0, corev1.PodRunning)}, pods...)
		writeJSON(w, corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: "7"}, Items: all})
	})
	mux.HandleFunc("/api/v1/namespaces/default/pods/web-a", func(w http.ResponseWriter, r *http.Request) {
		p := pods[1]
		p.Kind, p.APIVersion = "Pod", "v1"
		writeJSON(w, p)
	})
	mux.HandleFunc("/api/v1/namespaces/default/pods/nope", func(w http.ResponseWriter, r *http.Request) {
		st := apierrors.NewNotFound(corev1.Resource("pods"), "nope").ErrStatus
		st.Kind, st.APIVersion = "Status", "v1"
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(404)
		json.NewEncoder(w).Encode(st)
	})
	mux.HandleFunc("/api/v1/namespaces/default/replicationcontrollers", func(w http.ResponseWriter, r *http.Request) {
		three := int32(3)
		writeJSON(w, corev1.ReplicationControllerList{TypeMeta: metav1.TypeMeta{Kind: "ReplicationControllerList", APIVersion: "v1"},
			Items: []corev1.ReplicationController{{ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: created},
				Spec:   corev1.ReplicationControllerSpec{Replicas: &three, Selector: map[string]string{"app": "web"}},
				Status: corev1.ReplicationControllerStatus{Replicas: 3, ReadyReplicas: 2}}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: test
clusters: [{name: test, cluster: {server: %q}}]
users: [{name: u, user: {}}]
contexts: [{name: test, context: {cluster: test, user: u}}]
`, srv.URL)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestGet(t *testing.T) {
	var watches atomic.Int32
	kc := getServer(t, &watches, func() {})
	for _, tc := range []struct {
		name  string
		args  []string
		want  []string // lines, with runs of spaces collapsed
		isErr func(error) bool
	}{
		{name: "pods table", args: []string{"pods"}, want: []string{
			"NAME READY STATUS RESTARTS AGE", "web-a 0/1 Pending 0 3h", "web-b 1/1 Running 2 3h"}},
		{name: "alias, flags after", args: []string{"po", "-o", "wide"}, want: []string{
			"NAME READY STATUS RESTARTS AGE IP NODE", "web-a 0/1 Pending 0 3h 10.0.0.1 node-1", "web-b 1/1 Running 2 3h 10.0.0.1 node-1"}},
		{name: "all namespaces", args: []string{"-A", "pods"}, want: []string{
			"NAMESPACE NAME READY STATUS RESTARTS AGE", "data db-0 1/1 Running 0 3h", "default web-a 0/1 Pending 0 3h", "default web-b 1/1 Running 2 3h"}},
		{name: "one pod", args: []string{"pod", "web-a", "-n", "default"}, want: []string{"NAME READY STATUS RESTARTS AGE", "web-a 0/1 Pending 0 3h"}},
		{name: "rc", args: []string{"rc", "-o", "wide"}, want: []string{"NAME DESIRED CURRENT READY AGE SELECTOR", "web 3 3 2 3h app=web"}},
		{name: "not found", args: []string{"pods", "nope"}, isErr: apierrors.IsNotFound},
		{name: "unknown resource", args: []string{"gizmos"}, isErr: func(err error) bool { return strings.Contains(err.Error(), "unknown resource") }},
		{name: "bad output", args: []string{"pods", "-o", "xml"}, isErr: func(err error) bool { return strings.Contains(err.Error(), "unknown output format") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := runGet(t.Context(), append(tc.args, "--kubeconfig", kc), &out, &errOut)
			if tc.isErr != nil {
				if err == nil || !tc.isErr(err) {
					t.Fatalf("got %v, want a matching error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tableLines(out.String()); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func tableLines(s string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return lines
}

func TestGetJSONAndYAML(t *testing.T) {
	var watches atomic.Int32
	kc := getServer(t, &watches, func() {})
	var out bytes.Buffer
	if err := runGet(t.Context(), []string{"pods", "-o", "json", "--kubeconfig", kc}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var list struct {
		Kind  string       `json:"kind"`
		Items []corev1.Pod `json:"items"`
	}
	if err := json.Unmarshal(out.Bytes(), &list); err != nil || list.Kind != "List" || len(list.Items) != 2 || list.Items[0].Name != "web-a" {
		t.Fatalf("json output %s: %v", out.String(), err)
	}
	out.Reset()
	if err := runGet(t.Context(), []string{"pods", "web-a", "-o", "yaml", "--kubeconfig", kc}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "kind: Pod\n") || !strings.Contains(s, "  name: web-a\n") {
		t.Fatalf("yaml output:\n%s", s)
	}
}

func TestGetWatch(t *testing.T) {
	var watches atomic.Int32
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	kc := getServer(t, &watches, cancel)
	var out bytes.Buffer
	if err := runGet(ctx, []string{"pods", "-w", "--kubeconfig", kc}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	want := []string{"NAME READY STATUS RESTARTS AGE", "web-a 0/1 Pending 0 3h", "web-b 1/1 Running 2 3h", "web-c 1/1 Running 0 3h"}
	if got := tableLines(out.String()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if watches.Load() != 2 {
		t.Fatalf("%d watches, want 2 (the second resuming after the first ended)", watches.Load())
	}
}

func TestAge(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{{30 * time.Second, "30s"}, {5*time.Minute + 3*time.Second, "5m3s"}, {90 * time.Minute, "90m"}, {5*time.Hour + 20*time.Minute, "5h20m"},
		{30 * time.Hour, "30h"}, {3*24*time.Hour + 2*time.Hour, "3d2h"}, {100 * 24 * time.Hour, "100d"}, {3 * 365 * 24 * time.Hour, "3y"}} {
		if got := age(metav1.NewTime(now.Add(-tc.d)), now); got != tc.want {
			t.Errorf("age(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}
