// Package golden replays tables of API requests against an API server and
// compares the answers with those a real kube-apiserver gave.
//
// A case file (cases/<group>-<resource>.yaml) is a sequence of steps run in
// order in a fresh namespace. The recorder (cmd/record, driven by
// hack/record-goldens.sh) runs them against kube-apiserver and writes what
// it answered, masked, to testdata/<same name>.json; the package's test runs
// them against listwatch's server and compares. The runner, the masking and
// the comparison here are shared by both sides, so that the two answers go
// through the same code.
package golden

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/listwatch/listwatch/internal/webhookserver"
)

// ContentTypes are the short names a step may give as its contentType;
// any other value containing a "/" is sent as it is.
var ContentTypes = map[string]string{
	"json":                  "application/json",
	"merge-patch":           "application/merge-patch+json",
	"strategic-merge-patch": "application/strategic-merge-patch+json",
	"json-patch":            "application/json-patch+json",
}

// ViewDiscovery is the view of a step whose answer is an APIResourceList:
// only what clients act on is kept (see discoveryView).
const ViewDiscovery = "discovery"

// ViewRules is the view of a step whose answer is a SelfSubjectRulesReview
// (or SubjectRulesReview): its rules sorted, since kube-apiserver lists
// them in the order its informers hand out the bindings, which is random.
const ViewRules = "rules"

// ViewWatch is the view of a watch step: its answer, a stream of JSON
// watch events (a watch with a timeoutSeconds, which ends it), is
// compared as the list of its events, each masked. An answer that is not
// 200 is compared as any other.
const ViewWatch = "watch"

// Case is one case file: steps run in order in one fresh namespace.
type Case struct {
	// Name is the file name without ".yaml", e.g. "core-pods".
	Name string `json:"-"`
	// Description says what the file covers.
	Description string `json:"description,omitempty"`
	// Webhook runs an admission webhook server (internal/webhookserver)
	// in the runner's process for the case's steps: {{webhook}} is its
	// base URL, {{cabundle}} the base64 PEM of its CA (a caBundle),
	// {{unreachable}} a URL nothing listens on; steps with Review read
	// what it was sent.
	Webhook bool   `json:"webhook,omitempty"`
	Steps   []Step `json:"steps"`
}

// Step is one request of a case.
//
// Path, query values and the strings of Body (keys and values) may hold
// placeholders: {{ns}} is the case's namespace, {{name:S}}, {{uid:S}} and
// {{rv:S}} are the name, uid and resourceVersion of the object an earlier
// step S answered with; {{nest:N}} is a JSON object nested N levels deep
// (Nest).
type Step struct {
	Name   string `json:"name"`
	Method string `json:"method"`
	// Path is relative to the server, e.g. /api/v1/namespaces/{{ns}}/pods.
	Path  string            `json:"path"`
	Query map[string]string `json:"query,omitempty"`
	// ContentType is a key of ContentTypes or a literal media type; it
	// defaults to "json" when there is a body.
	ContentType string `json:"contentType,omitempty"`
	// Body is sent as JSON; RawBody, when set instead, is sent verbatim
	// (for malformed input).
	Body    any     `json:"body,omitempty"`
	RawBody *string `json:"rawBody,omitempty"`
	// View, when set, names a projection of the answer that is compared
	// instead of the whole body: ViewDiscovery.
	View string `json:"view,omitempty"`
	// Expect is the status code the author expects. It documents the step
	// and the recorder warns when kube-apiserver answers otherwise; the
	// comparison ignores it (the golden is the truth).
	Expect int `json:"expect,omitempty"`
	// Until, when set, sends the request again (every 50 ms, for at most
	// UntilTimeout) until it is answered with this status code: for what
	// a server does after the request that caused it (a
	// CustomResourceDefinition served, or gone). The last answer counts.
	Until int `json:"until,omitempty"`
	// As, when set, makes the step's request as another user: it is sent
	// with kube's impersonation headers (Impersonate-User, one
	// Impersonate-Group per group), which the recording user, in
	// system:masters, may send. Placeholders are substituted in it.
	As *As `json:"as,omitempty"`
	// Review, in a case with a Webhook, makes the step send nothing: its
	// answer is the last AdmissionReview request the webhook server
	// received at this path (e.g. /allow), as JSON, with code 200 (404
	// when none came). Method and Path are then empty.
	Review string `json:"review,omitempty"`
	// Warnings has the answer's Warning headers compared too.
	Warnings bool `json:"warnings,omitempty"`
}

