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
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// getServer serves two pods and one replication controller, and a watch of
// one pod change, as an API server does: as Tables when asked for them
// (kubectl's Accept header), as JSON objects otherwise. It has no
// discovery: names the registry does not know are unknown.
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
	wantsTable := func(r *http.Request) bool {
		return strings.Contains(r.Header.Get("Accept"), "as=Table") && r.URL.Query().Get("includeObject") == "Metadata"
	}
	// podTable prints pods as the server would: the priority-1 columns
	// are those of -o wide; a watch's later events carry no columns.
	podTable := func(columns bool, pods ...corev1.Pod) *metav1.Table {
		tbl := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"}, ListMeta: metav1.ListMeta{ResourceVersion: "7"}}
		if columns {
			tbl.ColumnDefinitions = []metav1.TableColumnDefinition{{Name: "Name", Format: "name"}, {Name: "Ready"}, {Name: "Status"},
				{Name: "Restarts", Type: "integer"}, {Name: "Age"}, {Name: "IP", Priority: 1}, {Name: "Node", Priority: 1}}
		}
		for _, p := range pods {
			ready := 0
			if p.Status.ContainerStatuses[0].Ready {
				ready = 1
			}
			meta, _ := json.Marshal(metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"},
				ObjectMeta: p.ObjectMeta})
			tbl.Rows = append(tbl.Rows, metav1.TableRow{
				Cells:  []any{p.Name, fmt.Sprintf("%d/1", ready), string(p.Status.Phase), int64(p.Status.ContainerStatuses[0].RestartCount), "3h", p.Status.PodIP, p.Spec.NodeName},
				Object: runtime.RawExtension{Raw: meta},
			})
		}
		return tbl
	}
	mux := http.NewServeMux()
	pods := []corev1.Pod{pod("web-a", "default", false, 0, corev1.PodPending), pod("web-b", "default", true, 2, corev1.PodRunning)}
	mux.HandleFunc("/api/v1/namespaces/default/pods", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" {
			if wantsTable(r) {
				writeJSON(w, podTable(true, pods...))
				return
			}
			writeJSON(w, corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: "7"}, Items: pods})
			return
		}
		if watches.Add(1) > 1 {
			if r.URL.Query().Get("resourceVersion") != "8" {
				t.Errorf("second watch from %q, want 8: the last event's", r.URL.Query().Get("resourceVersion"))
			}
			onSecondWatch()
			<-r.Context().Done()
			return
		}
		p := pod("web-c", "default", true, 0, corev1.PodRunning)
		p.ResourceVersion = "8"
		if wantsTable(r) {
			writeJSON(w, map[string]any{"type": "ADDED", "object": podTable(false, p)})
			return
		}
		p.Kind, p.APIVersion = "Pod", "v1"
		writeJSON(w, map[string]any{"type": "ADDED", "object": p})
	})
	mux.HandleFunc("/api/v1/pods", func(w http.ResponseWriter, r *http.Request) {
		all := append([]corev1.Pod{pod("db-0", "data", true, 0, corev1.PodRunning)}, pods...)
		if wantsTable(r) {
			writeJSON(w, podTable(true, all...))
			return
		}
		writeJSON(w, corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: "7"}, Items: all})
	})
	mux.HandleFunc("/api/v1/namespaces/default/pods/web-a", func(w http.ResponseWriter, r *http.Request) {
		if wantsTable(r) {
			writeJSON(w, podTable(true, pods[0]))
			return
		}
		p := pods[0]
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
		if !wantsTable(r) {
			t.Errorf("rc list without a Table's Accept header")
		}
		writeJSON(w, &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"},
			ColumnDefinitions: []metav1.TableColumnDefinition{{Name: "Name", Format: "name"}, {Name: "Desired", Type: "integer"},
				{Name: "Current", Type: "integer"}, {Name: "Ready", Type: "integer"}, {Name: "Age"}, {Name: "Selector", Priority: 1}},
			Rows: []metav1.TableRow{{Cells: []any{"web", 3, 3, 2, "3h", "app=web"}}}})
	})
	for _, empty := range []string{"/api/v1/namespaces/default/configmaps", "/apis/apps/v1/namespaces/default/deployments"} {
		mux.HandleFunc(empty, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"},
				ColumnDefinitions: []metav1.TableColumnDefinition{{Name: "Name", Format: "name"}, {Name: "Age"}}})
		})
	}
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
		name    string
		args    []string
		want    []string // lines, with runs of spaces collapsed
		wantErr string   // what it tells on stderr
		isErr   func(error) bool
	}{
		{name: "pods table", args: []string{"pods"}, want: []string{
			"NAME READY STATUS RESTARTS AGE", "web-a 0/1 Pending 0 3h", "web-b 1/1 Running 2 3h"}},
		{name: "short name, -o wide shows every column", args: []string{"po", "-o", "wide"}, want: []string{
			"NAME READY STATUS RESTARTS AGE IP NODE", "web-a 0/1 Pending 0 3h 10.0.0.1 node-1", "web-b 1/1 Running 2 3h 10.0.0.1 node-1"}},
		{name: "kind", args: []string{"Pod"}, want: []string{
			"NAME READY STATUS RESTARTS AGE", "web-a 0/1 Pending 0 3h", "web-b 1/1 Running 2 3h"}},
		{name: "no group v1", args: []string{"pods.v1"}, isErr: func(err error) bool { return strings.Contains(err.Error(), "unknown resource") }},
		{name: "all namespaces", args: []string{"-A", "pods"}, want: []string{
			"NAMESPACE NAME READY STATUS RESTARTS AGE", "data db-0 1/1 Running 0 3h", "default web-a 0/1 Pending 0 3h", "default web-b 1/1 Running 2 3h"}},
		{name: "one pod", args: []string{"pod", "web-a", "-n", "default"}, want: []string{"NAME READY STATUS RESTARTS AGE", "web-a 0/1 Pending 0 3h"}},
		{name: "rc", args: []string{"rc", "-o", "wide"}, want: []string{"NAME DESIRED CURRENT READY AGE SELECTOR", "web 3 3 2 3h app=web"}},
		{name: "rc by singular", args: []string{"replicationcontroller"}, want: []string{"NAME DESIRED CURRENT READY AGE", "web 3 3 2 3h"}},
		{name: "resource.group", args: []string{"deployments.apps"}, wantErr: "No resources found in default namespace."},
		{name: "resource.version.group", args: []string{"deployments.v1.apps"}, wantErr: "No resources found in default namespace."},
		{name: "a resource outside the old list, empty", args: []string{"cm"}, wantErr: "No resources found in default namespace."},
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
			if got := strings.TrimSpace(errOut.String()); got != tc.wantErr {
				t.Errorf("stderr %q, want %q", got, tc.wantErr)
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

// TestGetPrintsTheServersTables runs get against listwatch's own API
// server: what it prints is the server's Table (its columns, the wide ones
// with -o wide), for built-in resources found in the registry, custom ones
// found in discovery, and categories.
func TestGetPrintsTheServersTables(t *testing.T) {
	c := startCLICluster(t)
	for _, f := range []string{"rc.yaml", "service.yaml", "widget.yaml"} {
		if _, err := runCLI(t, c, "", "apply", "-f", filepath.Join(examplesDir, f)); err != nil {
			t.Fatal(err)
		}
	}
	// header returns the table's header and the first cell of each row.
	header := func(out string) (string, []string) {
		lines := tableLines(out)
		var names []string
		for _, l := range lines[1:] {
			if l == "" {
				continue
			}
			names = append(names, strings.Fields(l)[0])
		}
		return lines[0], names
	}
	for _, tc := range []struct {
		name       string
		args       []string
		wantHeader string // a prefix of the header
		wantNames  []string
	}{
		{name: "rc", args: []string{"rc"}, wantHeader: "NAME DESIRED CURRENT READY AGE", wantNames: []string{"web"}},
		{name: "services by short name", args: []string{"svc", "web"}, wantHeader: "NAME TYPE CLUSTER-IP", wantNames: []string{"web"}},
		{name: "custom resource in full", args: []string{"widgets.v1.example.listwatch.dev"}, wantHeader: "NAME COLOR SIZE AGE", wantNames: []string{"gadget", "gizmo"}},
		{name: "custom resource by singular, from discovery", args: []string{"widget"}, wantHeader: "NAME COLOR SIZE AGE", wantNames: []string{"gadget", "gizmo"}},
		{name: "custom resource by short name", args: []string{"wd", "gizmo"}, wantHeader: "NAME COLOR SIZE AGE", wantNames: []string{"gizmo"}},
		{name: "all namespaces", args: []string{"rc", "-A"}, wantHeader: "NAMESPACE NAME DESIRED", wantNames: []string{"default"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if err := runGet(t.Context(), append(tc.args, "--kubeconfig", c.kubeconfig), &out, &errOut); err != nil {
				t.Fatalf("%v: %s", err, errOut.String())
			}
			h, names := header(out.String())
			if !strings.HasPrefix(h, tc.wantHeader) || !slices.Equal(names, tc.wantNames) {
				t.Errorf("got\n%s\nwant a header starting %q and rows %v", out.String(), tc.wantHeader, tc.wantNames)
			}
		})
	}
	t.Run("-o wide adds the priority-1 columns", func(t *testing.T) {
		var narrow, wide bytes.Buffer
		if err := runGet(t.Context(), []string{"rc", "--kubeconfig", c.kubeconfig}, &narrow, io.Discard); err != nil {
			t.Fatal(err)
		}
		if err := runGet(t.Context(), []string{"rc", "-o", "wide", "--kubeconfig", c.kubeconfig}, &wide, io.Discard); err != nil {
			t.Fatal(err)
		}
		n, _ := header(narrow.String())
		w, _ := header(wide.String())
		if !strings.HasPrefix(w, n+" ") || len(strings.Fields(w)) <= len(strings.Fields(n)) {
			t.Errorf("wide header %q does not extend %q", w, n)
		}
	})
	t.Run("-w prints the rows of changes", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		pw, out := lines()
		done := make(chan error, 1)
		go func() {
			done <- runGet(ctx, []string{"widgets.v1.example.listwatch.dev", "-w", "--kubeconfig", c.kubeconfig}, pw, io.Discard)
			pw.Close()
		}()
		next := func(what string) string {
			t.Helper()
			select {
			case l, ok := <-out:
				if !ok {
					t.Fatalf("get -w ended before %s: %v", what, <-done)
				}
				return strings.Join(strings.Fields(l), " ")
			case <-ctx.Done():
				t.Fatalf("no %s", what)
			}
			return ""
		}
		if h := next("the header"); !strings.HasPrefix(h, "NAME COLOR SIZE AGE") {
			t.Fatalf("header %q", h)
		}
		for _, name := range []string{"gadget", "gizmo"} {
			if l := next(name); !strings.HasPrefix(l, name+" ") {
				t.Fatalf("row %q, want %s", l, name)
			}
		}
		if _, err := runCLI(t, c, "apiVersion: example.listwatch.dev/v1\nkind: Widget\nmetadata: {name: sprocket}\nspec: {color: green}\n",
			"apply", "-f", "-"); err != nil {
			t.Fatal(err)
		}
		if l := next("the new widget's row"); !strings.HasPrefix(l, "sprocket ") {
			t.Fatalf("row %q, want sprocket", l)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("get -w: %v", err)
		}
	})
	t.Run("the all category", func(t *testing.T) {
		var out bytes.Buffer
		if err := runGet(t.Context(), []string{"all", "--kubeconfig", c.kubeconfig}, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"replicationcontroller/web", "service/web"} {
			if !slices.ContainsFunc(tableLines(out.String()), func(l string) bool { return strings.HasPrefix(l, want+" ") }) {
				t.Errorf("no %s in\n%s", want, out.String())
			}
		}
	})
}

// TestTablePrinterAlignsLikeKubectl: the header once, then each print's
// rows (a watch's events, which carry no columns) aligned under it with
// the widths of the columns remembered from one print to the next, a
// column widening for a wider cell and staying so: byte for byte what
// kubectl v1.37 printed for the same events (`kubectl get pods -w`, and
// `kubectl get pods -A`, against `listwatch up`).
func TestTablePrinterAlignsLikeKubectl(t *testing.T) {
	cols := []metav1.TableColumnDefinition{{Name: "Name", Format: "name"}, {Name: "Ready"}, {Name: "Status"},
		{Name: "Restarts", Type: "integer"}, {Name: "Age"}, {Name: "IP", Priority: 1}}
	row := func(ns string, cells ...any) metav1.TableRow {
		meta, _ := json.Marshal(metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns}})
		return metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Raw: meta}}
	}
	tbl := func(cols []metav1.TableColumnDefinition, rows ...metav1.TableRow) *metav1.Table {
		return &metav1.Table{ColumnDefinitions: cols, Rows: rows}
	}
	tests := []struct {
		name   string
		allNS  bool
		tables []*metav1.Table // the list's, then the watch events'
		want   string
	}{
		{
			name: "list, then watch events",
			tables: []*metav1.Table{
				tbl(cols, row("default", "a", "1/1", "Running", json.Number("0"), "2s", "10.0.0.1")),
				tbl(nil, row("default", "a-much-longer-pod-name", "0/1", "Pending", json.Number("0"), "0s", nil)),
				tbl(nil, row("default", "a-much-longer-pod-name", "0/1", "Pending", json.Number("0"), "0s", nil)),
				tbl(nil, row("default", "a-much-longer-pod-name", "1/1", "Running", json.Number("0"), "1s", nil)),
				tbl(nil, row("default", "a", "1/1", "Terminating", json.Number("0"), "7s", nil)),
				tbl(nil, row("default", "a", "1/1", "Terminating", json.Number("0"), "8s", nil)),
			},
			want: "" +
				"NAME   READY   STATUS    RESTARTS   AGE\n" +
				"a      1/1     Running   0          2s\n" +
				"a-much-longer-pod-name   0/1     Pending   0          0s\n" +
				"a-much-longer-pod-name   0/1     Pending   0          0s\n" +
				"a-much-longer-pod-name   1/1     Running   0          1s\n" +
				"a                        1/1     Terminating   0          7s\n" +
				"a                        1/1     Terminating   0          8s\n",
		},
		{
			name:   "all namespaces",
			allNS:  true,
			tables: []*metav1.Table{tbl(cols, row("default", "a-much-longer-pod-name", "1/1", "Running", json.Number("0"), "72s", nil))},
			want: "" +
				"NAMESPACE   NAME                     READY   STATUS    RESTARTS   AGE\n" +
				"default     a-much-longer-pod-name   1/1     Running   0          72s\n",
		},
		{
			name: "an empty list, then a watch event",
			tables: []*metav1.Table{
				tbl(cols),
				tbl(nil, row("default", "é", "0/1", "Pending", json.Number("0"), "0s", nil)),
			},
			want: "" +
				"NAME   READY   STATUS    RESTARTS   AGE\n" +
				"é      0/1     Pending   0          0s\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			p := &tablePrinter{out: &out, allNS: tt.allNS}
			for _, tbl := range tt.tables {
				if err := p.print(tbl); err != nil {
					t.Fatal(err)
				}
			}
			if out.String() != tt.want {
				t.Errorf("printed\n%s\nwant (kubectl's)\n%s", out.String(), tt.want)
			}
		})
	}
}

