package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/listwatch/listwatch/storage/etcd"
)

// openEtcd opens the etcd backend: the external cluster of
// c.EtcdServers, or else an etcd member embedded in this process with its
// data in c.DataDir (objects survive restarts).
func openEtcd(ctx, _ context.Context, c storageConfig, log *slog.Logger) (*openedStorage, error) {
	ecfg := etcd.Config{
		Endpoints:          c.EtcdServers,
		CAFile:             c.EtcdCAFile,
		CertFile:           c.EtcdCertFile,
		KeyFile:            c.EtcdKeyFile,
		CompactionInterval: c.CompactionInterval,
		Logger:             log.With("component", "storage"),
	}
	var member *etcd.Embedded
	unlock := func() error { return nil }
	if len(c.EtcdServers) == 0 {
		if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("etcd data dir: %w", err)
		}
		var err error
		if unlock, err = lockDataDir(c.DataDir); err != nil {
			return nil, err
		}
		if member, err = etcd.StartEmbedded(ctx, etcd.EmbeddedConfig{Dir: c.DataDir}); err != nil {
			return nil, errors.Join(err, unlock())
		}
		ecfg.Endpoints, ecfg.TLS = member.Endpoints, member.ClientConfig().TLS
		log.Info("embedded etcd started", "dir", c.DataDir, "endpoints", member.Endpoints)
	}
	store, err := etcd.New(ctx, ecfg)
	if err != nil {
		if member != nil {
			err = errors.Join(err, member.Close(), unlock())
		}
		return nil, err
	}
	return &openedStorage{Interface: store, closeFn: func() error {
		err := store.Close()
		if member != nil {
			err = errors.Join(err, member.Close(), unlock())
		}
		return err
	}}, nil
}

// lockDataDir takes an exclusive lock beside an embedded etcd's data
// directory, so that a second server started on the same directory fails at
// once instead of waiting forever on etcd's own database lock. The lock
// goes away with the process, however it ends.
func lockDataDir(dir string) (unlock func() error, err error) {
	path := filepath.Clean(dir) + ".lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock etcd data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("etcd data dir %s is in use by another listwatch process", dir)
		}
		return nil, fmt.Errorf("lock etcd data dir: %w", err)
	}
	return f.Close, nil
}
