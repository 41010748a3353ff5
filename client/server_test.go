package client

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// fakeServer replays recorded responses for pods the way an API server
// sends them: lists in pages, watches as streams, in JSON or protobuf as
// asked.
type fakeServer struct {
	pods     []*corev1.Pod
	jsonEvs  [][]byte // the watch history as JSON events
	protoEvs [][]byte // and as protobuf frames
	noProto  bool     // answer 406 to a request for protobuf only
	listRV   string
	mu       sync.Mutex
	requests []*http.Request
}

func (s *fakeServer) record(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r)
}

func (s *fakeServer) lastRequests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.requests...)
}

func wantsProto(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Accept"), mediaTypeProtobuf)
}

func (s *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.record(r)
	proto := wantsProto(r)
	if proto && s.noProto {
		if !strings.Contains(r.Header.Get("Accept"), "application/json") {
			http.Error(w, "not acceptable", http.StatusNotAcceptable)
			return
		}
		proto = false
	}
	q := r.URL.Query()
	if r.URL.Path != "/api/v1/namespaces/default/pods" && r.URL.Path != "/api/v1/pods" {
		writeStatus(w, metav1.Status{Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound, Message: "the server could not find the requested resource"})
		return
	}
	if q.Get("watch") == "true" {
		s.watch(w, r, proto)
		return
	}
	start := 0
	if c := q.Get("continue"); c != "" {
		start, _ = strconv.Atoi(c)
	}
	end := len(s.pods)
	if l, _ := strconv.Atoi(q.Get("limit")); l > 0 && start+l < end {
		end = start + l
	}
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, ListMeta: metav1.ListMeta{ResourceVersion: s.listRV}}
	for _, p := range s.pods[start:end] {
		cp := *p
		cp.TypeMeta = metav1.TypeMeta{} // items of a typed list carry no kind
		list.Items = append(list.Items, cp)
	}
	if end < len(s.pods) {
		list.Continue = strconv.Itoa(end)
		rem := int64(len(s.pods) - end)
		list.RemainingItemCount = &rem
	}
	if proto {
		w.Header().Set("Content-Type", mediaTypeProtobuf)
		raw, _ := list.Marshal()
		w.Write(wrapEnvelope(raw, "v1", "PodList"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(list)
}

func (s *fakeServer) watch(w http.ResponseWriter, r *http.Request, proto bool) {
	fl := w.(http.Flusher)
	frames := s.jsonEvs
	if proto {
		frames = s.protoEvs
	}
	if proto {
		w.Header().Set("Content-Type", mediaTypeProtobuf+";stream=watch")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	for _, f := range frames {
		if _, err := w.Write(f); err != nil {
			return
		}
		fl.Flush()
	}
}

func writeStatus(w http.ResponseWriter, st metav1.Status) {
	st.Kind, st.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	json.NewEncoder(w).Encode(st)
}

func wrapEnvelope(raw []byte, apiVersion, kind string) []byte {
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: raw}
	b, _ := u.Marshal()
	return append(append([]byte{}, protoMagic...), b...)
}

// newFakeServer serves pods and a watch history.
func newFakeServer(t *testing.T, pods []*corev1.Pod, hist []recordedEvent) *fakeServer {
	s := &fakeServer{pods: pods, listRV: "100"}
	for _, ev := range hist {
		s.jsonEvs = append(s.jsonEvs, jsonStream(t, []recordedEvent{ev}))
		s.protoEvs = append(s.protoEvs, protoFrame(t, ev))
	}
	return s
}

// newTestClient returns a client of srv without rate limits.
func newTestClient(t *testing.T, url string, mod func(*Config)) *Client {
	t.Helper()
	cfg := &Config{REST: &rest.Config{Host: url}, QPS: -1}
	if mod != nil {
		mod(cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func startServer(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv
}