// TestGetWatchEndsOnCancel: `get -w`, tables or objects, returns as soon
// as its context ends (Ctrl-C), while its watch waits for events that do
// not come, rather than when the server next writes.
func TestGetWatchEndsOnCancel(t *testing.T) {
	c := startCLICluster(t)
	if _, err := runCLI(t, c, "", "apply", "-f", filepath.Join(examplesDir, "widget.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"table", []string{"widgets.v1.example.listwatch.dev", "-w"}},
		{"json", []string{"widgets.v1.example.listwatch.dev", "-w", "-o", "json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			pw, out := lines()
			done := make(chan error, 1)
			go func() {
				done <- runGet(ctx, append(tc.args, "--kubeconfig", c.kubeconfig), pw, io.Discard)
				pw.Close()
			}()
			// The list is printed: the watch is open, or opening.
			select {
			case <-out:
			case err := <-done:
				t.Fatalf("get -w ended: %v", err)
			case <-time.After(30 * time.Second):
				t.Fatal("nothing printed")
			}
			go func() {
				for range out {
				}
			}()
			time.Sleep(100 * time.Millisecond) // into the watch's wait
			start := time.Now()
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("get -w: %v", err)
				}
				t.Logf("returned %v after the cancel", time.Since(start))
			case <-time.After(5 * time.Second):
				t.Fatal("get -w still running 5 s after its context ended")
			}
		})
	}
}
