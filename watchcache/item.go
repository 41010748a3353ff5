package watchcache

import (
	"bytes"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

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
// Once the version is the window's alone, or plainVersions newer ones
// have come in after it, the cache packs its bytes (pack.go); Value
// unpacks them.
// An Item is immutable and shared: its bytes must not be modified.
type Item[T Object] struct {
	key string
	rev int64
	// plain is the version's bytes, nil once they are packed; packed is
	// set before plain is cleared, so that a reader finding plain nil
	// finds packed.
	plain  atomic.Pointer[[]byte]
	packed atomic.Pointer[packedValue]
	size   int // the bytes' length
	attrs  *attrs
	codec  *codec[T]
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
	return newItemOf(kv.Key, kv.Revision, kv.Value, &attrs{}, &codec[T]{decode: decode, empty: empty, log: slog.Default()}), nil
}

// newItemOf returns the version of key at rev whose bytes are value.
func newItemOf[T Object](key string, rev int64, value []byte, a *attrs, c *codec[T]) *Item[T] {
	it := &Item[T]{key: key, rev: rev, size: len(value), attrs: a, codec: c}
	it.plain.Store(&value)
	return it
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
// delete's). They are shared and must not be modified. A packed version
// is unpacked anew on each call; should that fail (it does not: pack and
// unpack are each other's inverse) the error is logged and Value is
// empty.
func (it *Item[T]) Value() []byte {
	if p := it.plain.Load(); p != nil {
		return *p
	}
	return it.AppendValue(make([]byte, 0, it.size), -1)
}

// Field is the value of the version's selectable field key (one of
// Attributes.Fields), as field selectors read it, and whether it has
// that field: read without decoding the version.
func (it *Item[T]) Field(key string) (string, bool) { return it.attrs.field(key) }

// Size is the length of the version's bytes (Value).
func (it *Item[T]) Size() int { return it.size }

// Packed tells whether the version's bytes are packed: whether Value
// unpacks them anew, rather than returning bytes held.
func (it *Item[T]) Packed() bool { return it.plain.Load() == nil }

// AppendValue appends the first n of the version's bytes to dst (all of
// them when n is negative or beyond Size), unpacking no more of a packed
// version than that: a list writes a packed version through one buffer
// rather than each into bytes of its own.
func (it *Item[T]) AppendValue(dst []byte, n int) []byte {
	if n < 0 || n > it.size {
		n = it.size
	}
	if p := it.plain.Load(); p != nil {
		return append(dst, (*p)[:n]...)
	}
	pv := it.packed.Load()
	out, err := pv.dict.unpackTo(dst, pv.ops, it.size, n)
	if err != nil {
		it.codec.log.Error("watchcache: unpacking a cached version failed", "key", it.key, "rev", it.rev, "err", err)
	}
	return out
}

// pack packs the version's bytes, unless they are packed already, against
// d when that makes them smaller; only the goroutine applying the cache's
// events calls it. It reports whether d served them poorly (packed them
// to more than 1/poorPacking of their size), so that the cache may
// extend d.
func (it *Item[T]) pack(d *dictionary) (poor bool) {
	if it.Packed() {
		return false
	}
	return it.repack(d)
}

// repack is pack for a version packed or not: one packed already keeps
// the smaller of its packings.
func (it *Item[T]) repack(d *dictionary) (poor bool) {
	v := it.Value()
	if len(v) < minPacked {
		return false
	}
	ops := d.pack(v)
	poor = len(ops) > len(v)/poorPacking
	if cur := it.packed.Load(); len(ops) > len(v)*3/4 || cur != nil && len(cur.ops) <= len(ops) {
		return poor
	}
	// Exactly sized: the packed versions are most of what a cache holds,
	// and pack's buffer grew by doubling.
	it.packed.Store(&packedValue{dict: d, ops: bytes.Clone(ops)})
	it.plain.Store(nil)
	return poor
}

// Encodings memoizes the version's serializations, shared by every list
// and event that carries it while it is the object's current version.
func (it *Item[T]) Encodings() *Encodings { return &it.enc }

// Decode decodes the version with Config.Decode, anew on each call: the
// caller owns the result.
func (it *Item[T]) Decode() (T, error) {
	return it.codec.decode(storage.KeyValue{Key: it.key, Value: it.Value(), Revision: it.rev})
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

// attrs are an item's labels and selectable fields: the labels' keys and
// values and the fields' values in one string, the labels' pairs first,
// sorted by key, then the fields' values in the order of their keys, which
// are kept once for all the versions with the same keys (fieldKeys: a
// resource's fields are a fixed list), with where each string ends. Two
// maps took about three times the memory, a []string with a header per
// key and value about twice (BenchmarkCachedPodHeap, 10,000 pods and
// their previous versions: newAttrs held 19.0 MB as a []string); the
// fields' keys were more than half of the string (hack/memory.sh, 10,000
// pods: 650 bytes per version's attrs with them, note of issue 41). An
// object's attributes seldom change between its versions, which then
// share them.
type attrs struct {
	all string
	// ends[i] is where the i-th string of all ends: the key of label p
	// is string 2p, its value string 2p+1; the value of field f is
	// string 2*nl+f.
	ends   []uint32
	nl     int        // the number of label pairs
	fields *fieldKeys // the fields' keys; nil: no fields
	// hashes are what shard selectors read.
	hashes shardHashes
}

// fieldKeys are the sorted keys of a set of fields.
type fieldKeys []string

// matches reports whether k's keys are those of pairs, sorted key/value
// pairs.
func (k *fieldKeys) matches(pairs []string) bool {
	if k == nil {
		return len(pairs) == 0
	}
	if len(*k) != len(pairs)/2 {
		return false
	}
	for i, key := range *k {
		if pairs[2*i] != key {
			return false
		}
	}
	return true
}

// keyTables holds the fieldKeys a cache's versions share; it is safe for
// concurrent use (lists read from storage make items too).
type keyTables struct {
	mu     sync.Mutex
	tables []*fieldKeys
}

// maxKeyTables bounds the key sets a cache shares: one per resource in
// practice; the versions of a set beyond are given keys of their own.
const maxKeyTables = 16

// of returns the shared fieldKeys of pairs, sorted key/value pairs.
func (t *keyTables) of(pairs []string) *fieldKeys {
	if len(pairs) == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range t.tables {
		if k.matches(pairs) {
			return k
		}
	}
	keys := make(fieldKeys, len(pairs)/2)
	for i := range keys {
		keys[i] = strings.Clone(pairs[2*i])
	}
	if len(t.tables) < maxKeyTables {
		t.tables = append(t.tables, &keys)
	}
	return &keys
}

// newAttrs returns the attributes of ls, fs and h, with the fields' keys
// from tables, or same when it holds exactly them.
func newAttrs(ls labels.Set, fs fields.Set, h shardHashes, same *attrs, tables *keyTables) *attrs {
	kv := make([]string, 0, 2*(len(ls)+len(fs)))
	kv = appendSorted(kv, ls)
	kv = appendSorted(kv, fs)
	nl, fpairs := len(ls), kv[2*len(ls):]
	var keys *fieldKeys
	if same != nil && same.fields.matches(fpairs) {
		keys = same.fields
	} else {
		keys = tables.of(fpairs)
	}
	// The fields' values take their pairs' places.
	nf := len(fpairs) / 2
	for f := range nf {
		kv[2*nl+f] = fpairs[2*f+1]
	}
	kv = kv[:2*nl+nf]
	if same != nil && same.nl == nl && same.hashes == h && same.fields == keys && same.equal(kv) {
		return same
	}
	n := 0
	for _, s := range kv {
		n += len(s)
	}
	var b strings.Builder
	b.Grow(n)
	ends := make([]uint32, len(kv))
	for i, s := range kv {
		b.WriteString(s)
		ends[i] = uint32(b.Len())
	}
	return &attrs{all: b.String(), ends: ends, nl: nl, fields: keys, hashes: h}
}

// str is the i-th string of a.
func (a *attrs) str(i int) string {
	start := uint32(0)
	if i > 0 {
		start = a.ends[i-1]
	}
	return a.all[start:a.ends[i]]
}

// equal reports whether a holds exactly the strings kv.
func (a *attrs) equal(kv []string) bool {
	if len(kv) != len(a.ends) {
		return false
	}
	for i, s := range kv {
		if a.str(i) != s {
			return false
		}
	}
	return true
}

// label finds the value of the label key.
func (a *attrs) label(key string) (string, bool) {
	i := sort.Search(a.nl, func(i int) bool { return a.str(2*i) >= key })
	if i < a.nl && a.str(2*i) == key {
		return a.str(2*i + 1), true
	}
	return "", false
}

// field finds the value of the field key.
func (a *attrs) field(key string) (string, bool) {
	if a.fields == nil {
		return "", false
	}
	f, ok := slices.BinarySearch(*a.fields, key)
	if !ok {
		return "", false
	}
	return a.str(2*a.nl + f), true
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

// labelsOf and fieldsOf are the labels.Labels and fields.Fields of attrs;
// pointers, so that handing them to a selector allocates nothing.
type (
	labelsOf attrs
	fieldsOf attrs
)

func (a *labelsOf) Lookup(k string) (string, bool) { return (*attrs)(a).label(k) }
func (a *labelsOf) Has(k string) bool              { _, ok := a.Lookup(k); return ok }
func (a *labelsOf) Get(k string) string            { v, _ := a.Lookup(k); return v }
func (a *fieldsOf) Has(k string) bool              { _, ok := (*attrs)(a).field(k); return ok }
func (a *fieldsOf) Get(k string) string            { v, _ := (*attrs)(a).field(k); return v }
