package watchcache

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/sharding"
	kubestorage "k8s.io/apiserver/pkg/storage"

	"github.com/listwatch/listwatch/storage"
)

// ListOptions are the parameters of a list, as in metav1.ListOptions.
type ListOptions struct {
	// ResourceVersion and ResourceVersionMatch choose the revision read; see
	// the package documentation.
	ResourceVersion      string
	ResourceVersionMatch metav1.ResourceVersionMatch
	// Limit caps the items of a page; 0 means no limit.
	Limit int64
	// Continue is the token of the previous page.
	Continue string
	// Label and Field select the objects listed; nil selects all.
	Label labels.Selector
	Field fields.Selector
	// Shard selects the objects whose uid or namespace hashes into its
	// ranges (WatchOptions.Shard); nil or empty selects all.
	Shard sharding.Selector
	// Namespace, when set, limits the list to one namespace.
	Namespace string
}

// ListResult is one page of a list.
type ListResult[T Object] struct {
	// Items are in key order and shared: their bytes must not be
	// modified. Each memoizes its serializations (Item.Encodings); for
	// items served from the cache they are shared with its watch events
	// and other lists, so a cached object is serialized once per format.
	// Objects decodes them.
	Items []*Item[T]
	// ResourceVersion is the revision the page was read at (the list's
	// metadata.resourceVersion).
	ResourceVersion int64
	// Continue is the token of the next page, empty on the last.
	Continue string
	// RemainingItemCount counts the items after this page when the list has
	// no selector and more pages; nil otherwise.
	RemainingItemCount *int64
}

// Objects decodes the page's items (Item.Object) for the caller.
func (r *ListResult[T]) Objects() []T {
	out := make([]T, len(r.Items))
	for i, it := range r.Items {
		out[i] = it.Object()
	}
	return out
}

// List returns the objects selected by opts, in key order; see the package
// documentation for where each resourceVersion is served from.
func (c *Cache[T]) List(ctx context.Context, opts ListOptions) (*ListResult[T], error) {
	sh, err := newShard(opts.Shard)
	if err := c.begin(ctx, cmp.Or(validateList(opts), err)); err != nil {
		return nil, err
	}
	p := page[T]{pred: newPredicate[T](opts.Label, opts.Field, sh, c.cfg.Prefix, opts.Namespace), limit: opts.Limit, prefix: c.cfg.Prefix}
	if opts.Namespace != "" {
		p.prefix += opts.Namespace + "/"
	}
	p.start = p.prefix
	if opts.Continue != "" {
		// kube-apiserver's storage checks the token before what is sent
		// with it.
		start, rev, err := kubestorage.DecodeContinue(opts.Continue, c.cfg.Prefix)
		if err != nil {
			return nil, errBadRequest("invalid continue token: %v", err)
		}
		if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
			return nil, errBadRequest("specifying resource version is not allowed when using continue")
		}
		p.start, p.continuing = max(start, p.prefix), true
		return c.listAt(ctx, rev, p)
	}
	rv, err := ParseResourceVersion(opts.ResourceVersion)
	if invalid := (*InvalidResourceVersionError)(nil); errors.As(err, &invalid) {
		return nil, errBadRequest("invalid resource version: %v", err)
	}
	if err != nil {
		return nil, err
	}
	switch m := opts.ResourceVersionMatch; {
	case opts.ResourceVersion == "":
		// A consistent read: storage's revision now is the least the
		// answer may be at.
		srev, err := c.cfg.Storage.Revision(ctx)
		if err != nil {
			return nil, c.storageError(err, 0, false)
		}
		rv = srev
	case m == metav1.ResourceVersionMatchExact || (m == "" && rv != 0 && p.limit > 0):
		return c.listAt(ctx, rv, p)
	}
	fromCache, err := c.reach(ctx, rv)
	if err != nil {
		return nil, err
	}
	if !fromCache {
		return c.pageFromStorage(ctx, 0, p)
	}
	sn, err := c.latest(ctx)
	if err != nil {
		return nil, err
	}
	return c.pageFromSnapshot(sn, p), nil
}

