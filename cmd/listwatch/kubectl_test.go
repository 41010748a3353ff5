package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The kubectl tests run the real kubectl binary, unchanged, against a real
// `listwatch up` (embedded etcd, HTTPS, token, the kubeconfig it writes):
// what a user typing the README's commands gets. They skip where kubectl
// is not installed, except under CI=true, where its absence is a failure.

// kubectlEnv is one cluster and the kubectl invocations against it.
type kubectlEnv struct {
	t          *testing.T
	bin        string
	kubeconfig string
	home       string
	dir        string
}

// kubectlResult is what one invocation printed.
type kubectlResult struct {
	stdout, stderr string
	err            error
}

func (r kubectlResult) String() string {
	return "stdout:\n" + r.stdout + "\nstderr:\n" + r.stderr
}

func newKubectlEnv(t *testing.T) *kubectlEnv {
	t.Helper()
	return newKubectlEnvWith(t, kubectlCustomResources)
}

// newKubectlEnvWith starts `up` with customResources applied at start
// (none when empty).
func newKubectlEnvWith(t *testing.T, customResources string) *kubectlEnv {
	t.Helper()
	bin, err := exec.LookPath("kubectl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("kubectl is required under CI=true: %v", err)
		}
		t.Skipf("kubectl not on PATH: %v", err)
	}
	work := t.TempDir()
	var crs string
	if customResources != "" {
		crs = filepath.Join(work, "crs.yaml")
		if err := os.WriteFile(crs, []byte(customResources), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	u := startUp(t, upConfig{Dir: filepath.Join(work, ".listwatch"), Port: 0, StorageBackend: backendEtcd, CustomResourcesFile: crs})
	t.Cleanup(func() {
		if err := u.stop(); err != nil {
			t.Errorf("up ended with %v", err)
		}
	})
	home := filepath.Join(work, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	return &kubectlEnv{t: t, bin: bin, kubeconfig: u.kubeconfig, home: home, dir: work}
}

// command builds a kubectl invocation with the cluster's kubeconfig and a
// HOME of its own, so no cached discovery or user config leaks in.
func (e *kubectlEnv) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig, "HOME="+e.home, "KUBECACHEDIR="+filepath.Join(e.home, "cache"))
	cmd.Dir = e.dir
	return cmd
}

// run runs kubectl to completion, for at most 20 s, or 10 s past the
// command's own --timeout= when it has a longer one (rollout status).
func (e *kubectlEnv) run(args ...string) kubectlResult {
	e.t.Helper()
	limit := 20 * time.Second
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--timeout="); ok {
			if d, err := time.ParseDuration(v); err == nil {
				limit = max(limit, d+10*time.Second)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := e.command(ctx, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return kubectlResult{stdout: out.String(), stderr: errOut.String(), err: err}
}

// ok runs kubectl and fails the test unless it succeeds.
func (e *kubectlEnv) ok(args ...string) kubectlResult {
	e.t.Helper()
	r := e.run(args...)
	if r.err != nil {
		e.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), r.err, r)
	}
	return r
}

// file writes a manifest into the work directory and returns its path.
func (e *kubectlEnv) file(name, content string) string {
	e.t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// tableRows splits kubectl's table output into rows of fields; the header
// is row 0.
func tableRows(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.TrimSpace(line) != "" {
			rows = append(rows, strings.Fields(line))
		}
	}
	return rows
}

// rowFor returns the row whose first field is name.
func rowFor(rows [][]string, name string) []string {
	for _, r := range rows {
		if len(r) > 0 && r[0] == name {
			return r
		}
	}
	return nil
}

// kubectlCustomResources is the sample controller's
// crd-status-subresource.yaml (seed 002).
const kubectlCustomResources = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: foos.samplecontroller.k8s.io
  # for more information on the below annotation, please see
  # https://github.com/kubernetes/enhancements/blob/master/keps/sig-api-machinery/2337-k8s.io-group-protection/README.md
  annotations:
    "api-approved.kubernetes.io": "unapproved, experimental-only; please get an approval from Kubernetes API reviewers if you're trying to develop a CRD in the *.k8s.io or *.kubernetes.io groups"
