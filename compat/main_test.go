package compat_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	clientfeatures "k8s.io/client-go/features"

	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/etcd"
	"github.com/listwatch/listwatch/storage/memory"
)

// The embedded etcd member is shared by every etcd run of the suite (each
// server gets a key prefix of its own): starting one per test would cost
// more than the tests themselves.
var (
	etcdOnce     sync.Once
	etcdMember   *etcd.Embedded
	etcdErr      error
	etcdDir      string
	etcdPrefixes atomic.Int64
)

// suite runs the tests and then stops the shared etcd member, so that
// goleak, which checks after Run returns, sees its goroutines gone.
type suite struct{ m *testing.M }

func (s suite) Run() int {
	code := s.m.Run()
	if etcdMember != nil {
		if err := etcdMember.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "closing etcd:", err)
		}
	}
	if etcdDir != "" {
		_ = os.RemoveAll(etcdDir)
	}
	// etcd's and gRPC's client connections, and client-go's HTTP/2
	// connections to closed test servers, wind down a moment after Close
	// returns; give them that moment, then let VerifyTestMain judge.
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if goleak.Find(leakOptions...) == nil {
			break
		}
	}
	return code
}

// leakOptions are the goroutines that outlive every test by design.
var leakOptions = []goleak.Option{
	// klog starts its flush daemon in init and never stops it.
	goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
}

func TestMain(m *testing.M) {
	// WatchListClient is on by default in client-go v0.37 (beta since 1.35);
	// set it explicitly so that KUBE_FEATURE_WatchListClient=false in the
	// environment cannot silently turn the streaming-list tests into
	// ordinary list tests. Reflectors that must use list+watch opt out per
	// ListerWatcher (see noWatchList).
	gates, ok := clientfeatures.FeatureGates().(interface {
		Set(clientfeatures.Feature, bool) error
	})
	if !ok {
		fmt.Fprintln(os.Stderr, "client-go feature gates cannot be set")
		os.Exit(2)
	}
	if err := gates.Set(clientfeatures.WatchListClient, true); err != nil {
		fmt.Fprintln(os.Stderr, "enabling WatchListClient:", err)
		os.Exit(2)
	}
	goleak.VerifyTestMain(suite{m}, leakOptions...)
}

// backend is a storage backend the suite runs on.
type backend struct {
	name string
	new  func(t *testing.T) storage.Interface
}

var backends = []backend{
	{"memory", func(t *testing.T) storage.Interface {
		s := memory.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	}},
	{"etcd", func(t *testing.T) storage.Interface {
		etcdOnce.Do(func() {
			etcdDir, etcdErr = os.MkdirTemp("", "compat-etcd")
			if etcdErr == nil {
				etcdMember, etcdErr = etcd.StartEmbedded(context.Background(), etcd.EmbeddedConfig{Dir: etcdDir, UnsafeNoFsync: true})
			}
		})
		if etcdErr != nil {
			t.Fatalf("embedded etcd: %v", etcdErr)
		}
		cfg := etcdMember.ClientConfig()
		cfg.Prefix = fmt.Sprintf("/compat-%d", etcdPrefixes.Add(1))
		s, err := etcd.New(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}},
}
