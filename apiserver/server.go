package apiserver

import (
	"cmp"
	"context"
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/listwatch/listwatch/apiserver/admission"
	"github.com/listwatch/listwatch/apiserver/auth"
	"github.com/listwatch/listwatch/apiserver/bootstrap"
	"github.com/listwatch/listwatch/apiserver/discovery"
	"github.com/listwatch/listwatch/apiserver/internal/crd"
	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/watchcache"
)

// WatchCacheConfig tunes the per-resource watch caches; zero fields take
// the watchcache package's defaults.
type WatchCacheConfig struct {
	// WindowSize is the number of recent events kept per resource.
	WindowSize int
	// WindowBytes bounds the stored bytes of the objects a resource's
	// recent events carry.
	WindowBytes int64
	// WatcherBuffer is the number of events buffered per watcher before a
	// watcher that cannot keep up is cut off.
	WatcherBuffer int
	// BookmarkInterval is the period of BOOKMARK events.
	BookmarkInterval time.Duration
}

// Config is what New needs; Storage is required.
type Config struct {
	Storage storage.Interface
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
	// DisableAdmissionPlugins names admission plugins not to run, as
	// kube-apiserver's --disable-admission-plugins (package admission).
	DisableAdmissionPlugins []string
	// ServiceAccountSigningKey signs the service account tokens the server
	// issues (TokenRequest) and checks (an *ecdsa.PrivateKey or
	// *rsa.PrivateKey, as --service-account-signing-key-file); nil: a key
	// made at start, so that tokens do not outlive the server.
	ServiceAccountSigningKey crypto.Signer
	// ServiceAccountIssuer is the tokens' issuer and default audience;
	// "" is DefaultServiceAccountIssuer.
	ServiceAccountIssuer string
	// AdvertiseAddress is where the cluster's clients reach the server
	// (IP and secure port), as kube-apiserver's --advertise-address and
	// --secure-port: its start-up makes the "kubernetes" Service in the
	// default namespace with port 443 to that port, and that Service's
	// Endpoints and EndpointSlice with that address (package bootstrap). The
	// zero value, for a server nobody reaches over the network, makes
	// none of them.
	AdvertiseAddress netip.AddrPort
	// WatchWriteTimeout bounds each write to a watch client: one that
	// reads nothing for this long is dropped. Zero is
	// DefaultWatchWriteTimeout, kube-apiserver's minute.
	WatchWriteTimeout time.Duration
	// DisableWatchList refuses streaming lists (watches with
	// sendInitialEvents) as kube-apiserver does with its WatchList feature
	// gate off: 422, which clients take as the sign to list instead.
	DisableWatchList bool
	// DisableShardedListAndWatch ignores the shardSelector of lists and
	// watches, as kube-apiserver does with its ShardedListAndWatch feature
	// gate off (its default in v1.37, where the gate is alpha): every
	// object is served and lists carry no shardInfo. By default the server
	// answers as kube-apiserver with the gate on (KEP-5866): the watch
	// cache keeps only the objects whose uid or namespace hashes into the
	// selector's ranges, and lists echo the selector in
	// metadata.shardInfo.
	DisableShardedListAndWatch bool
}

// Server serves the Kubernetes REST API over a storage backend.
type Server struct {
	cfg     Config
	log     *slog.Logger
	reg     *registry.Registry
	handler http.Handler
	// caches serve every list and watch, one per built-in resource;
	// cachesReady is closed once all of them hold their first list.
	caches      map[*resource]*registry.Cache
	cachesReady chan struct{}
	// discovery serves /version, /api, /apis and the OpenAPI documents
	// (package discovery; discovery_host.go).
	discovery *discovery.Discovery

	// ctx is the server's lifetime: made by New, ended when Run's
	// context ends, so that what New builds may hold it before Run.
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	running atomic.Bool

	// services are the rules of services, which allocate their cluster
	// IPs and node ports (services.go).
	services *registry.ServiceRules

	// self is the server's client of itself and the admission plugins on
	// it, writes counts the writes they wait for (admission_host.go);
	// startup is its start-up tasks (bootstrap_host.go).
	self    *self
	writes  *admission.Writes
	startup *bootstrap.Startup

	// crdPublish serializes changes of the served custom resources
	// (crd.go); crdOpenAPI, guarded by it, is set once the OpenAPI
	// documents are being made.
	crdPublish sync.Mutex
	crdOpenAPI bool

	// converters make the custom resources' converters, calling
	// conversion webhooks as the admission webhooks are called; made by
	// Run before the definitions are served.
	converters *crd.Converters

	// auth is the server's authorization, reviews and service account
	// tokens (package auth; auth_host.go).
	auth *auth.Auth
}

