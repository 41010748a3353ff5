package main

import (
	"strings"
	"testing"
	"time"
)

// kubectlBudget is a PodDisruptionBudget of minAvailable 2 over app=web.
const kubectlBudget = `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
spec:
  minAvailable: 2
  selector:
    matchLabels: {app: web}
`

// TestKubectlDrain is `kubectl drain` of two of the three nodes of `up`
// with the real kubectl, under a PodDisruptionBudget of minAvailable 2
// over a Deployment of 3 (one pod a node): kubectl finds pods/eviction in
// discovery and evicts; the first node's pod goes at once, the second's
// is refused (429) until the Deployment's replacement of the first is
// Ready, and kubectl retries until it is allowed. Both nodes end
// cordoned, every pod on the third, the budget allowing one disruption
// again.
func TestKubectlDrain(t *testing.T) {
	e := newKubectlEnv(t)
	e.ok("apply", "-f", e.file("web.yaml", kubectlDeployment(3)), "-f", e.file("pdb.yaml", kubectlBudget))
	e.ok("rollout", "status", "deployment/web", "--timeout=60s")
	e.ok("wait", "--for=jsonpath={.status.disruptionsAllowed}=1", "pdb/web", "--timeout=30s")

	nodes := e.ok("get", "pods", "-l", "app=web", "-o", `jsonpath={range .items[*]}{.spec.nodeName}{"\n"}{end}`).stdout
	perNode := map[string]int{}
	for _, n := range strings.Fields(nodes) {
		perNode[n]++
	}
	if len(perNode) != 3 {
		t.Fatalf("pods by node: %v, want one on each of three", perNode)
	}

	start := time.Now()
	r := e.ok("drain", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=90s", "node-1", "node-2")
	took := time.Since(start)
	out := r.stdout + r.stderr
	t.Logf("drained two nodes under the budget in %v:\n%s", took.Round(time.Millisecond), out)
	for _, want := range []string{"evicting pod", "node/node-1 drained", "node/node-2 drained"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl drain said nothing of %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "deleting pod") {
		t.Errorf("kubectl drain deleted pods instead of evicting them:\n%s", out)
	}
	if !strings.Contains(out, "Cannot evict pod as it would violate the pod's disruption budget") {
		t.Errorf("the second node's eviction was never refused by the budget:\n%s", out)
	}

	for _, n := range []string{"node-1", "node-2"} {
		if got := e.ok("get", "node", n, "-o", "jsonpath={.spec.unschedulable}").stdout; got != "true" {
			t.Errorf("%s unschedulable: %q, want true", n, got)
		}
	}
	e.ok("rollout", "status", "deployment/web", "--timeout=60s")
	nodes = e.ok("get", "pods", "-l", "app=web", "-o", `jsonpath={range .items[*]}{.spec.nodeName}{"\n"}{end}`).stdout
	if got := strings.Fields(nodes); len(got) != 3 || got[0] != "node-3" || got[1] != "node-3" || got[2] != "node-3" {
		t.Errorf("pods on %v, want all three on node-3", got)
	}
	e.ok("wait", "--for=jsonpath={.status.disruptionsAllowed}=1", "pdb/web", "--timeout=30s")
	e.ok("uncordon", "node-1", "node-2")
}
