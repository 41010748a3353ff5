// Package etcd is the storage.Interface backend on etcd v3, external or
// embedded (StartEmbedded).
//
// A revision is etcd's mod revision. All keys live under Config.Prefix, so
// several stores can share one etcd; revisions stay global to the etcd.
//
// Compaction: after a compaction at c (by Compact, by the periodic
// compactor, or by anyone else sharing the etcd), List at a revision r fails
// with storage.ErrCompacted iff r < c, and Watch from rev fails iff rev < c,
// that is iff some write after rev may be gone: etcd keeps every write after
// c, but not a delete at c itself.
//
// The periodic compactor (Config.CompactionInterval) speaks kube-apiserver's
// protocol, through CompactRevKey, so that of all the API servers on one
// etcd, listwatch's and kube-apiserver's, only one compacts per interval.
// CompactedRevision follows every compaction: the store's own at once;
// those made by others through CompactRevKey as soon as its watch sees the
// key change; others (etcdctl compact) within
// Config.CompactionPollInterval, or as soon as etcd answers ErrCompacted to
// a read or a watch of the store.
package etcd

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/listwatch/listwatch/storage"
)

// DefaultDialTimeout bounds the first contact with etcd when
// Config.DialTimeout is 0.
const DefaultDialTimeout = 5 * time.Second

// Config says how to reach etcd.
type Config struct {
	// Endpoints are the client URLs of the etcd members.
	Endpoints []string
	// TLS, when set, secures the connection; otherwise CertFile, KeyFile and
	// CAFile, when any is set, build one.
	TLS                       *tls.Config
	CertFile, KeyFile, CAFile string
	// Prefix namespaces every key, e.g. "/registry".
	Prefix string
	// DialTimeout bounds connecting; 0 means DefaultDialTimeout.
	DialTimeout time.Duration
	// CompactionInterval, when positive, compacts every interval to the
	// revision seen one interval earlier, so history is kept for at least one
	// interval, taking turns with the other API servers on the etcd as
	// kube-apiserver does (see CompactRevKey). 0 disables compaction.
	CompactionInterval time.Duration
	// CompactionPollInterval is how often the store checks etcd for
	// compactions made without CompactRevKey; 0 means
	// DefaultCompactionPollInterval.
	CompactionPollInterval time.Duration
	// Logger receives the backend's logs; nil discards them.
	Logger *slog.Logger
}

// tlsConfig returns the TLS configuration c asks for, nil for none.
func (c Config) tlsConfig() (*tls.Config, error) {
	if c.TLS != nil || c.CertFile == "" && c.KeyFile == "" && c.CAFile == "" {
		return c.TLS, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CertFile != "" || c.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no certificates", c.CAFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// Store is the etcd backend. Create one with New.
type Store struct {
	cli    *clientv3.Client
	prefix string
	log    *slog.Logger

	// lifetime ends at Close; it bounds the compactor and every watch.
	lifetime context.Context
	end      context.CancelFunc
	closing  sync.Once
	mu       sync.Mutex     // orders starting goroutines before Close waits
	running  sync.WaitGroup // the compactor and watch goroutines

	compaction compaction

	// stallGrace is how long a watch waits for a consumer that stopped
	// reading before it stops reading etcd, so that etcd's client does not
	// buffer without bound; the watch resumes where it paused.
	stallGrace time.Duration
}

var _ storage.Interface = (*Store)(nil)

// New connects to etcd and returns a store; it fails if no endpoint answers
// within the dial timeout or ctx.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcd: no endpoints")
	}
	tlsCfg, err := cfg.tlsConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	dial := cfg.DialTimeout
	if dial <= 0 {
		dial = DefaultDialTimeout
	}
	log := cmp.Or(cfg.Logger, slog.New(slog.NewTextHandler(io.Discard, nil)))
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		TLS:         tlsCfg,
		DialTimeout: dial,
		Logger:      zap.NewNop(),
		Context:     context.WithoutCancel(ctx),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd: connect %v: %w", cfg.Endpoints, err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, dial)
	defer cancel()
	if _, err := cli.Get(pingCtx, "health", clientv3.WithCountOnly()); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("etcd: reach %v: %w", cfg.Endpoints, err)
	}
	lifetime, end := context.WithCancel(context.Background())
	s := &Store{cli: cli, prefix: cfg.Prefix, log: log, lifetime: lifetime, end: end, stallGrace: time.Second}
	s.compaction.init()
	poll := cfg.CompactionPollInterval
	if poll <= 0 {
		poll = DefaultCompactionPollInterval
	}
	// No Close can race with these: s is not returned yet.
	s.running.Go(func() { s.trackCompactions(poll) })
	if cfg.CompactionInterval > 0 {
		ticker := time.NewTicker(cfg.CompactionInterval)
		s.running.Go(func() {
			defer ticker.Stop()
			s.runCompactor(ticker.C)
		})
	}
	return s, nil
}

