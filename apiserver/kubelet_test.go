package apiserver

import (
	"net/http"
	"strings"
	"testing"
)

// TestKubeletSubresources: a pod's log, exec, attach, portforward and
// proxy, which kube-apiserver proxies to the pod's kubelet, are answered
// with a 503 that says no kubelet runs here (naming the node, or that the
// pod is not scheduled yet); a missing pod is NotFound first, and a method
// the subresource does not take is 405.
func TestKubeletSubresources(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		c.mustDo("POST", "/api/v1/namespaces/default/pods", "", podBody(`{"name":"bound"}`, ""), http.StatusCreated)
		c.mustDo("POST", "/api/v1/namespaces/default/pods/bound/binding", "",
			`{"apiVersion":"v1","kind":"Binding","metadata":{"name":"bound"},"target":{"kind":"Node","name":"node-1"}}`, http.StatusCreated)
		c.mustDo("POST", "/api/v1/namespaces/default/pods", "", podBody(`{"name":"pending"}`, ""), http.StatusCreated)
		tests := []struct {
			method, path string
			code         int
			reason       string
			message      []string
		}{
			{"GET", "/api/v1/namespaces/default/pods/bound/log", http.StatusServiceUnavailable, "ServiceUnavailable",
				[]string{"pods/log of default/bound", "no kubelet runs here", `node "node-1"`}},
			{"GET", "/api/v1/namespaces/default/pods/bound/log?container=c&follow=true", http.StatusServiceUnavailable, "ServiceUnavailable",
				[]string{"no kubelet runs here"}},
			{"POST", "/api/v1/namespaces/default/pods/bound/exec?command=ls&stdout=true", http.StatusServiceUnavailable, "ServiceUnavailable",
				[]string{"pods/exec of default/bound", `node "node-1"`}},
			{"GET", "/api/v1/namespaces/default/pods/bound/attach", http.StatusServiceUnavailable, "ServiceUnavailable", []string{"pods/attach"}},
			{"POST", "/api/v1/namespaces/default/pods/bound/portforward", http.StatusServiceUnavailable, "ServiceUnavailable", []string{"pods/portforward"}},
			{"DELETE", "/api/v1/namespaces/default/pods/bound/proxy", http.StatusServiceUnavailable, "ServiceUnavailable", []string{"pods/proxy"}},
			{"GET", "/api/v1/namespaces/default/pods/pending/log", http.StatusServiceUnavailable, "ServiceUnavailable",
				[]string{"no kubelet runs here", "not scheduled to a node yet"}},
			{"GET", "/api/v1/namespaces/default/pods/missing/log", http.StatusNotFound, "NotFound", []string{`pods "missing" not found`}},
			{"PUT", "/api/v1/namespaces/default/pods/bound/log", http.StatusMethodNotAllowed, "MethodNotAllowed", nil},
			{"POST", "/api/v1/namespaces/default/pods/bound/log", http.StatusMethodNotAllowed, "MethodNotAllowed", nil},
			{"GET", "/api/v1/namespaces/default/configmaps/x/log", http.StatusNotFound, "NotFound", nil},
		}
		for _, tt := range tests {
			r := c.do(tt.method, tt.path, "", "")
			st := r.obj(t)
			if r.code != tt.code || st["reason"] != tt.reason {
				t.Errorf("%s %s: %d %s, want %d %s", tt.method, tt.path, r.code, r.body, tt.code, tt.reason)
				continue
			}
			msg, _ := st["message"].(string)
			for _, want := range tt.message {
				if !strings.Contains(msg, want) {
					t.Errorf("%s %s: message %q lacks %q", tt.method, tt.path, msg, want)
				}
			}
		}
	})
}