spec:
  group: samplecontroller.k8s.io
  versions:
    - name: v1alpha1
      served: true
      storage: true
      schema:
        # schema used for validation
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                deploymentName:
                  type: string
                replicas:
                  type: integer
                  minimum: 1
                  maximum: 10
            status:
              type: object
              properties:
                availableReplicas:
                  type: integer
      # subresources for the custom resource
      subresources:
        # enables the status subresource
        status: {}
  names:
    kind: Foo
    plural: foos
  scope: Namespaced
`

func kubectlFoo(replicas int) string {
	return `apiVersion: samplecontroller.k8s.io/v1alpha1
kind: Foo
metadata:
  name: example-foo
spec:
  deploymentName: example-foo
  replicas: ` + itoa(replicas) + "\n"
}

const kubectlRC = `apiVersion: v1
kind: ReplicationController
metadata:
  name: web
  labels:
    app: web
spec:
  replicas: 2
  selector:
    app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
`

const kubectlPod = `apiVersion: v1
kind: Pod
metadata:
  name: solo
spec:
  containers:
  - name: main
    image: busybox
`

func kubectlApplyRC(image string, replicas int) string {
	return `apiVersion: v1
kind: ReplicationController
metadata:
  name: applied
spec:
  replicas: ` + itoa(replicas) + `
  selector:
    app: applied
  template:
    metadata:
      labels:
        app: applied
    spec:
      containers:
      - name: app
        image: ` + image + `
        ports:
        - containerPort: 8080