// goRun runs f in a goroutine Close waits for, unless the store is closed.
func (s *Store) goRun(f func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lifetime.Err() != nil {
		return storage.ErrClosed
	}
	s.running.Go(f)
	return nil
}

// Client returns the etcd client the store uses.
func (s *Store) Client() *clientv3.Client { return s.cli }

// mapErr turns etcd's and the store's own failures into storage errors. An
// ErrCompacted is news of a compaction the store may not know of yet: the
// compaction tracker is asked to look.
func (s *Store) mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rpctypes.ErrCompacted):
		s.requestProbe()
		return fmt.Errorf("%w (%v)", storage.ErrCompacted, err)
	case errors.Is(err, rpctypes.ErrFutureRev):
		return fmt.Errorf("%w (%v)", storage.ErrFutureRevision, err)
	case errors.Is(err, rpctypes.ErrRequestTooLarge), status.Code(err) == codes.ResourceExhausted:
		// An etcd whose --max-request-bytes is under MaxValueBytes, or
		// gRPC's own message limit.
		return fmt.Errorf("%w (%v)", storage.ErrTooLarge, err)
	case s.lifetime.Err() != nil:
		return storage.ErrClosed
	}
	return err
}

// begin fails once the store is closed.
func (s *Store) begin() error {
	if s.lifetime.Err() != nil {
		return storage.ErrClosed
	}
	return nil
}

// keyValue converts an etcd key-value under the prefix to its public form.
// etcd hands back an empty value as nil, which would read as "no value".
func (s *Store) keyValue(kv *mvccpb.KeyValue) storage.KeyValue {
	value := kv.Value
	if value == nil {
		value = []byte{}
	}
	return storage.KeyValue{
		Key:            string(kv.Key[len(s.prefix):]),
		Value:          value,
		Revision:       kv.ModRevision,
		CreateRevision: kv.CreateRevision,
	}
}

// Create implements storage.Interface.
func (s *Store) Create(ctx context.Context, key string, value []byte) (int64, error) {
	if err := s.begin(); err != nil {
		return 0, fmt.Errorf("create %q: %w", key, err)
	}
	if err := storage.CheckValue(value); err != nil {
		return 0, fmt.Errorf("create %q: %w", key, err)
	}
	k := s.prefix + key
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(value))).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("create %q: %w", key, s.mapErr(err))
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("create %q: %w", key, storage.ErrKeyExists)
	}
	return resp.Header.Revision, nil
}

// Get implements storage.Interface.
func (s *Store) Get(ctx context.Context, key string) (storage.KeyValue, error) {
	if err := s.begin(); err != nil {
		return storage.KeyValue{}, fmt.Errorf("get %q: %w", key, err)
	}
	resp, err := s.cli.Get(ctx, s.prefix+key)
	if err != nil {
		return storage.KeyValue{}, fmt.Errorf("get %q: %w", key, s.mapErr(err))
	}
	if len(resp.Kvs) == 0 {
		return storage.KeyValue{}, fmt.Errorf("get %q: %w", key, storage.ErrNotFound)
	}
	return s.keyValue(resp.Kvs[0]), nil
}

// writeIf runs op on key if cond holds, and otherwise tells ErrNotFound
// from ErrConflict by the current version it reads in the same transaction.
func (s *Store) writeIf(ctx context.Context, key string, cond clientv3.Cmp, op clientv3.Op, expected int64) (*clientv3.TxnResponse, error) {
	k := s.prefix + key
	resp, err := s.cli.Txn(ctx).If(cond).Then(op).Else(clientv3.OpGet(k)).Commit()
	if err != nil {
		return nil, s.mapErr(err)
	}
	if resp.Succeeded {
		return resp, nil
	}
	cur := resp.Responses[0].GetResponseRange().Kvs
	if len(cur) == 0 {
		return nil, storage.ErrNotFound
	}
	return nil, fmt.Errorf("at revision %d, expected %d: %w", cur[0].ModRevision, expected, storage.ErrConflict)
}

// Update implements storage.Interface.
func (s *Store) Update(ctx context.Context, key string, value []byte, expected int64) (int64, error) {
	if err := s.begin(); err != nil {
		return 0, fmt.Errorf("update %q: %w", key, err)
	}
	if err := storage.CheckValue(value); err != nil {
		return 0, fmt.Errorf("update %q: %w", key, err)
	}
	k := s.prefix + key
	// A missing key has mod revision 0: compare the create revision as well
	// so that expected 0 never creates the key.
	cond := clientv3.Compare(clientv3.ModRevision(k), "=", expected)
	if expected <= 0 {
		cond = clientv3.Compare(clientv3.CreateRevision(k), "<", 0)
	}
	resp, err := s.writeIf(ctx, key, cond, clientv3.OpPut(k, string(value)), expected)
	if err != nil {
		return 0, fmt.Errorf("update %q: %w", key, err)
	}
	return resp.Header.Revision, nil
}