// As is a user a step impersonates.
type As struct {
	User   string   `json:"user"`
	Groups []string `json:"groups,omitempty"`
}

// UntilTimeout bounds the retries of a step with Until.
const UntilTimeout = 60 * time.Second

// Request is a step's request as the case file states it, placeholders
// unsubstituted; the golden keeps it so that a case file edited since the
// recording is noticed.
type Request struct {
	Method      string            `json:"method"`
	Path        string            `json:"path"`
	Query       map[string]string `json:"query,omitempty"`
	ContentType string            `json:"contentType,omitempty"`
	Body        any               `json:"body,omitempty"`
	RawBody     *string           `json:"rawBody,omitempty"`
	View        string            `json:"view,omitempty"`
	Until       int               `json:"until,omitempty"`
	As          *As               `json:"as,omitempty"`
	Review      string            `json:"review,omitempty"`
	Warnings    bool              `json:"warnings,omitempty"`
}

// Response is a server's masked answer to one step.
type Response struct {
	// Code is the HTTP status code; 0 when no answer came (Text says why).
	Code int `json:"code"`
	// Body is the JSON answer, masked (for errors, the Status).
	Body any `json:"body,omitempty"`
	// Text is an answer that is not JSON.
	Text string `json:"text,omitempty"`
	// Warnings are the Warning headers' texts. They are recorded for
	// reference and not compared.
	Warnings []string `json:"warnings,omitempty"`
}

// StepRecord is one step of a Record.
type StepRecord struct {
	Name     string   `json:"name"`
	Request  Request  `json:"request"`
	Response Response `json:"response"`
}

// Record is what one server answered to one case: the content of a golden
// file.
type Record struct {
	Case string `json:"case"`
	// Server names the server that answered, e.g. "kube-apiserver v1.37.2".
	Server string       `json:"server,omitempty"`
	Steps  []StepRecord `json:"steps"`
}

// ID is the identifier of a step in known-divergent.txt: "case:step".
func ID(caseName, step string) string { return caseName + ":" + step }

var (
	stepName    = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	placeholder = regexp.MustCompile(`\{\{([a-z]+)(?::([^}]*))?\}\}`)
)

// LoadCases reads every *.yaml file of dir, sorted by name.
func LoadCases(dir string) ([]*Case, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("golden: list cases: %w", err)
	}
	sort.Strings(paths)
	var cases []*Case
	for _, p := range paths {
		c, err := LoadCase(p)
		if err != nil {
			return nil, err
		}
		cases = append(cases, c)
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("golden: no case files in %s", dir)
	}
	return cases, nil
}

// LoadCase reads and checks one case file.
func LoadCase(path string) (*Case, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("golden: %w", err)
	}
	c, err := ParseCase(strings.TrimSuffix(filepath.Base(path), ".yaml"), data)
	if err != nil {
		return nil, fmt.Errorf("golden: %s: %w", path, err)
	}
	return c, nil
}

