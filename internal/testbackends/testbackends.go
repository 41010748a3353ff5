// Package testbackends gives whole-path tests the storage backends the API
// server runs on: the in-memory one, and a real embedded etcd member that
// a test binary starts once (it takes a second) and shares between its
// tests, each store under a key prefix of its own.
package testbackends

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/listwatch/listwatch/internal/kubelog"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/etcd"
	"github.com/listwatch/listwatch/storage/memory"
)

// Backend makes a store for one test; the store is closed when the test
// ends.
type Backend struct {
	Name string
	New  func(t testing.TB) storage.Interface
}

// The shared etcd member, started by the first etcd store.
var (
	etcdOnce     sync.Once
	etcdMember   *etcd.Embedded
	etcdErr      error
	etcdDir      string
	etcdPrefixes atomic.Int64
)

// All returns the memory and etcd backends; name prefixes the etcd keys
// of this binary's stores. A TestMain that uses them calls Close after
// the tests.
func All(name string) []Backend {
	return []Backend{
		{Name: "memory", New: func(t testing.TB) storage.Interface {
			s := memory.New()
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
		{Name: "etcd", New: func(t testing.TB) storage.Interface {
			etcdOnce.Do(func() {
				etcdDir, etcdErr = os.MkdirTemp("", name+"-etcd")
				if etcdErr == nil {
					etcdMember, etcdErr = etcd.StartEmbedded(context.Background(), etcd.EmbeddedConfig{Dir: etcdDir, UnsafeNoFsync: true})
				}
			})
			if etcdErr != nil {
				t.Fatalf("embedded etcd: %v", etcdErr)
			}
			cfg := etcdMember.ClientConfig()
			cfg.Prefix = fmt.Sprintf("/%s-test-%d", name, etcdPrefixes.Add(1))
			s, err := etcd.New(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
	}
}

// Close stops the shared etcd member, if one was started, and removes its
// data.
func Close() error {
	var err error
	if etcdMember != nil {
		err = etcdMember.Close()
	}
	if etcdDir != "" {
		if rerr := os.RemoveAll(etcdDir); err == nil {
			err = rerr
		}
	}
	return err
}

// Run runs a test binary's tests, stops the shared etcd member, and, when
// the tests passed, fails the run if goroutines are left: it waits up to
// 20 s for them, since etcd's client and member goroutines end a moment
// after Close. A TestMain calls os.Exit(testbackends.Run(m)).
//
// Of what Kubernetes' packages log through klog (thousands of lines from
// the admission plugins of every server a package starts), only errors
// show (kubelog.ToStderr), so that a failing test's report stays in sight.
func Run(m *testing.M) int {
	kubelog.ToStderr()
	code := m.Run()
	if err := Close(); err != nil {
		fmt.Fprintln(os.Stderr, "closing the embedded etcd:", err)
	}
	if code != 0 {
		return code
	}
	var err error
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err = goleak.Find(); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		return 1
	}
	return 0
}
