// Package webhookserver is an admission webhook server on 127.0.0.1, over
// HTTPS with a certificate of its own, whose answers are chosen by the
// path a webhook configuration calls: the webhook the golden recorder runs
// beside kube-apiserver, and the golden test and the server's tests beside
// listwatch, so that both servers call the same webhook.
//
// The first segment of the path chooses the answer, so that webhooks
// answering alike are still told apart by the rest (/allow/dry-run).
// Answers (Answers lists them): /allow, /deny (no code), /deny-409, /patch
// (a JSON patch adding the label webhook=patched), /annotate (one adding
// the annotation webhook=annotated), /oversize (one setting a 3 MiB
// annotation), /warn (allowed, with two
// warnings), /slow (answers once the caller gives up), /crash (closes the
// connection unanswered), /garbage (a 200 that is not JSON), /wrong-uid
// (an answer for another request), /status-500, and /unreachable is never
// served (Unreachable gives a URL nothing listens on).
//
// It is a CRD conversion webhook too, answering ConversionReview v1
// requests (conversion.go): /convert moves a field between versions v1
// and v2, /convert-fail refuses every conversion.
package webhookserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/internal/pki"
)

// Messages and warnings the answers carry.
const (
	DenyMessage = "denied by the test webhook"
	Warning1    = "the test webhook warns once"
	Warning2    = "the test webhook warns twice"
	PatchLabel  = "webhook"
	PatchValue  = "patched"
	// AnnotateValue is what /annotate sets the annotation PatchLabel to.
	AnnotateValue = "annotated"
	// OversizeBytes is the size of the annotation /oversize sets: more
	// than an object may hold (etcd's limit of a request is 1.5 MiB).
	OversizeBytes = 3 << 20
)

// Answers are the paths the server answers on.
var Answers = []string{"/allow", "/deny", "/deny-409", "/patch", "/annotate", "/oversize", "/warn", "/slow", "/crash", "/garbage", "/wrong-uid", "/status-500", ConvertPath, ConvertFailPath}

// Server is a running webhook server.
type Server struct {
	// URL is the server's base URL, https://127.0.0.1:port.
	URL string
	// CABundle is the PEM CA certificate a webhook configuration's
	// caBundle names to trust the server.
	CABundle []byte

	hs   *httptest.Server
	stop chan struct{}

	mu       sync.Mutex
	requests map[string][]json.RawMessage
}

// Start serves the webhook on a free port of 127.0.0.1 with a serving
// certificate for 127.0.0.1 and hosts (the names a Service reference is
// verified against, e.g. "webhook.ns.svc"), made in dir. Close stops it.
func Start(dir string, hosts ...string) (*Server, error) {
	return StartAt("127.0.0.1:0", dir, hosts...)
}

// StartAt is Start listening on addr, e.g. an address of the host that
// an EndpointSlice may name (kube refuses loopback endpoints).
func StartAt(addr, dir string, hosts ...string) (*Server, error) {
	serving, err := pki.EnsureServing(dir, hosts...)
	if err != nil {
		return nil, fmt.Errorf("webhookserver: %w", err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("webhookserver: %w", err)
	}
	s := &Server{CABundle: serving.CAPEM, stop: make(chan struct{}), requests: map[string][]json.RawMessage{}}
	s.hs = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.hs.Listener.Close()
	s.hs.Listener = l
	s.hs.TLS = serving.TLSConfig()
	s.hs.StartTLS()
	s.URL = s.hs.URL
	return s, nil
}

// Close stops the server, ending the answers held back (/slow).
func (s *Server) Close() {
	close(s.stop)
	s.hs.CloseClientConnections()
	s.hs.Close()
}

// Port is the port the server listens on.
func (s *Server) Port() int {
	return s.hs.Listener.Addr().(*net.TCPAddr).Port
}

// Requests returns the AdmissionReview (or ConversionReview) requests
// received at path, oldest first, as JSON.
func (s *Server) Requests(path string) []json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]json.RawMessage(nil), s.requests[path]...)
}

// HostAddress is an IPv4 address of this machine other than loopback,
// which an EndpointSlice may name; false when it has none.
func HostAddress() (string, bool) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String(), true
		}
	}
	return "", false
}

// Unreachable is a URL on 127.0.0.1 at which nothing listens: a port the
// system gave and took back.
func Unreachable() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("webhookserver: %w", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", fmt.Errorf("webhookserver: %w", err)
	}
	return "https://" + addr + "/unreachable", nil
}

// maxReview bounds the review read.
const maxReview = 8 << 20

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReview))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if answer, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/"); "/"+answer == ConvertPath || "/"+answer == ConvertFailPath {
		s.convert(w, r, "/"+answer == ConvertFailPath, body)
		return
	}
	review := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(body, review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not an AdmissionReview request: %v", errors.Join(err, errors.New("no request"))), http.StatusBadRequest)
		return
	}
	s.record(r.URL.Path, body)

	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	switch answer, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/"); "/" + answer {
	case "/allow":
	case "/deny":
		resp.Allowed = false
		resp.Result = &metav1.Status{Message: DenyMessage}
	case "/deny-409":
		resp.Allowed = false
		resp.Result = &metav1.Status{Code: http.StatusConflict, Reason: metav1.StatusReasonConflict, Message: DenyMessage}
	case "/patch", "/annotate":
		patch, err := addPatch(review.Request.Object.Raw, answer == "annotate")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = patch, &pt
	case "/oversize":
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch = fmt.Appendf(nil, `[{"op":"add","path":"/metadata/annotations","value":{%q:%q}}]`, PatchLabel, strings.Repeat("x", OversizeBytes))
		resp.PatchType = &pt
	case "/warn":
		resp.Warnings = []string{Warning1, Warning2}
	case "/slow":
		select {
		case <-r.Context().Done():
			return
		case <-s.stop:
			return
		}
	case "/crash":
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	case "/garbage":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "this is not an AdmissionReview")
		return
	case "/wrong-uid":
		resp.UID = "00000000-0000-0000-0000-000000000000"
	case "/status-500":
		http.Error(w, "the test webhook failed", http.StatusInternalServerError)
		return
	default:
		http.NotFound(w, r)
		return
	}
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// addPatch is a JSON patch that sets the label PatchLabel on obj, or
// with annotate the annotation PatchLabel to AnnotateValue.
func addPatch(obj []byte, annotate bool) ([]byte, error) {
	var o struct {
		Metadata struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(obj, &o); err != nil {
		return nil, fmt.Errorf("object: %w", err)
	}
	field, have, value := "labels", o.Metadata.Labels != nil, PatchValue
	if annotate {
		field, have, value = "annotations", o.Metadata.Annotations != nil, AnnotateValue
	}
	if !have {
		return fmt.Appendf(nil, `[{"op":"add","path":"/metadata/%s","value":{%q:%q}}]`, field, PatchLabel, value), nil
	}
	return fmt.Appendf(nil, `[{"op":"add","path":"/metadata/%s/%s","value":%q}]`, field, strings.ReplaceAll(PatchLabel, "/", "~1"), value), nil
}

// record keeps the request of the review body, already decoded, as it
// came, under the path it was sent to.
func (s *Server) record(path string, body []byte) {
	var raw struct {
		Request json.RawMessage `json:"request"`
	}
	_ = json.Unmarshal(body, &raw)
	s.mu.Lock()
	s.requests[path] = append(s.requests[path], raw.Request)
	s.mu.Unlock()
}