// ParseCase parses a case file's YAML and checks it: unknown fields, step
// names, methods, content types and placeholders are errors.
func ParseCase(name string, data []byte) (*Case, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("yaml: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	c := &Case{Name: name}
	if err := dec.Decode(c); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if len(c.Steps) == 0 {
		return nil, errors.New("no steps")
	}
	seen := map[string]bool{}
	for i := range c.Steps {
		s := &c.Steps[i]
		if err := s.check(seen); err != nil {
			return nil, fmt.Errorf("step %d (%s): %w", i+1, s.Name, err)
		}
		seen[s.Name] = true
	}
	return c, nil
}

func (s *Step) check(earlier map[string]bool) error {
	if !stepName.MatchString(s.Name) {
		return fmt.Errorf("name %q: want lower-case letters, digits and dashes", s.Name)
	}
	if earlier[s.Name] {
		return errors.New("duplicate step name")
	}
	if s.Review != "" {
		if s.Method != "" || s.Path != "" || s.Body != nil || s.RawBody != nil {
			return errors.New("a review step sends nothing: no method, path or body")
		}
		return nil
	}
	switch s.Method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return fmt.Errorf("method %q: want GET, POST, PUT, PATCH or DELETE", s.Method)
	}
	if !strings.HasPrefix(s.Path, "/") {
		return fmt.Errorf("path %q: want an absolute path", s.Path)
	}
	if s.Body != nil && s.RawBody != nil {
		return errors.New("both body and rawBody")
	}
	if s.ContentType != "" {
		if _, ok := ContentTypes[s.ContentType]; !ok && !strings.Contains(s.ContentType, "/") {
			return fmt.Errorf("contentType %q: want one of json, merge-patch, strategic-merge-patch, json-patch or a media type", s.ContentType)
		}
	}
	if s.View != "" && s.View != ViewDiscovery && s.View != ViewRules && s.View != ViewWatch {
		return fmt.Errorf("view %q: want %q, %q or %q", s.View, ViewDiscovery, ViewRules, ViewWatch)
	}
	var bad error
	checkString := func(str string) {
		for _, m := range placeholder.FindAllStringSubmatch(str, -1) {
			switch {
			case (m[1] == "ns" || m[1] == "webhook" || m[1] == "cabundle" || m[1] == "unreachable" || m[1] == "nshash" || m[1] == "nshashend") && m[2] == "" && !strings.Contains(m[0], ":"):
			case m[1] == "nest":
				if n, err := strconv.Atoi(m[2]); err != nil || n < 1 || n > maxNest {
					bad = errors.Join(bad, fmt.Errorf("placeholder %s: want a depth from 1 to %d", m[0], maxNest))
				}
			case m[1] == "name" || m[1] == "uid" || m[1] == "rv" || m[1] == "uidhash" || m[1] == "uidhashend" || m[1] == "continue":
				if !earlier[m[2]] {
					bad = errors.Join(bad, fmt.Errorf("placeholder %s names no earlier step", m[0]))
				}
			default:
				bad = errors.Join(bad, fmt.Errorf("unknown placeholder %s", m[0]))
			}
		}
	}
	checkString(s.Path)
	for k, v := range s.Query {
		checkString(k)
		checkString(v)
	}
	if s.RawBody != nil {
		checkString(*s.RawBody)
	}
	walkStrings(s.Body, func(str string) string { checkString(str); return str })
	return bad
}

// request is the step as the golden keeps it.
func (s *Step) request() Request {
	return Request{Method: s.Method, Path: s.Path, Query: s.Query, ContentType: s.ContentType, Body: s.Body, RawBody: s.RawBody, View: s.View, Until: s.Until, As: s.As, Review: s.Review, Warnings: s.Warnings}
}

// SameRequest reports whether a golden's recorded request is the case
// step's request, comparing bodies as JSON.
func SameRequest(a, b Request) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// SameRequest reports whether the golden step r was recorded from s as it
// stands.
func (s *Step) SameRequest(r Request) bool { return SameRequest(s.request(), r) }

// walkStrings returns v with f applied to every string in it, map keys
// included; v is not modified.
func walkStrings(v any, f func(string) string) any {
	switch v := v.(type) {
	case string:
		return f(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[f(k)] = walkStrings(e, f)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = walkStrings(e, f)
		}
		return out
	default:
		return v
	}
}

// Target is a server to run cases against.
type Target struct {
	// URL is the server's base URL, e.g. https://127.0.0.1:6443.
	URL string
	// Client sends the requests; nil means http.DefaultClient.
	Client *http.Client
	// Token, when set, is sent as a bearer token.
	Token string
}

// objectRef is what later steps may refer to of an answered object (or
// list: its continue token).
type objectRef struct{ name, uid, rv, cont string }

// run is the state of one case's run.
type run struct {
	t    Target
	ns   string
	mask *Masker
	refs map[string]objectRef
	// hook is the case's webhook server, and unreachable a URL where
	// none listens (Case.Webhook).
	hook        *webhookserver.Server
	unreachable string
}

// NamespacePrefix starts the name of every namespace a run creates.
const NamespacePrefix = "golden-"

