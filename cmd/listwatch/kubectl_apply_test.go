package main

import (
	"strings"
	"testing"
)

// TestKubectlServerSideApply is issue 19's walk with the real kubectl
// against `listwatch up`: server-side apply by two field managers and the
// conflict kubectl prints, taken with --force-conflicts; a client-side
// apply upgraded by apply --server-side; diff --server-side; a server dry
// run that stores nothing; and --validate=strict refusing an unknown
// field.
func TestKubectlServerSideApply(t *testing.T) {
	e := newKubectlEnv(t)
	cm := func(value string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n  namespace: default\ndata:\n  key: " + value + "\n"
	}

	t.Run("two managers conflict, then force", func(t *testing.T) {
		e.ok("apply", "--server-side", "--field-manager=alpha", "-f", e.file("ssa-a.yaml", cm("a")))
		r := e.run("apply", "--server-side", "--field-manager=beta", "-f", e.file("ssa-b.yaml", cm("b")))
		// kubectl prints the server's conflict and how to resolve it.
		if r.err == nil || !strings.Contains(r.stderr, `conflict with "alpha": .data.key`) {
			t.Fatalf("second manager: want the conflict with alpha, got %v\n%s", r.err, r)
		}
		e.ok("apply", "--server-side", "--field-manager=beta", "--force-conflicts", "-f", e.file("ssa-b.yaml", cm("b")))
		got := e.ok("get", "configmap", "ssa", "-o", "jsonpath={.data.key} {.metadata.managedFields[*].manager}").stdout
		if got != "b beta" {
			t.Errorf("after the forced apply: %q, want the value b owned by beta alone", got)
		}
	})

	t.Run("client-side apply then server-side apply", func(t *testing.T) {
		deploy := func(image string) string {
			return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: upgrade\n  namespace: default\nspec:\n  replicas: 1\n" +
				"  selector:\n    matchLabels: {app: upgrade}\n  template:\n    metadata:\n      labels: {app: upgrade}\n" +
				"    spec:\n      containers:\n      - name: main\n        image: " + image + "\n"
		}
		e.ok("apply", "-f", e.file("upgrade.yaml", deploy("nginx:1.27")))
		// The fields the client-side apply set belong to
		// kubectl-client-side-apply; the server-side apply takes them
		// over without a conflict, from the last-applied annotation.
		e.ok("apply", "--server-side", "-f", e.file("upgrade.yaml", deploy("nginx:1.28")))
		got := e.ok("get", "deployment", "upgrade", "-o", `jsonpath={.spec.template.spec.containers[0].image} {range .metadata.managedFields[*]}{.manager}/{.operation} {end}`).stdout
		if !strings.HasPrefix(got, "nginx:1.28 ") || !strings.Contains(got, "kubectl/Apply") {
			t.Errorf("after apply --server-side: %q, want nginx:1.28 applied by kubectl", got)
		}
	})

	t.Run("diff --server-side", func(t *testing.T) {
		// diff exits 1 when there are differences.
		r := e.run("diff", "--server-side", "--field-manager=beta", "-f", e.file("ssa-c.yaml", cm("c")))
		if r.err == nil || !strings.Contains(r.stdout, "+  key: c") || !strings.Contains(r.stdout, "-  key: b") {
			t.Errorf("diff --server-side: %v\n%s", r.err, r)
		}
		if got := e.ok("get", "configmap", "ssa", "-o", "jsonpath={.data.key}").stdout; got != "b" {
			t.Errorf("diff changed the object: key=%q", got)
		}
	})

	t.Run("create --dry-run=server", func(t *testing.T) {
		out := e.ok("create", "configmap", "dry", "--from-literal=k=v", "--dry-run=server", "-o", "jsonpath={.metadata.name} {.data.k}").stdout
		if out != "dry v" {
			t.Errorf("dry run answered %q", out)
		}
		if r := e.run("get", "configmap", "dry"); r.err == nil || !strings.Contains(r.stderr, "NotFound") {
			t.Errorf("the dry run stored the object: %v\n%s", r.err, r)
		}
	})

	t.Run("validate=strict", func(t *testing.T) {
		r := e.run("apply", "--validate=strict", "-f", e.file("unknown.yaml",
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: strict\n  namespace: default\ndata:\n  k: v\nbogus: 1\n"))
		if r.err == nil || !strings.Contains(r.stderr, `unknown field "bogus"`) {
			t.Errorf("--validate=strict with an unknown field: %v\n%s", r.err, r)
		}
		if r := e.run("get", "configmap", "strict"); r.err == nil {
			t.Errorf("the refused object was stored")
		}
	})
}
