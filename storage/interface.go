// Package storage is the versioned key-value store under the API server.
//
// A backend holds opaque encoded objects under string keys and gives every
// write a revision from one global, strictly increasing counter: the
// revision of a key's last write is its resourceVersion. The API server
// encodes and decodes objects and sets resourceVersion on the way out;
// backends never look inside a value. This keeps backends small (etcd fits
// the interface as it is) and lets the watch cache decode each event once
// for all its watchers.
//
// Two backends implement Interface: storage/etcd (embedded or external etcd)
// and storage/memory (tests and throwaway runs). storage/storagetest holds
// the conformance suite both must pass.
package storage

import (
	"context"
	"errors"
	"fmt"
)

// Errors a backend returns, wrapped with the key or revision involved; test
// for them with errors.Is.
var (
	// ErrNotFound: the key does not exist (Get, Update, Delete).
	ErrNotFound = errors.New("storage: key not found")
	// ErrKeyExists: Create of a key that exists.
	ErrKeyExists = errors.New("storage: key already exists")
	// ErrConflict: the key's revision is not the one the caller expected.
	ErrConflict = errors.New("storage: revision conflict")
	// ErrCompacted: the revision asked for (List at N, Watch from N) is older
	// than the oldest the backend still keeps. The API server answers 410.
	ErrCompacted = errors.New("storage: revision compacted")
	// ErrFutureRevision: the revision asked for is newer than any written.
	ErrFutureRevision = errors.New("storage: revision not yet written")
	// ErrClosed: the backend was closed.
	ErrClosed = errors.New("storage: closed")
	// ErrTooLarge: Create or Update of a value over MaxValueBytes. The API
	// server answers 413.
	ErrTooLarge = errors.New("storage: value too large")
)

// MaxValueBytes is the largest value a backend stores: etcd's default
// request limit (--max-request-bytes, 1.5 MiB, which kube-apiserver's
// objects meet too) less room for the key and the transaction around the
// value, so that every backend refuses the same objects, and refuses them
// before etcd would.
const MaxValueBytes = 1536<<10 - 4<<10

// CheckValue is the check every backend makes of a value it is asked to
// write: ErrTooLarge over MaxValueBytes.
func CheckValue(value []byte) error {
	if len(value) > MaxValueBytes {
		return fmt.Errorf("%d bytes, limit %d: %w", len(value), MaxValueBytes, ErrTooLarge)
	}
	return nil
}

// KeyValue is one version of one key.
type KeyValue struct {
	Key   string
	Value []byte
	// Revision is the revision of the write that produced Value (etcd's mod
	// revision): the object's resourceVersion.
	Revision int64
	// CreateRevision is the revision of the write that created the key.
	CreateRevision int64
}

// ListOptions selects part of a prefix as it was at one revision.
type ListOptions struct {
	// Revision is the revision to read at; 0 means the latest.
	Revision int64
	// Limit caps the number of items; 0 means no limit.
	Limit int64
	// StartKey, when set, starts the listing at this key (inclusive) instead
	// of at the prefix: the continue position of a paged list.
	StartKey string
}

// ListResult is one page of a list.
type ListResult struct {
	// Items are in key order.
	Items []KeyValue
	// Revision is the revision the page was read at; the pages of one paged
	// list are read at the revision of the first.
	Revision int64
	// More reports whether keys after the last item remain under the prefix.
	More bool
	// Remaining counts the keys after the last item, when More.
	Remaining int64
}

// EventType says what a watch event did to its key.
type EventType int

const (
	// EventPut: the key was created or updated.
	EventPut EventType = iota + 1
	// EventDelete: the key was deleted.
	EventDelete
	// EventProgress: no write, but the watch has delivered every write
	// under its prefix up to KV.Revision (KV has nothing else). Watches
	// send them only after RequestProgress.
	EventProgress
)

// Event is one write seen by a watch, or its progress.
type Event struct {
	Type EventType
	// KV is the key after the write; on EventDelete its Value is nil and its
	// Revision is the revision of the delete.
	KV KeyValue
	// Prev is the key before the write; Prev.Value is nil when the write
	// created the key.
	Prev KeyValue
}

// IsCreate reports whether the event created its key.
func (e Event) IsCreate() bool { return e.Type == EventPut && e.Prev.Value == nil }

// Watcher streams the writes under a prefix in revision order.
type Watcher interface {
	// Events delivers the writes; it is closed when the watch ends, after
	// which Err says why (nil after Stop or when the context ended).
	Events() <-chan Event
	// Err returns the reason the watch ended, once Events is closed; an
	// ErrCompacted watch must be restarted from a newer revision.
	Err() error
	// Stop ends the watch and releases its resources; it is idempotent.
	Stop()
}

// Interface is a versioned key-value store with watches.
//
// Every method is safe for concurrent use. Revisions of successful writes
// are strictly increasing across all keys.
type Interface interface {
	// Create stores value under key if the key does not exist and returns the
	// revision of the write, or ErrKeyExists.
	Create(ctx context.Context, key string, value []byte) (int64, error)
	// Get returns the current version of key, or ErrNotFound.
	Get(ctx context.Context, key string) (KeyValue, error)
	// Update replaces the value of key if its current revision is expected
	// and returns the revision of the write; ErrConflict if the revision
	// differs, ErrNotFound if the key does not exist.
	Update(ctx context.Context, key string, value []byte, expected int64) (int64, error)
	// Delete removes key if its current revision is expected (0: any) and
	// returns the version deleted and the revision of the delete; ErrConflict
	// or ErrNotFound as for Update.
	Delete(ctx context.Context, key string, expected int64) (deleted KeyValue, rev int64, err error)
	// List returns the keys under prefix as they were at opts.Revision, or
	// ErrCompacted / ErrFutureRevision.
	List(ctx context.Context, prefix string, opts ListOptions) (ListResult, error)
	// Watch streams every write under prefix with a revision greater than
	// rev (0: from now on), or fails with ErrCompacted if writes after rev
	// are no longer kept. It ends when ctx ends or Stop is called.
	Watch(ctx context.Context, prefix string, rev int64) (Watcher, error)
	// Revision returns the revision of the latest write.
	Revision(ctx context.Context) (int64, error)
	// RequestProgress asks the backend's watches to report how far they
	// are: each that has delivered every write up to the revision the
	// backend is at (or a newer one) sends an EventProgress at it, as
	// etcd's progress notifications do. It is a hint: a watch still
	// catching up may send none, and an API server's watch cache then
	// reads storage instead.
	RequestProgress(ctx context.Context) error
	// Compact discards the versions older than rev; Lists at and Watches
	// from a revision below rev then fail with ErrCompacted.
	Compact(ctx context.Context, rev int64) error
	// CompactedRevision returns the newest compaction revision the backend
	// knows of (0: none) and a channel closed once it knows of a newer one.
	// It covers the compactions made through Compact at once and, where
	// the storage is shared (etcd), those made by anyone else once the
	// backend has noticed them. Lists at and Watches from a revision below
	// it fail with ErrCompacted, or are about to: a compaction may be
	// announced a moment before it is made. It never decreases.
	CompactedRevision() (rev int64, changed <-chan struct{})
	// Close releases the backend; later calls fail with ErrClosed.
	Close() error
}