// Run runs the steps of c against t in a namespace of its own and returns
// the masked answers. Before the steps it creates the namespace and, in
// it, the ServiceAccount "default" (which kube-controller-manager would
// create, and which pods need); after them it deletes the namespace. A
// step whose request fails (no answer) is recorded with code 0 and the
// run goes on; the error reports setup problems (the record is complete
// all the same) or a cancelled ctx.
func Run(ctx context.Context, t Target, c *Case) (*Record, error) {
	if t.Client == nil {
		t.Client = http.DefaultClient
	}
	ns := NamespacePrefix + randomSuffix(8)
	r := &run{t: t, ns: ns, mask: NewMasker(ns), refs: map[string]objectRef{}}
	var setupErr error
	if c.Webhook {
		stop, err := r.startWebhook()
		if err != nil {
			return &Record{Case: c.Name}, fmt.Errorf("golden: %s: %w", c.Name, err)
		}
		defer stop()
	}
	if code, body, err := r.raw(ctx, http.MethodPost, "/api/v1/namespaces", "", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}); err != nil || code != http.StatusCreated {
		setupErr = errors.Join(setupErr, setupError("create namespace", code, body, err))
	}
	sa := map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "default", "namespace": ns}}
	if code, body, err := r.raw(ctx, http.MethodPost, "/api/v1/namespaces/"+ns+"/serviceaccounts", "", sa); err != nil || code != http.StatusCreated && code != http.StatusConflict {
		setupErr = errors.Join(setupErr, setupError("create serviceaccount default", code, body, err))
	}
	rec := &Record{Case: c.Name}
	for i := range c.Steps {
		if err := ctx.Err(); err != nil {
			return rec, fmt.Errorf("golden: %s: %w", c.Name, err)
		}
		s := &c.Steps[i]
		rec.Steps = append(rec.Steps, StepRecord{Name: s.Name, Request: s.request(), Response: r.step(ctx, s)})
	}
	// Best effort: the namespace goes, with what is in it; what is left
	// (a namespace kept by its finalizer when no controller runs) goes
	// with the server.
	_, _, _ = r.raw(context.WithoutCancel(ctx), http.MethodDelete, "/api/v1/namespaces/"+ns, "", nil)
	if setupErr != nil {
		return rec, fmt.Errorf("golden: %s: setup: %w", c.Name, setupErr)
	}
	return rec, nil
}

func setupError(what string, code int, body []byte, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %d %s", what, code, truncate(string(body), 300))
}

// raw sends one request with a JSON body (nil for none) and returns the
// code and body of the answer.
func (r *run) raw(ctx context.Context, method, path, contentType string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		js, err := json.Marshal(body)
		if err != nil {
			return 0, nil, fmt.Errorf("encode body: %w", err)
		}
		rd = bytes.NewReader(js)
		if contentType == "" {
			contentType = ContentTypes["json"]
		}
	}
	resp, err := r.send(ctx, method, path, nil, contentType, rd)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := readBody(resp)
	return resp.StatusCode, data, err
}

// maxAnswer bounds the answer read for one step.
const maxAnswer = 16 << 20

func readBody(resp *http.Response) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return data, fmt.Errorf("read answer: %w", err)
	}
	if len(data) > maxAnswer {
		return data[:maxAnswer], fmt.Errorf("answer larger than %d bytes", maxAnswer)
	}
	return data, nil
}

func (r *run) send(ctx context.Context, method, path string, query url.Values, contentType string, body io.Reader) (*http.Response, error) {
	return r.sendAs(ctx, method, path, query, contentType, body, nil)
}

// sendAs is send with the extra headers header (impersonation).
func (r *run) sendAs(ctx context.Context, method, path string, query url.Values, contentType string, body io.Reader, header http.Header) (*http.Response, error) {
	u := strings.TrimSuffix(r.t.URL, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "listwatch-golden")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if r.t.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.t.Token)
	}
	resp, err := r.t.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp, nil
}

// maxNest bounds the depth of a {{nest:N}} placeholder, a little past
// the 10,000 levels where Kubernetes' decoders stop.
const maxNest = 20000

// Nest is what the placeholder {{nest:N}} stands for: a JSON object
// nested N levels deep, {"a":{"a":...{"a":"v"}...}}, for steps that send
// deep documents in a rawBody.
func Nest(n string) string {
	depth, _ := strconv.Atoi(n)
	depth = min(max(depth, 0), maxNest)
	return strings.Repeat(`{"a":`, depth) + `"v"` + strings.Repeat(`}`, depth)
}

