// Package apiserver is the HTTP layer of listwatch's Kubernetes-compatible
// API server: discovery, and get/list/watch/create/update/patch/delete of
// built-in and custom resources over a storage.Interface, with the wire
// behaviour (paths, status codes, Status bodies) of kube-apiserver.
package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/watchcache"
)

// CustomResource declares a resource served as unstructured JSON.
type CustomResource struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Kind     string `json:"kind"`
	Plural   string `json:"plural"`
	Singular string `json:"singular,omitempty"`
	// ShortNames are advertised in discovery (kubectl get <short>).
	ShortNames []string `json:"shortNames,omitempty"`
	Namespaced bool     `json:"namespaced"`
}

// WatchCacheConfig tunes the per-resource watch caches; zero fields take
// the watchcache package's defaults.
type WatchCacheConfig struct {
	// WindowSize is the number of recent events kept per resource.
	WindowSize int
	// WatcherBuffer is the number of events buffered per watcher before a
	// watcher that cannot keep up is cut off.
	WatcherBuffer int
	// BookmarkInterval is the period of BOOKMARK events.
	BookmarkInterval time.Duration
}

// Config is what New needs; Storage is required.
type Config struct {
	Storage         storage.Interface
	CustomResources []CustomResource
	// Logger receives request errors and cache events; nil discards them.
	Logger     *slog.Logger
	WatchCache WatchCacheConfig
	// ServiceClusterIPRange is where services get their cluster IPs: a
	// CIDR, or two of different IP families separated by a comma, as
	// kube-apiserver's --service-cluster-ip-range; "" is 10.96.0.0/12.
	ServiceClusterIPRange string
	// ServiceNodePortRange is where NodePort and LoadBalancer services get
	// their node ports, as --service-node-port-range; "" is 30000-32767.
	ServiceNodePortRange string
}

// Server serves the Kubernetes REST API over a storage backend.
type Server struct {
	cfg     Config
	log     *slog.Logger
	reg     *registry
	handler http.Handler
	// caches serve every list and watch, one per resource.
	caches map[*resource]*watchcache.Cache[*unstructured.Unstructured]
	// openAPI holds the OpenAPI v3 documents and openAPIV2 the v2 one,
	// each built on first request: most clients never ask.
	openAPI       openAPIDocs
	openAPIErr    error
	openAPIOnce   sync.Once
	openAPIV2     *openAPIV2
	openAPIV2Err  error
	openAPIV2Once sync.Once

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once

	// services allocates the cluster IPs and node ports of services
	// (services.go).
	services *serviceAllocations
}

// New builds a server for cfg; ctx bounds the lifetime of its background
// work (watch caches), which Close also stops.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Storage == nil {
		return nil, errors.New("apiserver: Config.Storage is nil")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg, err := newRegistry(cfg.CustomResources)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, reg: reg, caches: map[*resource]*watchcache.Cache[*unstructured.Unstructured]{}}
	s.ctx, s.cancel = context.WithCancel(ctx)
	for _, byPlural := range reg.byGV {
		for _, r := range byPlural {
			c, err := s.newCache(r)
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("apiserver: watch cache for %s: %w", r.gvr(), err)
			}
			s.caches[r] = c
		}
	}
	if err := s.initServices(); err != nil {
		s.Close()
		return nil, err
	}
	s.handler = s.routes()
	return s, nil
}

func (s *Server) newCache(r *resource) (*watchcache.Cache[*unstructured.Unstructured], error) {
	return watchcache.New(s.ctx, watchcache.Config[*unstructured.Unstructured]{
		Storage: s.cfg.Storage,
		Prefix:  prefixFor(r, ""),
		Decode:  decodeKV,
		Attrs: func(u *unstructured.Unstructured) (labels.Set, fields.Set, error) {
			return labels.Set(u.GetLabels()), fieldSet(r, u.Object), nil
		},
		New: func() *unstructured.Unstructured {
			u := &unstructured.Unstructured{Object: map[string]any{}}
			u.SetAPIVersion(r.apiVersion())
			u.SetKind(r.gvk.Kind)
			return u
		},
		WindowSize:       s.cfg.WatchCache.WindowSize,
		WatcherBuffer:    s.cfg.WatchCache.WatcherBuffer,
		BookmarkInterval: s.cfg.WatchCache.BookmarkInterval,
		Logger:           s.log,
	})
}

// Handler returns the API routes: discovery, /version and resources.
func (s *Server) Handler() http.Handler { return s.handler }

// Close stops the watch caches and waits for the server's goroutines; it
// does not close the storage backend, which the caller owns.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.cancel()
		for _, c := range s.caches {
			c.Close()
		}
		s.wg.Wait()
	})
}

// customResourceFile is the config file format of LoadCustomResources.
type customResourceFile struct {
	CustomResources []CustomResource `json:"customResources"`
}

// LoadCustomResources reads custom resource declarations from a YAML or
// JSON file holding either a list of CustomResource or an object with a
// "customResources" list.
func LoadCustomResources(path string) ([]CustomResource, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("custom resources: %w", err)
	}
	return parseCustomResources(data)
}

func parseCustomResources(data []byte) ([]CustomResource, error) {
	js, err := utilyaml.ToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("custom resources: %w", err)
	}
	if t := bytes.TrimSpace(js); len(t) > 0 && t[0] == '[' {
		var list []CustomResource
		if err := strictUnmarshal(js, &list); err != nil {
			return nil, fmt.Errorf("custom resources: %w", err)
		}
		return list, validateCustomResources(list)
	}
	var file customResourceFile
	if err := strictUnmarshal(js, &file); err != nil {
		return nil, fmt.Errorf("custom resources: %w", err)
	}
	return file.CustomResources, validateCustomResources(file.CustomResources)
}

// strictUnmarshal decodes JSON rejecting unknown fields, so that a typo in
// a config file is an error rather than a silently ignored setting.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
