package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/memory"
)

// Storage backends of --storage-backend.
const (
	backendEtcd   = "etcd"
	backendMemory = "memory"
)

// storageConfig selects and configures the storage backend.
type storageConfig struct {
	// Backend is backendEtcd or backendMemory.
	Backend string
	// DataDir is the embedded etcd's data directory, used when EtcdServers
	// is empty.
	DataDir string
	// EtcdServers are the client URLs of an external etcd cluster.
	EtcdServers                           []string
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
	// CompactionInterval is the period of storage compaction; 0 disables it.
	CompactionInterval time.Duration
}

func (c *storageConfig) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Backend, "storage-backend", backendEtcd, "storage backend: etcd or memory (nothing survives a restart)")
	fs.StringVar(&c.DataDir, "data-dir", "./.listwatch/etcd", "data directory of the embedded etcd (when --etcd-servers is empty)")
	fs.Func("etcd-servers", "comma-separated client URLs of an external etcd cluster, instead of the embedded etcd", func(v string) error {
		c.EtcdServers = nil
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				c.EtcdServers = append(c.EtcdServers, s)
			}
		}
		return nil
	})
	fs.StringVar(&c.EtcdCAFile, "etcd-cafile", "", "CA bundle verifying the external etcd servers")
	fs.StringVar(&c.EtcdCertFile, "etcd-certfile", "", "client certificate for the external etcd")
	fs.StringVar(&c.EtcdKeyFile, "etcd-keyfile", "", "key of --etcd-certfile")
	fs.DurationVar(&c.CompactionInterval, "compaction-interval", 5*time.Minute, "interval of storage compaction (0: never); watches older than about this answer 410 Gone")
}

// openedStorage is an open backend with what closing it takes.
type openedStorage struct {
	storage.Interface
	closeFn   func() error
	closeOnce sync.Once
	closeErr  error
}

// close closes the backend (and stops an embedded etcd) once.
func (s *openedStorage) close() error {
	s.closeOnce.Do(func() { s.closeErr = s.closeFn() })
	return s.closeErr
}

// openStorage opens the configured backend; ctx bounds the opening, bg the
// background work (compaction), which also stops at close.
func openStorage(ctx, bg context.Context, c storageConfig, log *slog.Logger) (*openedStorage, error) {
	switch c.Backend {
	case backendMemory:
		store := memory.New()
		bg, stop := context.WithCancel(bg)
		done := make(chan struct{})
		go func() {
			defer close(done)
			compactLoop(bg, store, c.CompactionInterval, log)
		}()
		return &openedStorage{Interface: store, closeFn: func() error {
			stop()
			<-done
			return store.Close()
		}}, nil
	case backendEtcd:
		return openEtcd(ctx, bg, c, log)
	}
	return nil, fmt.Errorf("unknown --storage-backend %q (want %s or %s)", c.Backend, backendEtcd, backendMemory)
}

// compactLoop compacts s every interval to the revision it had one interval
// earlier, so that at least one interval of history stays watchable.
func compactLoop(ctx context.Context, s storage.Interface, interval time.Duration, log *slog.Logger) {
	if interval <= 0 {
		return
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	storage.CompactEvery(ctx, s, tick.C, log)
}