// substitute replaces the placeholders of s.
func (r *run) substitute(s string) string {
	return placeholder.ReplaceAllStringFunc(s, func(m string) string {
		sub := placeholder.FindStringSubmatch(m)
		ref, ok := r.refs[sub[2]]
		switch sub[1] {
		case "ns":
			return r.ns
		case "webhook", "cabundle", "unreachable":
			return r.webhookPlaceholder(sub[1])
		case "name":
			if ok && ref.name != "" {
				return ref.name
			}
			return "unknown-name"
		case "uid":
			if ok && ref.uid != "" {
				return ref.uid
			}
			return "00000000-0000-0000-0000-000000000000"
		case "rv":
			if ok && ref.rv != "" {
				return ref.rv
			}
			return "1"
		case "nest":
			return Nest(sub[2])
		case "continue":
			return ref.cont
		case "uidhash", "uidhashend", "nshash", "nshashend":
			return r.shardBound(m, sub[1], ref.uid)
		}
		return m
	})
}

// step runs one step, again while its Until code is not answered: it
// never fails, an unanswered request is a response with code 0.
func (r *run) step(ctx context.Context, s *Step) Response {
	deadline := time.Now().Add(UntilTimeout)
	for {
		out := r.once(ctx, s)
		if s.Until == 0 || out.Code == s.Until || time.Now().After(deadline) || ctx.Err() != nil {
			return out
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// once sends a step's request once.
func (r *run) once(ctx context.Context, s *Step) Response {
	if s.Review != "" {
		return r.review(s.Review)
	}
	var body io.Reader
	contentType := ContentTypes[s.ContentType]
	if contentType == "" {
		contentType = s.ContentType
	}
	switch {
	case s.RawBody != nil:
		body = strings.NewReader(r.substitute(*s.RawBody))
	case s.Body != nil:
		js, err := json.Marshal(walkStrings(s.Body, r.substitute))
		if err != nil {
			return Response{Text: "encode body: " + err.Error()}
		}
		body = bytes.NewReader(js)
	}
	if body != nil && contentType == "" {
		contentType = ContentTypes["json"]
	}
	query := url.Values{}
	for k, v := range s.Query {
		query.Set(r.substitute(k), r.substitute(v))
	}
	var header http.Header
	if s.As != nil {
		header = http.Header{"Impersonate-User": {r.substitute(s.As.User)}}
		for _, g := range s.As.Groups {
			header.Add("Impersonate-Group", r.substitute(g))
		}
	}
	resp, err := r.sendAs(ctx, s.Method, r.substitute(s.Path), query, contentType, body, header)
	if err != nil {
		return Response{Text: r.mask.String(err.Error())}
	}
	defer resp.Body.Close()
	data, err := readBody(resp)
	if err != nil {
		return Response{Code: resp.StatusCode, Text: r.mask.String(err.Error())}
	}
	out := Response{Code: resp.StatusCode}
	for _, w := range resp.Header.Values("Warning") {
		out.Warnings = append(out.Warnings, r.mask.String(w))
	}
	if s.View == ViewWatch && resp.StatusCode == http.StatusOK {
		events, ok := decodeStream(data)
		if !ok {
			out.Text = r.mask.String(strings.TrimSpace(string(data)))
			return out
		}
		out.Body = r.mask.Mask(events)
		return out
	}
	decoded, ok := decodeJSON(data)
	if !ok && s.Query["watch"] == "true" {
		// A watch answers a stream of events: compared as their list.
		if events, isStream := decodeStream(data); isStream && len(events) > 0 {
			decoded, ok = events, true
		}
	}
	if !ok {
		out.Text = r.mask.String(strings.TrimSpace(string(data)))
		return out
	}
	r.learn(s.Name, decoded)
	switch s.View {
	case ViewDiscovery:
		decoded = discoveryView(decoded)
	case ViewRules:
		decoded = rulesView(decoded)
	}
	out.Body = r.mask.Mask(decoded)
	return out
}

// decodeJSON decodes one JSON value, numbers as json.Number so that
// integers keep every digit.
func decodeJSON(data []byte) (any, bool) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}

// decodeStream decodes a stream of JSON values (the events of a watch), as
// decodeJSON decodes one; an empty stream is an empty list.
func decodeStream(data []byte) ([]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	out := []any{}
	for {
		var v any
		err := dec.Decode(&v)
		if err == io.EOF {
			return out, true
		}
		if err != nil {
			return nil, false
		}
		out = append(out, v)
	}
}

// learn keeps the name, uid and resourceVersion of an answered object for
// later steps' placeholders, and tells the masker of the generated names
// and allocated values in it.
func (r *run) learn(step string, v any) {
	obj, _ := v.(map[string]any)
	if obj == nil || obj["kind"] == "Status" {
		return
	}
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		return
	}
	str := func(k string) string { s, _ := md[k].(string); return s }
	r.refs[step] = objectRef{name: str("name"), uid: str("uid"), rv: str("resourceVersion"), cont: str("continue")}
	r.mask.Learn(obj)
}

// rulesView sorts the resource and non-resource rules of a rules review's
// status by their JSON form. Anything else is returned as it is.
func rulesView(v any) any {
	obj, _ := v.(map[string]any)
	status, _ := obj["status"].(map[string]any)
	if status == nil {
		return v
	}
	out := maps.Clone(obj)
	sorted := maps.Clone(status)
	for _, k := range []string{"resourceRules", "nonResourceRules"} {
		rules, ok := status[k].([]any)
		if !ok {
			continue
		}
		keyed := make([]struct {
			key  string
			rule any
		}, len(rules))
		for i, r := range rules {
			js, _ := json.Marshal(r)
			keyed[i].key, keyed[i].rule = string(js), r
		}
		slices.SortStableFunc(keyed, func(a, b struct {
			key  string
			rule any
		}) int {
			return strings.Compare(a.key, b.key)
		})
		list := make([]any, len(keyed))
		for i, k := range keyed {
			list[i] = k.rule
		}
		sorted[k] = list
	}
	out["status"] = sorted
	return out
}

// discoveryView keeps of an APIResourceList what clients act on: each
// resource's name, singularName, namespaced, group, version, kind, verbs
// (sorted: their order means nothing), shortNames and categories. The
// resources become an object keyed by name, so that one resource missing
// or extra reads as one difference, not as a shift of every later one.
// Anything but an APIResourceList is returned as it is.
func discoveryView(v any) any {
	list, _ := v.(map[string]any)
	if list == nil || list["kind"] != "APIResourceList" {
		return v
	}
	out := map[string]any{}
	for _, k := range []string{"kind", "apiVersion", "groupVersion"} {
		if e, ok := list[k]; ok {
			out[k] = e
		}
	}
	resources, ok := list["resources"].([]any)
	if !ok {
		out["resources"] = list["resources"]
		return out
	}
	kept := map[string]any{}
	for i, r := range resources {
		res, _ := r.(map[string]any)
		name, _ := res["name"].(string)
		if name == "" || kept[name] != nil {
			// Not a resource by name: keep it under its position.
			kept[fmt.Sprintf("#%d", i)] = r
			continue
		}
		view := map[string]any{}
		for _, k := range []string{"singularName", "namespaced", "group", "version", "kind", "shortNames", "categories"} {
			if e, ok := res[k]; ok {
				view[k] = e
			}
		}
		if verbs, ok := res["verbs"].([]any); ok {
			sorted := slices.Clone(verbs)
			slices.SortFunc(sorted, func(a, b any) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
			view["verbs"] = sorted
		} else if e, ok := res["verbs"]; ok {
			view["verbs"] = e
		}
		kept[name] = view
	}
	out["resources"] = kept
	return out
}

// randomSuffix returns n random lower-case letters and digits.
func randomSuffix(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ReadRecord reads a golden file; numbers are kept as json.Number, as the
// runner keeps them.
func ReadRecord(path string) (*Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("golden: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	rec := &Record{}
	if err := dec.Decode(rec); err != nil {
		return nil, fmt.Errorf("golden: %s: %w", path, err)
	}
	return rec, nil
}

// Marshal renders a record as a golden file holds it: indented, keys
// sorted, no HTML escaping (messages hold < and >).
func Marshal(rec *Record) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rec); err != nil {
		return nil, fmt.Errorf("golden: encode %s: %w", rec.Case, err)
	}
	return buf.Bytes(), nil
}

// WriteRecord writes a golden file atomically.
func WriteRecord(path string, rec *Record) error {
	data, err := Marshal(rec)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("golden: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("golden: %w", err)
	}
	return nil
}
