package apiserver

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/listwatch/listwatch/internal/runtest"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/memory"
)

// countingGets is a storage that counts the reads of namespaces.
type countingGets struct {
	storage.Interface
	namespaceGets atomic.Int64
}

func (c *countingGets) Get(ctx context.Context, key string) (storage.KeyValue, error) {
	if strings.HasPrefix(key, namespacesPrefix) {
		c.namespaceGets.Add(1)
	}
	return c.Interface.Get(ctx, key)
}

// A create checks its namespace in the namespaces' watch cache once that
// cache has seen the server's last namespace write, not with a storage
// read per create (a round trip to etcd); it reads storage while the
// cache lags, and for a namespace the cache does not have.
func TestCreateChecksNamespaceInCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &countingGets{Interface: memory.New()}
		srv, err := New(Config{Storage: st})
		if err != nil {
			t.Fatal(err)
		}
		stop := runtest.Start(t, srv)
		defer func() {
			stop()
			_ = st.Close()
		}()
		if err := srv.WaitReady(t.Context()); err != nil {
			t.Fatal(err)
		}
		benchDo(t, srv, http.MethodPost, "/api/v1/namespaces/default/serviceaccounts", `{"metadata":{"name":"default"}}`, 0)
		synctest.Wait() // the namespaces' cache catches up with the writes
		before := st.namespaceGets.Load()
		for i := range 3 {
			benchDo(t, srv, http.MethodPost, "/api/v1/namespaces/default/pods", benchPod(i), http.StatusCreated)
		}
		if got := st.namespaceGets.Load() - before; got != 0 {
			t.Errorf("3 creates in a cached namespace read it from storage %d times, want 0", got)
		}
		// A namespace the cache does not have is looked up in storage: 404.
		before = st.namespaceGets.Load()
		benchDo(t, srv, http.MethodPost, "/api/v1/namespaces/missing/pods", benchPod(9), http.StatusNotFound)
		if got := st.namespaceGets.Load() - before; got != 1 {
			t.Errorf("a create in a namespace missing from the cache read storage %d times, want 1", got)
		}
	})
}
