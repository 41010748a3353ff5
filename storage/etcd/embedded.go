package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/listwatch/listwatch/internal/pki"
)

// EmbeddedConfig describes an etcd member run inside this process.
type EmbeddedConfig struct {
	// Dir holds the member's data; a member started again on the same Dir
	// has everything it acknowledged before. Required.
	Dir string
	// Name names the member; "" means "default".
	Name string
	// ClientURL and PeerURL are where the member listens for clients and
	// for the other members; "" picks a free port on 127.0.0.1, served
	// with https. On an https URL the member requires a client certificate
	// its PKIDir's CA signed (mutual TLS), so that only a process holding
	// those keys reaches it; an http URL is served in the clear to anyone
	// who can connect, for tests that want it.
	ClientURL, PeerURL string
	// PKIDir holds the mutual TLS material (pki.EnsureMutual), made on
	// first start; "" means Dir/pki. The members of one cluster share it.
	PKIDir string
	// InitialCluster lists the members of a new cluster as
	// "name=peerURL,..."; "" means a cluster of this member alone. It is
	// ignored when Dir already holds a member.
	InitialCluster string
	// HeartbeatInterval and ElectionTimeout tune raft; 0 means etcd's
	// defaults (100ms and 1s).
	HeartbeatInterval, ElectionTimeout time.Duration
	// UnsafeNoFsync skips fsync: faster, and loses data if the machine
	// crashes. For tests only.
	UnsafeNoFsync bool
}

// Embedded is a running embedded etcd member.
type Embedded struct {
	etcd *embed.Etcd
	// Endpoints are the client URLs, for Config.Endpoints.
	Endpoints []string
	// PeerURL is where the other members reach this one.
	PeerURL string
	// tls is the client side of the member's mutual TLS; nil when its
	// client URL is http.
	tls *tls.Config

	closing sync.Once
	closed  error
}

// startAttempts bounds retries when a free port picked for the member is
// taken by someone else before etcd binds it.
const startAttempts = 3

// StartEmbedded starts an etcd member and waits until it serves clients or
// ctx ends. Its logs are discarded.
func StartEmbedded(ctx context.Context, cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.Dir == "" {
		return nil, errors.New("embedded etcd: no data dir")
	}
	var err error
	for range startAttempts {
		var e *Embedded
		e, err = startEmbedded(ctx, cfg)
		if err == nil {
			return e, nil
		}
		if !isAddrInUse(err) || cfg.ClientURL != "" && cfg.PeerURL != "" {
			break
		}
	}
	return nil, fmt.Errorf("embedded etcd: %w", err)
}

func isAddrInUse(err error) bool {
	return strings.Contains(err.Error(), "address already in use")
}

func startEmbedded(ctx context.Context, cfg EmbeddedConfig) (*Embedded, error) {
	ec := embed.NewConfig()
	ec.Dir = cfg.Dir
	if cfg.Name != "" {
		ec.Name = cfg.Name
	}
	clientURL, err := urlOrFree(cfg.ClientURL)
	if err != nil {
		return nil, err
	}
	peerURL, err := urlOrFree(cfg.PeerURL)
	if err != nil {
		return nil, err
	}
	var clientTLS *tls.Config
	if clientURL.Scheme == "https" || peerURL.Scheme == "https" {
		dir := cfg.PKIDir
		if dir == "" {
			dir = filepath.Join(cfg.Dir, "pki")
		}
		m, err := pki.EnsureMutual(dir)
		if err != nil {
			return nil, err
		}
		info := transport.TLSInfo{CertFile: m.PeerCertFile, KeyFile: m.PeerKeyFile, TrustedCAFile: m.CAFile, ClientCertAuth: true}
		if clientURL.Scheme == "https" {
			ec.ClientTLSInfo = info
			if clientTLS, err = mutualClientTLS(m); err != nil {
				return nil, err
			}
		}
		if peerURL.Scheme == "https" {
			ec.PeerTLSInfo = info
		}
	}
	ec.ListenClientUrls = []url.URL{*clientURL}
	ec.AdvertiseClientUrls = []url.URL{*clientURL}
	ec.ListenPeerUrls = []url.URL{*peerURL}
	ec.AdvertisePeerUrls = []url.URL{*peerURL}
	ec.InitialCluster = cfg.InitialCluster
	if ec.InitialCluster == "" {
		ec.InitialCluster = ec.Name + "=" + peerURL.String()
	}
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	if cfg.HeartbeatInterval > 0 {
		ec.TickMs = uint(cfg.HeartbeatInterval.Milliseconds())
	}
	if cfg.ElectionTimeout > 0 {
		ec.ElectionMs = uint(cfg.ElectionTimeout.Milliseconds())
	}
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	ec.Logger = "zap"
	// No metrics listener and no snapshot of the whole keyspace to stderr.
	ec.ListenMetricsUrls = nil

	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("start: %w", err)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("start: %w", ctx.Err())
	}
	return &Embedded{etcd: e, Endpoints: []string{clientURL.String()}, PeerURL: peerURL.String(), tls: clientTLS}, nil
}

// mutualClientTLS is the client side of m: its client certificate, and
// its CA as the only one trusted.
func mutualClientTLS(m *pki.Mutual) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(m.ClientCertFile, m.ClientKeyFile)
	if err != nil {
		return nil, fmt.Errorf("client certificate: %w", err)
	}
	caPEM, err := os.ReadFile(m.CAFile)
	if err != nil {
		return nil, fmt.Errorf("client CA: %w", err)
	}
	roots, err := pki.CertPool(caPEM)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS12}, nil
}

// ClientConfig is how to reach the member as a client: its endpoints and,
// on https, the client certificate it requires.
func (e *Embedded) ClientConfig() Config {
	return Config{Endpoints: e.Endpoints, TLS: e.tls}
}

// urlOrFree parses u, or picks a free port on 127.0.0.1 when u is "".
func urlOrFree(u string) (*url.URL, error) {
	if u == "" {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		u = fmt.Sprintf("https://127.0.0.1:%d", ports[0])
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return nil, fmt.Errorf("url %q: %w", u, err)
	}
	return parsed, nil
}

// freePorts returns n distinct ports on 127.0.0.1 nobody listened on a
// moment ago; etcd cannot listen on port 0 and report the port it got.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		// Held open until all are picked, so that they differ.
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// IsLeader reports whether this member leads its cluster.
func (e *Embedded) IsLeader() bool {
	return e.etcd.Server.Leader() == e.etcd.Server.MemberID()
}

// Close stops the member and returns once it has shut down; it is
// idempotent.
func (e *Embedded) Close() error { return e.stop(false) }

// Kill stops the member as a crash would, without handing leadership over,
// and returns once it has shut down; later calls and Close do nothing. It
// is for tests: a peer request arriving while it runs can leave one of
// etcd's HTTP handler goroutines blocked on the closed backend.
func (e *Embedded) Kill() error { return e.stop(true) }

func (e *Embedded) stop(crash bool) error {
	e.closing.Do(func() {
		if crash {
			e.etcd.Server.HardStop()
		}
		e.etcd.Close()
		select {
		case <-e.etcd.Server.StopNotify():
		case <-time.After(time.Minute):
			e.closed = errors.New("embedded etcd: not stopped within a minute")
		}
	})
	return e.closed
}
