package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKubectlSeedScenario is seed 002's walk-through as the README gives
// it, command by command: the real kubectl against `listwatch up`, and the
// sample controller built and run as its own process with `-kubeconfig`.
// kubectl creates the CRD and example-foo; after the walk-through's
// `kubectl wait` for the Foo's status (which makes it work when pasted,
// the controller started in the background), with no polling: the Deployment example-foo
// appears with one replica and a controller ownerReference to the Foo; its
// ReplicaSet and pod appear and the pod becomes Ready; the Foo's
// status.availableReplicas becomes 1; patched to 3 replicas, the
// Deployment and the status follow; `kubectl delete --cascade=foreground`
// returns only once the Deployment, its ReplicaSets and pods are gone.
func TestKubectlSeedScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the sample controller")
	}
	e := newKubectlEnvWith(t, "")
	example, err := filepath.Abs("../../examples/samplecontroller")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "samplecontroller")
	if out, err := exec.Command("go", "build", "-o", bin, example).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// The README's walk-through, command by command. Two creates, as with
	// kube: kubectl maps every object of a file before it creates any.
	e.ok("create", "-f", filepath.Join(example, "crd.yaml"))
	e.ok("wait", "--for", "condition=Established", "crd/foos.samplecontroller.k8s.io")
	e.ok("create", "-f", filepath.Join(example, "example-foo.yaml"))

	ctrl := exec.Command(bin, "-kubeconfig", e.kubeconfig)
	ctrl.Stderr = tWriter{t}
	if err := ctrl.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- ctrl.Wait() }()
	t.Cleanup(func() {
		if err := ctrl.Process.Signal(syscall.SIGINT); err != nil {
			t.Errorf("interrupting the sample controller: %v", err)
		}
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("sample controller exited with %v after SIGINT, want 0", err)
			}
		case <-time.After(30 * time.Second):
			_ = ctrl.Process.Kill()
			t.Errorf("sample controller still running 30 s after SIGINT")
		}
	})

	// The walk-through's waits are what make its checks hold when it is
	// pasted: after them, each check is read once, with no polling.
	check := func(what, want string, args ...string) {
		t.Helper()
		if r := e.ok(args...); strings.TrimSpace(r.stdout) != want {
			t.Errorf("%s: kubectl %s printed %q, want %q", what, strings.Join(args, " "), r.stdout, want)
		}
	}
	e.ok("wait", "--for", "jsonpath={.status.availableReplicas}=1", "foo/example-foo", "--timeout=5m")
	check("the Deployment of one replica, controlled by the Foo", "1 Foo/example-foo/true",
		"get", "deployment", "example-foo", "-o", "jsonpath={.spec.replicas} {.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}/{.metadata.ownerReferences[0].controller}")
	check("its ReplicaSet's pod is Ready", "ReplicaSet True",
		"get", "pods", "-l", "controller=example-foo", "-o", `jsonpath={.items[*].metadata.ownerReferences[0].kind} {.items[*].status.conditions[?(@.type=="Ready")].status}`)
	check("one ReplicaSet, controlled by the Deployment", "Deployment/example-foo",
		"get", "rs", "-l", "controller=example-foo", "-o", "jsonpath={.items[*].metadata.ownerReferences[0].kind}/{.items[*].metadata.ownerReferences[0].name}")
	check("the Foo's status says 1 available", "1", "get", "foo", "example-foo", "-o", "jsonpath={.status.availableReplicas}")

	e.ok("patch", "foo", "example-foo", "--type", "merge", "-p", `{"spec":{"replicas":3}}`)
	e.ok("wait", "--for", "jsonpath={.status.availableReplicas}=3", "foo/example-foo")
	check("the Deployment has 3 replicas", "3", "get", "deployment", "example-foo", "-o", "jsonpath={.spec.replicas}")
	if ev := e.ok("get", "events", "--field-selector", "involvedObject.kind=Foo", "-o", "jsonpath={.items[*].reason}").stdout; !strings.Contains(ev, "Synced") {
		t.Errorf("events of the Foo: %q, want a Synced", ev)
	}

	start := time.Now()
	if r := e.run("delete", "foo", "example-foo", "--cascade=foreground", "--timeout=60s"); r.err != nil {
		left := e.run("get", "foo,deployment,rs,pods", "-o", "yaml")
		t.Fatalf("kubectl delete foo example-foo --cascade=foreground: %v\n%s\nleft:\n%s", r.err, r, left.stdout)
	}
	t.Logf("kubectl delete --cascade=foreground returned after %v", time.Since(start).Round(time.Millisecond))
	// No polling: the command returned, so everything is gone already.
	if r := e.run("get", "deployment", "example-foo"); r.err == nil || !strings.Contains(r.stderr, "NotFound") {
		t.Errorf("the Deployment outlived kubectl delete --cascade=foreground:\n%s", r)
	}
	if got := e.ok("get", "rs,pods", "-l", "controller=example-foo", "-o", "name").stdout; got != "" {
		left := e.run("get", "rs,pods", "-l", "controller=example-foo", "-o", "yaml")
		t.Errorf("left after kubectl delete --cascade=foreground: %q\n%s", got, left.stdout)
	}
}
