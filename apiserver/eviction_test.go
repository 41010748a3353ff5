package apiserver

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
)

// Evictions made at once share their budget: of four pods evicted
// together under a budget allowing two disruptions, two are evicted and
// two refused with 429, whatever the order in which the budget's status
// writes conflict; the budget ends allowing none, the two evicted pods in
// its disruptedPods.
func TestEvictionsShareTheBudget(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		const n = 4
		for i := range n {
			name := fmt.Sprintf("web-%d", i)
			c.mustDo("POST", "/api/v1/namespaces/default/pods", "", podBody(`{"name":"`+name+`","labels":{"app":"web"}}`, ""), http.StatusCreated)
			c.mustDo("POST", "/api/v1/namespaces/default/pods/"+name+"/binding", "",
				`{"apiVersion":"v1","kind":"Binding","metadata":{"name":"`+name+`"},"target":{"kind":"Node","name":"node-1"}}`, http.StatusCreated)
			c.mustDo("PATCH", "/api/v1/namespaces/default/pods/"+name+"/status", "application/merge-patch+json",
				`{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}`, http.StatusOK)
		}
		c.mustDo("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", "",
			`{"metadata":{"name":"web"},"spec":{"minAvailable":2,"selector":{"matchLabels":{"app":"web"}}}}`, http.StatusCreated)
		c.mustDo("PATCH", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web/status", "application/merge-patch+json",
			`{"status":{"observedGeneration":1,"currentHealthy":4,"desiredHealthy":2,"expectedPods":4,"disruptionsAllowed":2}}`, http.StatusOK)

		codes := make([]int, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				name := fmt.Sprintf("web-%d", i)
				r := c.do("POST", "/api/v1/namespaces/default/pods/"+name+"/eviction", "",
					`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"`+name+`"}}`)
				codes[i] = r.code
			})
		}
		wg.Wait()
		evicted := map[string]bool{}
		for i, code := range codes {
			switch code {
			case http.StatusCreated:
				evicted[fmt.Sprintf("web-%d", i)] = true
			case http.StatusTooManyRequests:
			default:
				t.Errorf("eviction of web-%d: %d", i, code)
			}
		}
		if len(evicted) != 2 {
			t.Fatalf("evictions answered %v: %d evicted, want 2", codes, len(evicted))
		}
		pdb := c.mustDo("GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web", "", "", http.StatusOK)
		if got := nested(pdb, "status.disruptionsAllowed"); fmt.Sprint(got) != "0" {
			t.Errorf("disruptionsAllowed %v, want 0", got)
		}
		disrupted, _ := nested(pdb, "status.disruptedPods").(map[string]any)
		if len(disrupted) != 2 {
			t.Errorf("disruptedPods %v, want the two evicted", disrupted)
		}
		for name := range disrupted {
			if !evicted[name] {
				t.Errorf("disruptedPods holds %s, which was not evicted (%v)", name, codes)
			}
		}
		for i := range n {
			name := fmt.Sprintf("web-%d", i)
			pod := c.mustDo("GET", "/api/v1/namespaces/default/pods/"+name, "", "", http.StatusOK)
			if deleting := nested(pod, "metadata.deletionTimestamp") != nil; deleting != evicted[name] {
				t.Errorf("%s being deleted: %v, evicted: %v", name, deleting, evicted[name])
			}
		}
	})
}
