package main

import (
	"strings"
	"testing"
	"time"
)

// TestKubectlCustomResources is seed 002's first steps with the real
// kubectl against `listwatch up`: the sample controller's CRD (installed
// by --custom-resources) and example-foo, kube's printer columns, kube's
// validation message for replicas: 11, the status subresource ignoring
// status in a main-resource update; then a CRD created, changed (a new
// version, a new column) and deleted while the server runs, its custom
// resources going with it.
func TestKubectlCustomResources(t *testing.T) {
	e := newKubectlEnv(t)
	e.ok("create", "-f", e.file("example-foo.yaml", kubectlFoo(1)))

	t.Run("get foos", func(t *testing.T) {
		rows := tableRows(e.ok("get", "foos").stdout)
		if strings.Join(rows[0], " ") != "NAME AGE" || rowFor(rows, "example-foo") == nil {
			t.Errorf("get foos: %v", rows)
		}
		crds := tableRows(e.ok("get", "crd").stdout)
		// apiextensions-apiserver's own Table of definitions.
		if strings.Join(crds[0], " ") != "NAME SCOPE VERSIONS CREATED AT" || len(rowFor(crds, "foos.samplecontroller.k8s.io")) < 4 ||
			rowFor(crds, "foos.samplecontroller.k8s.io")[2] != "v1alpha1(storage)" {
			t.Errorf("get crd: %v", crds)
		}
	})

	t.Run("replicas 11 refused", func(t *testing.T) {
		r := e.run("apply", "-f", e.file("foo11.yaml", kubectlFoo(11)))
		want := `The Foo "example-foo" is invalid: spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10`
		if r.err == nil || !strings.Contains(r.stderr, want) {
			t.Errorf("replicas: 11: %v\n%s\nwant %s", r.err, r, want)
		}
	})

	t.Run("status ignored on main update", func(t *testing.T) {
		e.ok("patch", "foo", "example-foo", "--type=merge", "-p", `{"spec":{"replicas":2},"status":{"availableReplicas":7}}`)
		got := e.ok("get", "foo", "example-foo", "-o", "jsonpath={.spec.replicas}/{.status.availableReplicas}").stdout
		if got != "2/" {
			t.Errorf("after a main patch with status: %q, want 2/", got)
		}
		e.ok("patch", "foo", "example-foo", "--subresource=status", "--type=merge", "-p", `{"status":{"availableReplicas":2}}`)
		got = e.ok("get", "foo", "example-foo", "-o", "jsonpath={.spec.replicas}/{.status.availableReplicas}").stdout
		if got != "2/2" {
			t.Errorf("after a status patch: %q, want 2/2", got)
		}
	})

	t.Run("crd changed and deleted live", func(t *testing.T) {
		e.ok("create", "-f", e.file("bars.yaml", kubectlBarsCRD(false)))
		e.ok("wait", "--for=condition=Established", "crd/bars.example.listwatch.dev", "--timeout=30s")
		e.ok("create", "-f", e.file("bar.yaml", "apiVersion: example.listwatch.dev/v1\nkind: Bar\nmetadata:\n  name: b1\nspec:\n  size: 3\n"))
		rows := tableRows(e.ok("get", "bars").stdout)
		if strings.Join(rows[0], " ") != "NAME AGE" {
			t.Errorf("get bars: %v", rows)
		}
		// A new version and a column, seen without a restart.
		e.ok("apply", "-f", e.file("bars.yaml", kubectlBarsCRD(true)))
		deadline := time.Now().Add(30 * time.Second)
		for {
			r := e.run("get", "bars.v2.example.listwatch.dev")
			rows = tableRows(r.stdout)
			if r.err == nil && len(rows) > 0 && strings.Join(rows[0], " ") == "NAME SIZE AGE" {
				if row := rowFor(rows, "b1"); len(row) != 3 || row[1] != "3" {
					t.Errorf("get bars at v2: %v", rows)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("v2 not served with its column: %v\n%s", r.err, r)
			}
			time.Sleep(100 * time.Millisecond)
		}
		e.ok("delete", "crd", "bars.example.listwatch.dev", "--timeout=30s")
		// kubectl's discovery cache may still name bars; the server
		// answers 404 either way.
		r := e.run("get", "bars")
		if r.err == nil || !strings.Contains(r.stderr, `the server doesn't have a resource type "bars"`) && !strings.Contains(r.stderr, "the server could not find the requested resource") {
			t.Errorf("bars still served after delete crd: %v\n%s", r.err, r)
		}
		// Recreated, the definition serves none of the old Bars.
		e.ok("create", "-f", e.file("bars.yaml", kubectlBarsCRD(false)))
		e.ok("wait", "--for=condition=Established", "crd/bars.example.listwatch.dev", "--timeout=30s")
		if out := e.ok("get", "bars.v1.example.listwatch.dev", "-o", "name").stdout; strings.TrimSpace(out) != "" {
			t.Errorf("Bars left after their CRD was deleted: %q", out)
		}
	})
}

// kubectlBarsCRD is a definition of Bars at v1, and with v2 also at v2
// with a Size column.
func kubectlBarsCRD(v2 bool) string {
	crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: bars.example.listwatch.dev
spec:
  group: example.listwatch.dev
  scope: Namespaced
  names: {kind: Bar, plural: bars}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
`
	if v2 {
		crd += `  - name: v2
    served: true
    storage: false
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
`
	}
	return crd
}
