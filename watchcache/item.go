package watchcache

import (
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/listwatch/listwatch/storage"
)

// Item is one version of an object as the cache holds it: the bytes
// storage holds for it, what selectors read (its labels and fields), and
// the memo of its serializations. The object itself is decoded from the
// bytes when asked for (Object) and not kept: a decoded object is a tree
// of maps or structs several times the size of its bytes, and the cache
// holds every object of a resource and every version of its window
// (BenchmarkCachedPodHeap in package apiserver, 10,000 pods created and
// patched once on etcd: 73.8 KB and 886 heap objects per pod held
// decoded, 16.8 KB and 19 held as bytes, of which about 10 KB are the
// two versions' JSON and 3 KB etcd's raft log).
// An Item is immutable and shared: its bytes must not be modified.
type Item[T Object] struct {
	key   string
	rev   int64
	value []byte
	attrs *attrs
	codec *codec[T]
	// enc memoizes the version's serializations, shared by every list and
	// event that carries it.
	enc Encodings
}

// NewItem returns the version kv as an Item whose object decode decodes,
// for lists and events made outside a cache (decode must be able to
// decode kv). Selectors see neither labels nor fields on it.
func NewItem[T Object](kv storage.KeyValue, decode func(storage.KeyValue) (T, error)) (*Item[T], error) {
	empty, err := newOf[T]()
	if err != nil {
		return nil, err
	}
	return &Item[T]{key: kv.Key, rev: kv.Revision, value: kv.Value, attrs: &attrs{}, codec: &codec[T]{decode: decode, empty: empty, log: slog.Default()}}, nil
}

// codec decodes a cache's items.
type codec[T Object] struct {
	decode func(kv storage.KeyValue) (T, error)
	empty  func() T
	log    *slog.Logger
}

// Key is the item's storage key.
func (it *Item[T]) Key() string { return it.key }

// Revision is the storage revision of this version: its resourceVersion.
func (it *Item[T]) Revision() int64 { return it.rev }

// Value is the version's bytes as storage holds them (for a DELETED
// event's object, the last version's bytes: its resourceVersion is the
// delete's). They are shared and must not be modified.
func (it *Item[T]) Value() []byte { return it.value }

// Encodings memoizes the version's serializations, shared by every list
// and event that carries it while it is the object's current version.
func (it *Item[T]) Encodings() *Encodings { return &it.enc }

// Decode decodes the version with Config.Decode, anew on each call: the
// caller owns the result.
func (it *Item[T]) Decode() (T, error) {
	return it.codec.decode(storage.KeyValue{Key: it.key, Value: it.value, Revision: it.rev})
}

// Object is Decode for callers that cannot act on an error: the cache
// decoded the same bytes when it took them in, and Config.Decode decodes
// a value the same way each time, so it does not fail; should it, the
// error is logged and Object is an empty object carrying only the
// resourceVersion.
func (it *Item[T]) Object() T {
	obj, err := it.Decode()
	if err != nil {
		it.codec.log.Error("watchcache: decoding a cached object failed", "key", it.key, "rev", it.rev, "err", err)
		obj = it.codec.empty()
		obj.SetResourceVersion(strconv.FormatInt(it.rev, 10))
	}
	return obj
}

// attrs are an item's labels and selectable fields, as key/value pairs
// sorted by key in one slice: the labels first (nl pairs), then the
// fields. Two maps took about three times the memory, and an object's
// attributes seldom change between its versions, which then share them.
type attrs struct {
	kv []string
	nl int
	// hashes are what shard selectors read.
	hashes shardHashes
}

// newAttrs returns the attributes of ls, fs and h, or same when it holds
// exactly them. The strings share one allocation, not one each as the
// decoded object had them.
func newAttrs(ls labels.Set, fs fields.Set, h shardHashes, same *attrs) *attrs {
	kv := make([]string, 0, 2*(len(ls)+len(fs)))
	kv = appendSorted(kv, ls)
	kv = appendSorted(kv, fs)
	if same != nil && same.nl == len(ls) && same.hashes == h && slices.Equal(same.kv, kv) {
		return same
	}
	n := 0
	for _, s := range kv {
		n += len(s)
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range kv {
		b.WriteString(s)
	}
	all := b.String()
	for i, s := range kv {
		kv[i], all = all[:len(s)], all[len(s):]
	}
	return &attrs{kv: kv, nl: len(ls), hashes: h}
}

func appendSorted[M ~map[string]string](kv []string, m M) []string {
	start := len(kv)
	for k, v := range m {
		kv = append(kv, k, v)
	}
	sort.Sort(byKey(kv[start:]))
	return kv
}

// byKey sorts a slice of key/value pairs by key.
type byKey []string

func (p byKey) Len() int           { return len(p) / 2 }
func (p byKey) Less(i, j int) bool { return p[2*i] < p[2*j] }
func (p byKey) Swap(i, j int) {
	p[2*i], p[2*j] = p[2*j], p[2*i]
	p[2*i+1], p[2*j+1] = p[2*j+1], p[2*i+1]
}

// lookup finds key among the sorted pairs of kv.
func lookup(kv []string, key string) (string, bool) {
	n := len(kv) / 2
	i := sort.Search(n, func(i int) bool { return kv[2*i] >= key })
	if i < n && kv[2*i] == key {
		return kv[2*i+1], true
	}
	return "", false
}

// labelsOf and fieldsOf are the labels.Labels and fields.Fields of attrs;
// pointers, so that handing them to a selector allocates nothing.
type (
	labelsOf attrs
	fieldsOf attrs
)

func (a *labelsOf) Lookup(k string) (string, bool) { return lookup(a.kv[:2*a.nl], k) }
func (a *labelsOf) Has(k string) bool              { _, ok := a.Lookup(k); return ok }
func (a *labelsOf) Get(k string) string            { v, _ := a.Lookup(k); return v }
func (a *fieldsOf) lookup(k string) (string, bool) { return lookup(a.kv[2*a.nl:], k) }
func (a *fieldsOf) Has(k string) bool              { _, ok := a.lookup(k); return ok }
func (a *fieldsOf) Get(k string) string            { v, _ := a.lookup(k); return v }
