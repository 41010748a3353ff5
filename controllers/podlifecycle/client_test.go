package podlifecycle

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/client"
)

// podServer is a minimal API server for one pod over real HTTP: enough of
// pods/{name}, its binding subresource (when hasBinding) and PUT to tell
// which way Bind went.
type podServer struct {
	mu         sync.Mutex
	hasBinding bool
	pod        *corev1.Pod // nil: no such pod
	calls      []string
}

func (s *podServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, r.Method+" "+r.URL.Path)
	status := func(code int, reason metav1.StatusReason, details *metav1.StatusDetails) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Details: details})
	}
	notFoundPod := func() { status(404, metav1.StatusReasonNotFound, &metav1.StatusDetails{Name: "web-1", Kind: "pods"}) }
	switch {
	case r.URL.Path == "/api/v1/namespaces/ns/pods/web-1/binding" && r.Method == http.MethodPost:
		if !s.hasBinding {
			status(404, metav1.StatusReasonNotFound, nil) // no such route
			return
		}
		if s.pod == nil {
			notFoundPod()
			return
		}
		var b corev1.Binding
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &b); err != nil || b.UID != s.pod.UID {
			status(409, metav1.StatusReasonConflict, nil)
			return
		}
		s.pod.Spec.NodeName = b.Target.Name
		status(201, "", nil)
	case r.URL.Path == "/api/v1/namespaces/ns/pods/web-1" && r.Method == http.MethodGet:
		if s.pod == nil {
			notFoundPod()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.pod)
	case r.URL.Path == "/api/v1/namespaces/ns/pods/web-1" && r.Method == http.MethodPut:
		var p corev1.Pod
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &p); err != nil || p.ResourceVersion != s.pod.ResourceVersion {
			status(409, metav1.StatusReasonConflict, nil)
			return
		}
		p.ResourceVersion += "1"
		s.pod = &p
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.pod)
	default:
		status(404, metav1.StatusReasonNotFound, nil)
	}
}

func TestPodLifecycleBind(t *testing.T) {
	pod := func(uid types.UID, node string) *corev1.Pod {
		return &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: uid, ResourceVersion: "5"},
			Spec:       corev1.PodSpec{NodeName: node}}
	}
	tests := []struct {
		name       string
		hasBinding bool
		pod        *corev1.Pod
		uid        types.UID
		wantErr    func(error) bool
		wantNode   string
		wantCalls  string
	}{
		{name: "binding subresource", hasBinding: true, pod: pod("u1", ""), uid: "u1", wantNode: "node-2",
			wantCalls: "POST /api/v1/namespaces/ns/pods/web-1/binding"},
		{name: "binding: pod gone", hasBinding: true, uid: "u1", wantErr: apierrors.IsNotFound,
			wantCalls: "POST /api/v1/namespaces/ns/pods/web-1/binding"},
		{name: "no subresource: spec.nodeName update", pod: pod("u1", ""), uid: "u1", wantNode: "node-2",
			wantCalls: "POST /api/v1/namespaces/ns/pods/web-1/binding,GET /api/v1/namespaces/ns/pods/web-1,PUT /api/v1/namespaces/ns/pods/web-1"},
		{name: "no subresource: another pod of that name", pod: pod("u2", ""), uid: "u1", wantErr: apierrors.IsNotFound, wantNode: "",
			wantCalls: "POST /api/v1/namespaces/ns/pods/web-1/binding,GET /api/v1/namespaces/ns/pods/web-1"},
		{name: "no subresource: bound already", pod: pod("u1", "node-9"), uid: "u1", wantErr: apierrors.IsConflict, wantNode: "node-9",
			wantCalls: "POST /api/v1/namespaces/ns/pods/web-1/binding,GET /api/v1/namespaces/ns/pods/web-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &podServer{hasBinding: tt.hasBinding, pod: tt.pod}
			srv := httptest.NewServer(s)
			defer srv.Close()
			c, err := client.New(&client.Config{REST: &rest.Config{Host: srv.URL}, PreferJSON: true, QPS: -1})
			if err != nil {
				t.Fatal(err)
			}
			pc := NewClient(c)
			err = pc.Bind(context.Background(), "ns", "web-1", tt.uid, "node-2")
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("Bind: %v", err)
			case tt.wantErr != nil && !tt.wantErr(err):
				t.Fatalf("Bind: %v, not the error wanted", err)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if got := strings.Join(s.calls, ","); got != tt.wantCalls {
				t.Errorf("calls %s\nwant  %s", got, tt.wantCalls)
			}
			if s.pod != nil && s.pod.Spec.NodeName != tt.wantNode {
				t.Errorf("node %q, want %q", s.pod.Spec.NodeName, tt.wantNode)
			}
		})
	}
}