// Delete implements storage.Interface.
func (s *Store) Delete(ctx context.Context, key string, expected int64) (storage.KeyValue, int64, error) {
	if err := s.begin(); err != nil {
		return storage.KeyValue{}, 0, fmt.Errorf("delete %q: %w", key, err)
	}
	k := s.prefix + key
	cond := clientv3.Compare(clientv3.ModRevision(k), "=", expected)
	if expected == 0 {
		cond = clientv3.Compare(clientv3.CreateRevision(k), ">", 0)
	}
	resp, err := s.writeIf(ctx, key, cond, clientv3.OpDelete(k, clientv3.WithPrevKV()), expected)
	if err != nil {
		return storage.KeyValue{}, 0, fmt.Errorf("delete %q: %w", key, err)
	}
	prev := resp.Responses[0].GetResponseDeleteRange().PrevKvs
	if len(prev) == 0 {
		// The compare proved the key existed in the same transaction.
		return storage.KeyValue{}, 0, fmt.Errorf("delete %q: etcd returned no previous value", key)
	}
	return s.keyValue(prev[0]), resp.Header.Revision, nil
}

// span returns the etcd key range [from, end) of the keys under prefix
// starting at start.
func (s *Store) span(prefix, start string) (from, end string) {
	end = clientv3.GetPrefixRangeEnd(s.prefix + prefix)
	from = s.prefix + max(prefix, start)
	if from == "" {
		// etcd has no empty key; "\x00" is the smallest there is.
		from = "\x00"
	}
	return from, end
}

// List implements storage.Interface.
func (s *Store) List(ctx context.Context, prefix string, opts storage.ListOptions) (storage.ListResult, error) {
	if err := s.begin(); err != nil {
		return storage.ListResult{}, fmt.Errorf("list %q: %w", prefix, err)
	}
	if opts.Revision < 0 || opts.Limit < 0 {
		return storage.ListResult{}, fmt.Errorf("list %q: negative revision %d or limit %d", prefix, opts.Revision, opts.Limit)
	}
	from, end := s.span(prefix, opts.StartKey)
	getOpts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(opts.Limit)}
	if opts.Revision > 0 {
		getOpts = append(getOpts, clientv3.WithRev(opts.Revision))
	}
	if from >= end && end != "\x00" {
		// StartKey is past the prefix: ask for nothing, but still check the
		// revision.
		getOpts = append(getOpts, clientv3.WithCountOnly())
	}
	resp, err := s.cli.Get(ctx, from, getOpts...)
	if err != nil {
		if errors.Is(err, rpctypes.ErrCompacted) {
			// etcd is compacted past opts.Revision at least.
			s.noteCompacted(opts.Revision + 1)
		}
		return storage.ListResult{}, fmt.Errorf("list %q at %d: %w", prefix, opts.Revision, s.mapErr(err))
	}
	res := storage.ListResult{Revision: opts.Revision, More: resp.More}
	if res.Revision == 0 {
		res.Revision = resp.Header.Revision
	}
	if from >= end && end != "\x00" {
		return res, nil
	}
	res.Items = make([]storage.KeyValue, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		res.Items[i] = s.keyValue(kv)
	}
	// Count is the size of the whole range, not just the page.
	if res.More {
		res.Remaining = resp.Count - int64(len(resp.Kvs))
	}
	return res, nil
}

// Revision implements storage.Interface.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	if err := s.begin(); err != nil {
		return 0, fmt.Errorf("revision: %w", err)
	}
	resp, err := s.cli.Get(ctx, s.prefix+"\x00", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("revision: %w", s.mapErr(err))
	}
	return resp.Header.Revision, nil
}

// Compact implements storage.Interface: it compacts etcd at once, outside
// the turns of the periodic compactor (and without writing CompactRevKey).
// Compacting at or below the revision of an earlier compaction does nothing.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	if err := s.begin(); err != nil {
		return fmt.Errorf("compact %d: %w", rev, err)
	}
	_, err := s.cli.Compact(ctx, rev)
	if errors.Is(err, rpctypes.ErrCompacted) {
		// etcd is compacted at rev or further.
		s.noteCompacted(rev)
		s.requestProbe()
		return nil
	}
	if err != nil {
		return fmt.Errorf("compact %d: %w", rev, s.mapErr(err))
	}
	s.noteCompacted(rev)
	return nil
}

// Close implements storage.Interface: it stops the compactor, ends every
// watch with storage.ErrClosed, waits for their goroutines and closes the
// client. It does not stop an embedded server.
func (s *Store) Close() error {
	err := fmt.Errorf("close: %w", storage.ErrClosed)
	s.closing.Do(func() {
		s.mu.Lock()
		s.end()
		s.mu.Unlock()
		s.running.Wait()
		err = s.cli.Close()
		if errors.Is(err, context.Canceled) {
			err = nil
		}
	})
	return err
}