// New builds a server for cfg. It starts nothing and does no I/O: Run
// does the server's background work. Requests handled before Run has
// filled the watch caches wait for them.
func New(cfg Config) (*Server, error) {
	if cfg.Storage == nil {
		return nil, errors.New("apiserver: Config.Storage is nil")
	}
	log := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	reg, err := registry.New()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, reg: reg, caches: map[*resource]*registry.Cache{}, cachesReady: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.writes = admission.TrackWrites(s.ctx, &s.cfg.Storage, namespacesPrefix)
	for _, byPlural := range reg.ByGV {
		for _, r := range byPlural {
			c, err := s.newCache(r, r.DecodeKV)
			if err != nil {
				return nil, fmt.Errorf("apiserver: watch cache for %s: %w", r.GVR(), err)
			}
			s.caches[r] = c
		}
	}
	if err := s.initServices(); err != nil {
		return nil, err
	}
	s.discovery = s.newDiscovery()
	s.handler = s.routes()
	if err := s.initSelf(); err != nil {
		return nil, err
	}
	if err := s.initAuth(); err != nil {
		s.closeSelf()
		return nil, err
	}
	s.initStartup()
	return s, nil
}

// Run does the server's background work until ctx ends: the watch
// caches, kube-apiserver's start-up (ReadyChecks), the controllers of the
// "kubernetes" Service and of CustomResourceDefinitions. Then it ends the
// watches and the loopback client's requests, and returns nil once every
// goroutine it started has ended. It may be called once.
func (s *Server) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("apiserver: Run called twice")
	}
	defer context.AfterFunc(ctx, s.cancel)()
	if err := s.initAdmission(); err != nil {
		s.cancel()
		s.closeSelf()
		return err
	}
	for _, c := range s.caches {
		s.runCache(c)
	}
	s.wg.Go(s.awaitCaches)
	s.wg.Go(s.fillServices)
	s.start()
	s.startCRDController()
	<-s.ctx.Done()
	s.closeSelf()
	s.wg.Wait()
	return nil
}

// runCache runs c until the server stops or c is closed.
func (s *Server) runCache(c *registry.Cache) { c.Start(s.ctx, &s.wg, s.log) }

// awaitCaches closes cachesReady once every built-in watch cache is ready.
func (s *Server) awaitCaches() {
	for _, c := range s.caches {
		select {
		case <-c.Ready():
		case <-s.ctx.Done():
			return
		}
	}
	close(s.cachesReady)
}

// awaitCachesFor waits until the built-in watch caches are ready, as
// requests do before they read them; false when the request ended first.
func (s *Server) awaitCachesFor(ctx context.Context) bool {
	select {
	case <-s.cachesReady:
		return true
	default:
	}
	select {
	case <-s.cachesReady:
		return true
	case <-ctx.Done():
		return false
	}
}

// newCache is the watch cache of r, whose stored objects decode reads.
func (s *Server) newCache(r *resource, decode func(storage.KeyValue) (*unstructured.Unstructured, error)) (*registry.Cache, error) {
	return registry.NewCache(r, decode, watchcache.Config[*unstructured.Unstructured]{
		Storage:          s.cfg.Storage,
		WindowSize:       s.cfg.WatchCache.WindowSize,
		WindowBytes:      s.cfg.WatchCache.WindowBytes,
		WatcherBuffer:    s.cfg.WatchCache.WatcherBuffer,
		BookmarkInterval: s.cfg.WatchCache.BookmarkInterval,
		Logger:           s.log,
	})
}

// leaveHint tells the watch cache of r that value, about to be stored at
// key, is obj (registry.Cache.LeaveHint); the returned func withdraws the
// hint, for a write that failed.
func (s *Server) leaveHint(r *resource, key string, value []byte, obj object) (withdraw func()) {
	return s.cacheFor(r).LeaveHint(key, value, obj)
}

// Handler returns the API routes: discovery, /version and resources.
func (s *Server) Handler() http.Handler { return s.handler }