// page is what a list asks for besides the revision.
type page[T Object] struct {
	pred  predicate[T]
	limit int64
	// prefix holds the keys the list covers: Prefix, or for a namespace
	// Prefix+namespace+"/" (keys are Prefix, namespace, name, as in
	// kube-apiserver's storage), so that a namespaced list reads its
	// namespace alone and has more pages only when the namespace has more.
	prefix     string
	start      string // the full key to start at, inclusive
	continuing bool
}

// end is the first key after p's prefix.
func (p page[T]) end() string {
	// The prefix ends with "/", and "0" follows "/".
	return p.prefix[:len(p.prefix)-1] + "0"
}

// listAt serves a list at exactly rev: from a snapshot when the cache can
// build one and storage has not compacted rev, else from storage (which
// answers ErrCompacted, 410, for a compacted rev).
func (c *Cache[T]) listAt(ctx context.Context, rev int64, p page[T]) (*ListResult[T], error) {
	if !c.compactedBefore(rev) {
		if sn := c.snapshotAt(rev); sn != nil {
			return c.pageFromSnapshot(sn, p), nil
		}
	}
	return c.pageFromStorage(ctx, rev, p)
}

// compactedBefore reports whether storage is known to be compacted past rev.
func (c *Cache[T]) compactedBefore(rev int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return rev < c.compacted
}

func (c *Cache[T]) pageFromSnapshot(sn *snapshot[T], p page[T]) *ListResult[T] {
	i, last := sn.search(p.start), sn.search(p.end())
	i = min(i, last)
	if p.pred.all() {
		end := last
		if p.limit > 0 {
			end = min(end, i+int(p.limit))
		}
		res := &ListResult[T]{Items: slices.Clone(sn.items[i:end]), ResourceVersion: sn.rev}
		if end < last {
			res.Continue = encodeContinue(sn.rev, sn.items[end-1].key, c.cfg.Prefix)
			n := int64(last - end)
			res.RemainingItemCount = &n
		}
		return res
	}
	capacity := last - i
	if p.limit > 0 {
		capacity = min(capacity, int(p.limit))
	} else {
		capacity = 0 // a selector: let append size it
	}
	res := &ListResult[T]{Items: make([]*Item[T], 0, capacity), ResourceVersion: sn.rev}
	for ; i < last; i++ {
		it := sn.items[i]
		if !p.pred.matches(it) {
			continue
		}
		res.Items = append(res.Items, it)
		if p.limit > 0 && int64(len(res.Items)) == p.limit {
			i++
			break
		}
	}
	if i < last {
		res.Continue = encodeContinue(sn.rev, sn.items[i-1].key, c.cfg.Prefix)
	}
	return res
}

// pageFromStorage reads a page from storage at rev (0: latest), reading on
// while a selector leaves the page short.
func (c *Cache[T]) pageFromStorage(ctx context.Context, rev int64, p page[T]) (*ListResult[T], error) {
	res := &ListResult[T]{}
	start := p.start
	for {
		want := p.limit - int64(len(res.Items))
		if p.limit > 0 && !p.pred.all() {
			want = max(want, 100) // a selector may skip most of a page
		}
		sr, err := c.cfg.Storage.List(ctx, p.prefix, storage.ListOptions{Revision: rev, Limit: want, StartKey: start})
		if err != nil {
			return nil, c.storageError(err, rev, p.continuing)
		}
		rev = sr.Revision
		res.ResourceVersion = rev
		for i, kv := range sr.Items {
			it, _, _, err := c.newItem(kv, nil)
			if err != nil {
				return nil, fmt.Errorf("watchcache %s: %w", c.cfg.Prefix, err)
			}
			if !p.pred.matches(it) {
				continue
			}
			res.Items = append(res.Items, it)
			if p.limit > 0 && int64(len(res.Items)) == p.limit {
				left := int64(len(sr.Items)-i-1) + sr.Remaining
				if i < len(sr.Items)-1 || sr.More {
					res.Continue = encodeContinue(rev, kv.Key, c.cfg.Prefix)
					if p.pred.all() {
						res.RemainingItemCount = &left
					}
				}
				return res, nil
			}
		}
		if !sr.More || len(sr.Items) == 0 {
			return res, nil
		}
		start = sr.Items[len(sr.Items)-1].Key + "\x00"
	}
}

