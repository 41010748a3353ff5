package apiserver

import (
	"fmt"
	"net/http"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// kubeletSubresources are the pods' subresources that kube-apiserver
// serves by proxying to the kubelet of the pod's node, with the methods
// each takes (kube-apiserver's discovery verbs: get for logs, get and
// create for the streams, every verb for the proxy).
var kubeletSubresources = map[string][]string{
	"log":         {http.MethodGet, http.MethodHead},
	"exec":        {http.MethodGet, http.MethodHead, http.MethodPost},
	"attach":      {http.MethodGet, http.MethodHead, http.MethodPost},
	"portforward": {http.MethodGet, http.MethodHead, http.MethodPost},
	"proxy":       nil, // every method
}

// isKubeletSubresource reports whether sub of gr is one of them.
func isKubeletSubresource(gr schema.GroupResource, sub string) bool {
	_, ok := kubeletSubresources[sub]
	return ok && gr == schema.GroupResource{Resource: "pods"}
}

// handleKubelet answers a pod's log, exec, attach, portforward or proxy
// request. No kubelet runs behind listwatch's nodes (they are simulated),
// so where kube-apiserver would proxy to one, the answer is a 503 saying
// so: a bare 404 or a dial error to a made-up address would leave a user
// of kubectl logs guessing. A missing pod is NotFound first, as it is
// for kube-apiserver, which reads the pod before it dials.
func (s *Server) handleKubelet(r *http.Request, req request) error {
	if methods := kubeletSubresources[req.sub]; methods != nil && !slices.Contains(methods, r.Method) {
		// The route has no handler for the method: kube's generic 405
		// (golden core-pods-kubelet).
		return methodNotAllowedPath(r)
	}
	pod, err := s.readPod(r.Context(), req)
	if err != nil {
		return err
	}
	where := "is not scheduled to a node yet"
	if pod.Spec.NodeName != "" {
		where = fmt.Sprintf("runs on node %q, which listwatch simulates", pod.Spec.NodeName)
	}
	return apierrors.NewServiceUnavailable(fmt.Sprintf(
		"pods/%s of %s/%s is served by a node's kubelet, and no kubelet runs here: the pod %s", req.sub, pod.Namespace, pod.Name, where))
}