`
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestKubectl(t *testing.T) {
	e := newKubectlEnv(t)

	t.Run("discovery raw", func(t *testing.T) {
		tests := []struct {
			path string
			want func(map[string]any) bool
		}{
			{"/api", func(m map[string]any) bool {
				v, _ := m["versions"].([]any)
				return m["kind"] == "APIVersions" && len(v) == 1 && v[0] == "v1"
			}},
			{"/apis", func(m map[string]any) bool {
				groups, _ := m["groups"].([]any)
				names := map[string]bool{}
				for _, g := range groups {
					if gm, ok := g.(map[string]any); ok {
						names[gm["name"].(string)] = true
					}
				}
				return m["kind"] == "APIGroupList" && names["apps"] && names["coordination.k8s.io"]
			}},
			{"/api/v1", func(m map[string]any) bool {
				res, _ := m["resources"].([]any)
				found := map[string]bool{}
				for _, r := range res {
					if rm, ok := r.(map[string]any); ok {
						found[rm["name"].(string)] = true
					}
				}
				return m["groupVersion"] == "v1" && found["pods"] && found["pods/binding"] && found["replicationcontrollers/scale"]
			}},
		}
		for _, tt := range tests {
			r := e.ok("get", "--raw", tt.path)
			m := map[string]any{}
			if err := json.Unmarshal([]byte(r.stdout), &m); err != nil || !tt.want(m) {
				t.Errorf("get --raw %s: %v\n%s", tt.path, err, r)
			}
		}
	})

	t.Run("explain reads OpenAPI v3", func(t *testing.T) {
		out := e.ok("explain", "replicationcontrollers.spec.template.spec.containers.ports").stdout
		for _, want := range []string{"KIND:       ReplicationController", "FIELD: ports <[]ContainerPort>", "containerPort\t<integer>", "Number of port to expose"} {
			if !strings.Contains(out, want) {
				t.Errorf("explain lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("get namespaces table", func(t *testing.T) {
		rows := tableRows(e.ok("get", "namespaces").stdout)
		if len(rows) == 0 || strings.Join(rows[0], " ") != "NAME STATUS AGE" {
			t.Fatalf("header %v, want NAME STATUS AGE", rows)
		}
		if r := rowFor(rows, "default"); len(r) != 3 || r[1] != "Active" {
			t.Errorf("default row %v, want [default Active <age>]", r)
		}
	})

	t.Run("create -f and get", func(t *testing.T) {
		r := e.ok("create", "-f", e.file("rc.yaml", kubectlRC), "-f", e.file("pod.yaml", kubectlPod))
		if !strings.Contains(r.stdout, "replicationcontroller/web created") || !strings.Contains(r.stdout, "pod/solo created") {
			t.Fatalf("create: %s", r)
		}
		rows := tableRows(e.ok("get", "rc", "web").stdout)
		if strings.Join(rows[0], " ") != "NAME DESIRED CURRENT READY AGE" {
			t.Errorf("header %v", rows[0])
		}
		if row := rowFor(rows, "web"); len(row) != 5 || row[1] != "2" {
			t.Errorf("web row %v, want DESIRED 2", row)
		}
		// Two kinds in one request: kubectl prints a table per kind.
		wide := tableRows(e.ok("get", "rc/web", "pod/solo", "-o", "wide").stdout)
		if strings.Join(wide[0], " ") != "NAME DESIRED CURRENT READY AGE CONTAINERS IMAGES SELECTOR" {
			t.Errorf("rc wide header %v", wide[0])
		}
		if row := rowFor(wide, "replicationcontroller/web"); len(row) != 8 || row[5] != "nginx" || row[6] != "nginx:1.27" || row[7] != "app=web" {
			t.Errorf("rc wide row %v", row)
		}
		var podHeader []string
		for _, row := range wide {
			if len(row) > 0 && row[0] == "NAME" && len(row) > 1 && row[1] == "READY" {
				podHeader = row
			}
		}
		if got := strings.Join(podHeader, " "); got != "NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE READINESS GATES" {
			t.Errorf("pod wide header %q in %v", got, wide)
		}
		// The simulated kubelet starts the pod a second after it is
		// bound, which may come before or after this get.
		if row := rowFor(wide, "pod/solo"); len(row) < 4 || (row[1] != "0/1" && row[1] != "1/1") || row[3] != "0" {
			t.Errorf("pod row %v, want READY 0/1 or 1/1, RESTARTS 0", row)
		}
	})

	t.Run("get -o yaml", func(t *testing.T) {
		out := e.ok("get", "rc", "web", "-o", "yaml").stdout
		for _, want := range []string{"apiVersion: v1", "kind: ReplicationController", "name: web", "namespace: default", "replicas: 2", "image: nginx:1.27", "uid: ", "resourceVersion: "} {
			if !strings.Contains(out, want) {
				t.Errorf("yaml lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("create deployment sends protobuf", func(t *testing.T) {
		r := e.ok("create", "deployment", "hello", "--image=nginx", "--replicas=2")
		if !strings.Contains(r.stdout, "deployment.apps/hello created") {
			t.Fatalf("create deployment: %s", r)
		}
		rows := tableRows(e.ok("get", "deployments").stdout)
		if strings.Join(rows[0], " ") != "NAME READY UP-TO-DATE AVAILABLE AGE" {
			t.Errorf("header %v", rows[0])
		}
		if row := rowFor(rows, "hello"); len(row) != 5 || !strings.HasSuffix(row[1], "/2") {
			t.Errorf("hello row %v, want READY x/2", row)
		}
		if img := e.ok("get", "deploy", "hello", "-o", "jsonpath={.spec.template.spec.containers[0].image}").stdout; img != "nginx" {
			t.Errorf("image %q, want nginx", img)
		}
	})

	t.Run("field validation", func(t *testing.T) {
		bad := e.file("bad.yaml", strings.Replace(kubectlPod, "name: solo", "name: bad", 1)+"    imagePullPolicyy: Always\n")
		r := e.run("create", "-f", bad)
		if r.err == nil || !strings.Contains(r.stderr, `strict decoding error: unknown field "spec.containers[0].imagePullPolicyy"`) {
			t.Errorf("strict create: %v\n%s", r.err, r)
		}
		if r := e.run("get", "pod", "bad"); r.err == nil {
			t.Errorf("pod created despite strict validation failure")
		}
		r = e.ok("create", "-f", bad, "--validate=warn")
		if !strings.Contains(r.stderr, `Warning: unknown field "spec.containers[0].imagePullPolicyy"`) || !strings.Contains(r.stdout, "pod/bad created") {
			t.Errorf("warn create: %s", r)
		}
	})

	t.Run("List manifests validated with OpenAPI v2", func(t *testing.T) {
		// kubectl checks a kind: List itself, against /openapi/v2.
		list := `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Service
  metadata:
    name: lsvc
  spec:
    selector:
      app: web
    ports:
    - port: 80
      targetPort: http
