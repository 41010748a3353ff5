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
// kubectl creates the CRD and example-foo; the Deployment example-foo
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

	// Two commands, as with kube: kubectl maps every object of a file
	// before it creates any.
	e.ok("create", "-f", filepath.Join(example, "crd.yaml"))
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

	// until polls a kubectl get until it prints want.
	until := func(what, want string, args ...string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			r := e.run(args...)
			if r.err == nil && strings.TrimSpace(r.stdout) == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: kubectl %s printed %q, want %q\n%s", what, strings.Join(args, " "), r.stdout, want, r)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	until("the Deployment of one replica, controlled by the Foo", "1 Foo/example-foo/true",
		"get", "deployment", "example-foo", "-o", "jsonpath={.spec.replicas} {.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}/{.metadata.ownerReferences[0].controller}")
	until("its ReplicaSet's pod is Ready", "ReplicaSet True",
		"get", "pods", "-l", "controller=example-foo", "-o", `jsonpath={.items[*].metadata.ownerReferences[0].kind} {.items[*].status.conditions[?(@.type=="Ready")].status}`)
	until("one ReplicaSet, controlled by the Deployment", "Deployment/example-foo",
		"get", "rs", "-l", "controller=example-foo", "-o", "jsonpath={.items[*].metadata.ownerReferences[0].kind}/{.items[*].metadata.ownerReferences[0].name}")
	until("the Foo's status says 1 available", "1",
		"get", "foo", "example-foo", "-o", "jsonpath={.status.availableReplicas}")

	e.ok("patch", "foo", "example-foo", "--type", "merge", "-p", `{"spec":{"replicas":3}}`)
	until("the Deployment has 3 replicas", "3", "get", "deployment", "example-foo", "-o", "jsonpath={.spec.replicas}")
	until("the Foo's status says 3 available", "3", "get", "foo", "example-foo", "-o", "jsonpath={.status.availableReplicas}")
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
