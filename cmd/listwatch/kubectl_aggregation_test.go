package main

import (
	"strings"
	"testing"
	"time"
)

// TestKubectlAggregatedRoles: on `up`, the clusterrole-aggregation
// controller gives the bootstrap role view the rules of
// system:aggregate-to-view, so a user bound to view alone reads pods, and
// a ClusterRole labelled rbac.authorization.k8s.io/aggregate-to-view then
// extends view (and edit and admin, which aggregate view) as it would in
// a cluster.
func TestKubectlAggregatedRoles(t *testing.T) {
	e := newKubectlEnv(t)
	e.ok("create", "namespace", "agg")
	e.ok("-n", "agg", "create", "rolebinding", "carol-view", "--clusterrole=view", "--user=carol")

	// until polls kubectl args until its stdout is want: the controller
	// aggregates asynchronously, as kube's does.
	until := func(what, want string, args ...string) {
		t.Helper()
		var last kubectlResult
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			last = e.run(args...)
			if strings.TrimSpace(last.stdout) == want {
				return
			}
		}
		t.Fatalf("%s: kubectl %v: %v\n%s\nwant stdout %q", what, args, last.err, last, want)
	}
	until("view lets list pods", "yes", "auth", "can-i", "list", "pods", "-n", "agg", "--as=carol")
	e.ok("--as=carol", "-n", "agg", "get", "pods")
	r := e.run("--as=carol", "-n", "agg", "get", "secrets")
	want := `Error from server (Forbidden): secrets is forbidden: User "carol" cannot list resource "secrets" in API group "" in the namespace "agg"`
	if r.err == nil || !strings.Contains(r.stderr, want) {
		t.Fatalf("list secrets as carol before the new role: %v\n%s\nwant %s", r.err, r, want)
	}

	e.ok("create", "clusterrole", "secret-reader", "--verb=list", "--resource=secrets")
	e.ok("label", "clusterrole", "secret-reader", "rbac.authorization.k8s.io/aggregate-to-view=true")
	until("the labelled role extends view", "yes", "auth", "can-i", "list", "secrets", "-n", "agg", "--as=carol")
	e.ok("--as=carol", "-n", "agg", "get", "secrets")
	rules := e.ok("get", "clusterrole", "admin", "-o", "jsonpath={.rules[*].resources}").stdout
	if !strings.Contains(rules, `["secrets"]`) {
		t.Errorf("admin does not aggregate view's new rule: %s", rules)
	}
	managers := e.ok("get", "clusterrole", "view", "--show-managed-fields", "-o", "jsonpath={.metadata.managedFields[*].manager}").stdout
	if !strings.Contains(managers, "clusterrole-aggregation-controller") {
		t.Errorf("view's rules are not managed by clusterrole-aggregation-controller: %q", managers)
	}

	e.ok("delete", "clusterrole", "secret-reader")
	until("the deleted role's rules leave view", "no", "auth", "can-i", "list", "secrets", "-n", "agg", "--as=carol")
}