- apiVersion: v1
  kind: Pod
  metadata:
    name: lpod
  spec:
    containers:
    - name: main
      image: busybox
`
		r := e.ok("create", "-f", e.file("list.yaml", list))
		if !strings.Contains(r.stdout, "service/lsvc created") || !strings.Contains(r.stdout, "pod/lpod created") {
			t.Errorf("create list: %s", r)
		}
		rows := tableRows(e.ok("get", "svc", "lsvc").stdout)
		if strings.Join(rows[0], " ") != "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE" || len(rowFor(rows, "lsvc")) != 6 || rowFor(rows, "lsvc")[4] != "80/TCP" {
			t.Errorf("get svc: %v", rows)
		}
		bad := strings.Replace(strings.ReplaceAll(list, "lpod", "lpod2"), "lsvc", "lsvc2", 1)
		bad = strings.Replace(bad, "image: busybox", "image: busybox\n      imagee: typo", 1)
		r = e.run("create", "-f", e.file("badlist.yaml", bad))
		if r.err == nil || !strings.Contains(r.stderr, `unknown field "imagee" in io.k8s.api.core.v1.Container`) {
			t.Errorf("invalid list accepted: %v\n%s", r.err, r)
		}
	})

	t.Run("apply", func(t *testing.T) {
		f := e.file("applied.yaml", kubectlApplyRC("app:v1", 1))
		r := e.ok("apply", "-f", f)
		if !strings.Contains(r.stdout, "replicationcontroller/applied created") {
			t.Fatalf("first apply: %s", r)
		}
		ann := e.ok("get", "rc", "applied", "-o", `jsonpath={.metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration}`).stdout
		if !strings.Contains(ann, `"image":"app:v1"`) {
			t.Errorf("last-applied annotation %q lacks the applied image", ann)
		}
		e.file("applied.yaml", kubectlApplyRC("app:v2", 3))
		r = e.ok("apply", "-f", f)
		if !strings.Contains(r.stdout, "replicationcontroller/applied configured") || strings.Contains(strings.ToLower(r.stderr), "warning") {
			t.Fatalf("second apply: %s", r)
		}
		got := e.ok("get", "rc", "applied", "-o", "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].ports[0].containerPort}").stdout
		if got != "3 app:v2 8080" {
			t.Errorf("after re-apply: %q, want \"3 app:v2 8080\"", got)
		}
		ann = e.ok("get", "rc", "applied", "-o", `jsonpath={.metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration}`).stdout
		if !strings.Contains(ann, `"image":"app:v2"`) {
			t.Errorf("last-applied annotation not updated: %q", ann)
		}
		r = e.ok("apply", "-f", f)
		if !strings.Contains(r.stdout, "replicationcontroller/applied unchanged") {
			t.Errorf("third apply: %s", r)
		}
	})

	t.Run("custom resource", func(t *testing.T) {
		f := e.file("foo.yaml", kubectlFoo(1))
		if r := e.ok("apply", "-f", f); !strings.Contains(r.stdout, "foo.samplecontroller.k8s.io/example-foo created") {
			t.Fatalf("apply foo: %s", r)
		}
		e.file("foo.yaml", kubectlFoo(3))
		// No Go type: kubectl sends a JSON merge patch.
		if r := e.ok("apply", "-f", f); !strings.Contains(r.stdout, "foo.samplecontroller.k8s.io/example-foo configured") {
			t.Fatalf("re-apply foo: %s", r)
		}
		rows := tableRows(e.ok("get", "foos").stdout)
		if strings.Join(rows[0], " ") != "NAME AGE" || len(rowFor(rows, "example-foo")) != 2 {
			t.Errorf("get foos: %v", rows)
		}
		if got := e.ok("get", "foo", "example-foo", "-o", "jsonpath={.spec.replicas}").stdout; got != "3" {
			t.Errorf("foo spec.replicas %q, want 3", got)
		}
	})

	t.Run("scale", func(t *testing.T) {
		r := e.ok("scale", "rc", "web", "--replicas=4")
		if !strings.Contains(r.stdout, "replicationcontroller/web scaled") {
			t.Fatalf("scale: %s", r)
		}
		e.ok("scale", "deployment", "hello", "--replicas=0")
		if got := e.ok("get", "rc/web", "deploy/hello", "-o", "jsonpath={.items[*].spec.replicas}").stdout; got != "4 0" {
			t.Errorf("spec.replicas of rc and deployment %q, want \"4 0\"", got)
		}
	})

	t.Run("label", func(t *testing.T) {
		r := e.ok("label", "rc", "web", "color=blue")
		if !strings.Contains(r.stdout, "replicationcontroller/web labeled") {
			t.Fatalf("label: %s", r)
		}
		out := e.ok("get", "rc", "web", "-L", "color").stdout
		rows := tableRows(out)
		if web := rowFor(rows, "web"); len(web) != len(rows[0]) || rows[0][len(rows[0])-1] != "COLOR" || web[len(web)-1] != "blue" {
			t.Errorf("label column:\n%s\nlabels now: %s", out, e.ok("get", "rc", "web", "-o", "jsonpath={.metadata.labels}").stdout)
		}
		if got := strings.TrimSpace(e.ok("get", "rc", "-l", "color=blue", "-o", "name").stdout); got != "replicationcontroller/web" {
			t.Errorf("selected %q, want replicationcontroller/web", got)
		}
	})

	t.Run("get -w", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := e.command(ctx, "get", "rc", "web", "-w")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		linesCh := make(chan []string)
		go func() {
			defer close(linesCh)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				linesCh <- strings.Fields(sc.Text())
			}
		}()
		defer func() {
			cancel()
			for range linesCh {
			}
			_ = cmd.Wait()
		}()
		// waitFor reads lines until one satisfies ok.
		waitFor := func(what string, ok func([]string) bool) {
			t.Helper()
			for {
				select {
				case l, open := <-linesCh:
					if !open {
						t.Fatalf("kubectl get -w ended before %s; stderr: %s", what, stderr.String())
					}
					if ok(l) {
						return
					}
				case <-ctx.Done():
					t.Fatalf("no line with %s; stderr: %s", what, stderr.String())
				}
			}
		}
		waitFor("the header", func(l []string) bool { return strings.Join(l, " ") == "NAME DESIRED CURRENT READY AGE" })
		waitFor("the initial row", func(l []string) bool { return len(l) == 5 && l[0] == "web" && l[1] == "4" })
		e.ok("scale", "rc", "web", "--replicas=6")
		waitFor("the scaled row", func(l []string) bool { return len(l) == 5 && l[0] == "web" && l[1] == "6" })
	})

	t.Run("dry run", func(t *testing.T) {
		f := e.file("dry.yaml", strings.Replace(kubectlPod, "name: solo", "name: dry", 1))
		r := e.ok("create", "-f", f, "--dry-run=server")
		if !strings.Contains(r.stdout, "pod/dry created (server dry run)") {
			t.Errorf("dry-run create: %s", r)
		}
		if r := e.run("get", "pod", "dry"); r.err == nil || !strings.Contains(r.stderr, "not found") {
			t.Errorf("dry-run create persisted the pod: %s", r)
		}
		r = e.ok("delete", "rc", "web", "--dry-run=server")
		if !strings.Contains(r.stdout, "(server dry run)") {
			t.Errorf("dry-run delete: %s", r)
		}
		e.ok("get", "rc", "web")
	})

	t.Run("delete", func(t *testing.T) {
		r := e.ok("delete", "rc", "web")
		if !strings.Contains(r.stdout, `replicationcontroller "web" deleted`) {
			t.Fatalf("delete: %s", r)
		}
		if r := e.run("get", "rc", "web"); r.err == nil || !strings.Contains(r.stderr, `replicationcontrollers "web" not found`) {
			t.Errorf("after delete: %s", r)
		}
		r = e.ok("delete", "-f", e.dir+"/applied.yaml")
		if !strings.Contains(r.stdout, `replicationcontroller "applied" deleted`) {
			t.Errorf("delete -f: %s", r)
		}
	})
}