// continueToken is the continue parameter, as kube-apiserver's storage
// encodes it (and kubestorage.DecodeContinue reads it): the revision of
// the first page and the key (after the prefix) the next page starts at.
type continueToken struct {
	V     string `json:"v"`
	RV    int64  `json:"rv"`
	Start string `json:"start"`
}

const continueVersion = "meta.k8s.io/v1"

func encodeContinue(rev int64, lastKey, prefix string) string {
	b, _ := json.Marshal(continueToken{V: continueVersion, RV: rev, Start: lastKey[len(prefix):] + "\x00"})
	return base64.RawURLEncoding.EncodeToString(b)
}

// reach reports whether the cache can serve a read that must be at least at
// rev (true), or only storage can (false). A rev storage has written but
// the cache has not seen is asked of storage's watch (RequestProgress) and
// waited for up to ProgressTimeout, as kube-apiserver's consistent reads
// from its watch cache are; a rev beyond storage's is waited for, up to
// FreshTimeout.
func (c *Cache[T]) reach(ctx context.Context, rev int64) (bool, error) {
	if rev <= c.ResourceVersion() {
		return true, nil
	}
	srev, err := c.cfg.Storage.Revision(ctx)
	if err != nil {
		return false, c.storageError(err, rev, false)
	}
	if rev <= srev {
		fresh := c.cfg.Storage.RequestProgress(ctx) == nil && c.waitFor(ctx, rev, c.cfg.ProgressTimeout) == nil
		c.mu.Lock()
		if fresh {
			c.stats.FreshReads++
		} else {
			c.stats.FreshFallbacks++
		}
		c.mu.Unlock()
		return fresh, nil
	}
	if err := c.waitFor(ctx, rev, c.cfg.FreshTimeout); err != nil {
		return false, err
	}
	return true, nil
}

// waitFor waits until the cache has seen rev, up to timeout.
func (c *Cache[T]) waitFor(ctx context.Context, rev int64, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		c.mu.Lock()
		cur, closed, advanced := c.rev, c.closed, c.advanced
		c.mu.Unlock()
		switch {
		case cur >= rev:
			return nil
		case closed:
			return ErrClosed
		}
		select {
		case <-advanced:
		case <-t.C:
			return errTooLarge(rev, cur)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// latest returns the snapshot at the cache's newest revision.
func (c *Cache[T]) latest(ctx context.Context) (*snapshot[T], error) {
	for {
		c.mu.Lock()
		rev, closed := c.rev, c.closed
		c.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		// nil only when a relist or a full window overtook rev meanwhile.
		if sn := c.snapshotAt(rev); sn != nil {
			return sn, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// stateNotOlderThan returns the state at a revision at least rev (0: any),
// for the initial events of a watch: from the cache when it can, else read
// whole from storage.
func (c *Cache[T]) stateNotOlderThan(ctx context.Context, rev int64) (*snapshot[T], error) {
	fromCache, err := c.reach(ctx, rev)
	if err != nil {
		return nil, err
	}
	if fromCache {
		return c.latest(ctx)
	}
	items, srev, err := c.listStorage(ctx)
	if err != nil {
		return nil, c.storageError(err, rev, false)
	}
	return &snapshot[T]{rev: srev, items: items}, nil
}
