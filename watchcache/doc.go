// Package watchcache is the API server's watch cache: one per resource, it
// sits between storage and the HTTP layer so that lists at resourceVersion
// "0" and watches from any version still in its window never touch storage.
//
// A Cache runs one storage watch for its key prefix. It decodes every
// storage event once, keeps the current state (key → object) and a window of
// recent events, and fans each event out to its watchers, each through its
// own bounded buffer: a watcher whose buffer is full is closed (Err reports
// ErrTooSlow; the client re-watches) and never stalls the cache or the other
// watchers. When storage answers ErrCompacted to the cache's own watch, the
// cache relists, resets its window and closes every watcher with a 410
// Expired error, because none of them can be continued without a gap.
//
// The cache follows storage's compactions (storage.Interface's
// CompactedRevision: with etcd, those made by any API server or client
// sharing it). A revision below the newest compaction is not served from
// memory even while the window and the snapshots still hold it: a watch
// from it is 410 Expired, and a list at it goes to storage, which answers
// 410 Expired, so that every API server on one etcd agrees on what has
// expired. Watches already running are not affected.
//
// # Lifecycle
//
// New builds a cache and starts nothing. Run lists the prefix (retrying
// until storage answers), closes Ready, and follows storage until its
// context ends; then every watcher ends with ErrClosed, and later calls
// fail with it. A list or watch made before the first list waits for it,
// or for its own context, as kube-apiserver's requests wait for a watch
// cache that is still initializing.
//
// # Resource versions
//
// A resourceVersion is a storage revision. The cache serves requests as
// kube-apiserver does:
//
// List
//   - "0" (or NotOlderThan N the cache has reached): from the cache, at its
//     latest revision.
//   - "": a consistent read, at storage's current revision. From the cache
//     when it has seen that revision; when it has not (writes under other
//     prefixes move the revision without an event here), the cache asks
//     storage's watch to report its progress (RequestProgress: etcd's
//     progress notification) and waits up to ProgressTimeout for it, as
//     kube-apiserver's consistent reads from its watch cache do; failing
//     that, from storage (Stats counts both).
//   - N with resourceVersionMatch=Exact, or N with a limit and no match: from
//     the cache when N is inside its window and not compacted in storage,
//     else from storage at N (ErrCompacted → 410 Expired).
//   - NotOlderThan N beyond the cache: from storage at its latest revision;
//     N beyond storage's revision → 504 "Too large resource version".
//   - Continue tokens carry the key to resume from and the revision of the
//     first page, so every page of a list is read at one revision; a token
//     whose revision storage has compacted → 410 Expired.
//
// Watch
//   - "" and "0": ADDED for every object in the cache's current state, then
//     the events after it. Like kube-apiserver's watch cache, "" is served
//     from the cache's latest state, which may trail storage by the events in
//     flight; those events follow, so nothing is missed.
//   - N: the events after N. N older than the window or than storage's
//     compaction → 410 Expired; N newer than storage's revision → 504 Too
//     large resource version; N newer than the cache but written → the
//     watch starts and skips events up to N.
//   - SendInitialEvents=true (resourceVersionMatch=NotOlderThan required, as
//     in kube-apiserver): ADDED for the state at a revision not older than
//     the one asked for ("" is a consistent read: storage's current
//     revision; "0" any), read from the cache when it has reached that
//     revision and from storage otherwise, then a BOOKMARK at that revision
//     annotated
//     k8s.io/initial-events-end: "true" (AllowBookmarks required), then live
//     events.
//
// Selectors: a watcher sees an object that moves into its selector as ADDED,
// one that moves out as DELETED carrying the previous object with the
// resourceVersion of the event (as kube-apiserver does), and nothing for
// changes outside its selector. Deletes carry the last state of the object
// with the resourceVersion of the delete.
//
// Shards: a list's or a watch's Shard (KEP-5866's shardSelector, as
// k8s.io/apiserver/pkg/sharding.Parse makes it) keeps the objects whose
// 64-bit FNV-1a hash of metadata.uid or metadata.namespace (kube's
// sharding.HashField) falls in one of its ranges, so that N clients each
// asking for 1/N of the hash space each receive about 1/N of the objects
// and events. The hashes are taken once per version, when the cache
// decodes it, and kept with its labels and fields: a shard costs no
// decoding and no storage read. uid and namespace are immutable, so every
// version of an object hashes the same: an object never moves into or out
// of a shard, and a sharded watcher sees all of an object's events or none.
//
// BOOKMARKs are sent every Config.BookmarkInterval to watchers that asked,
// carrying the latest revision the cache has seen; a bookmark that does not
// fit in a watcher's buffer is skipped, not fatal.
//
// # What the cache holds
//
// The cache keeps every version it holds (the state and the versions its
// window's events carry) as an Item: the bytes storage holds for it, or
// the form Config.Keep makes of them (such as the object's wire form),
// with its labels and fields for selectors and a memo of its
// serializations. Config.Decode decodes each storage event once, to read
// those attributes, and the object is decoded again whenever it is asked
// for (Item.Object, Event.Object, Get, ListResult.Objects) rather than
// kept: decoded objects are several times the size of their bytes. Only
// the newest versions keep their bytes plain; the others are packed
// against a dictionary made from a few of them (most of a resource's
// objects' bytes repeat) and unpacked whenever read. The window is
// bounded by events (Config.WindowSize) and by the stored bytes of the
// versions they carry (Config.WindowBytes); its oldest events leave it
// when either bound is reached. An event and the state entry of the
// same version share one Item; a DELETED event's object is the last
// version's bytes at the delete's revision.
//
// # Sharing
//
// Items and the objects of events are shared by all callers and must not
// be mutated. Event.Encode memoizes a watcher's encoding of an event so
// that a thousand watchers of one event encode it once; the window holds
// its events only while watchers do, so a framed encoding lives as long as
// the watchers that write it. Each cached object version also carries an
// Encodings memo of its own serializations, handed out with it by
// Event.ObjectEncodings (ADDED and MODIFIED events, initial events) and
// Item.Encodings, so that an object is serialized once per format however
// many lists and watches carry it, for as long as that version is the
// object's current one (a version replaced by a newer one is kept for the
// window alone, without its serializations; a deleted one keeps them). Config.Preset lets the cache's owner, who may hold a version in
// a form that serializes more cheaply (the object its own write stored),
// preset that memo before anyone reads it (Encodings.Preset). A DELETED
// event's object has a memo of its own; Event.BaseEncodings hands out the
// last version's, whose finished serializations (Encodings.Done) can be
// changed into the event's.
//
// # Errors
//
// Errors that a client caused or must act on (410, 504, 400) are
// *apierrors.StatusError values the HTTP layer can serialize as they are.
// Storage failures are wrapped with %w; the context's error is returned as
// it is.
package watchcache
