package apiserver

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/apiserver/internal/respond"
	"github.com/listwatch/listwatch/watchcache"
)

// Objects served from the watch cache are immutable and shared, so their
// serializations are memoized next to them (watchcache.Encodings) under
// these keys: a cached object is encoded once per format however many
// lists and watch events carry it, as kube-apiserver's caching objects do.
// The framing around an object (a list, a watch event, the protobuf
// envelope) is cheap byte concatenation around those shared bytes.
const (
	// memoJSON is the object as JSON, without a trailing newline.
	memoJSON = "json"
	// memoProto is the typed object as a protobuf message, without the
	// envelope: what a list's items and the envelope's raw field hold.
	memoProto = registry.MemoProto
)

// protoMagic starts every Kubernetes protobuf body ("k8s\x00").
var protoMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// protoMessage is a generated Kubernetes type that marshals itself.
type protoMessage interface {
	Marshal() ([]byte, error)
}

// protoObject is a built-in object that marshals itself as protobuf.
type protoObject interface {
	object
	protoMessage
}

// objectJSON returns u as JSON, memoized in m.
func objectJSON(u *unstructured.Unstructured, m *watchcache.Encodings) ([]byte, error) {
	return m.Get(memoJSON, func() ([]byte, error) {
		b, err := json.Marshal(u.Object)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s as JSON: %w", u.GetKind(), u.GetName(), err)
		}
		return b, nil
	})
}

// convertedItemJSON is an item of a list of a resource stored as another
// version: kube-apiserver converts each such item to a new object of the
// version asked for, which has no apiVersion and kind (an item of a
// resource served at its storage version keeps the ones storage decoding
// set).
func convertedItemJSON(u *unstructured.Unstructured, _ *watchcache.Encodings) ([]byte, error) {
	obj := maps.Clone(u.Object)
	delete(obj, "apiVersion")
	delete(obj, "kind")
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s %s as JSON: %w", u.GetKind(), u.GetName(), err)
	}
	return b, nil
}

// objectProto returns the built-in object u as its typed protobuf message
// (no envelope), memoized in m.
func objectProto(u *unstructured.Unstructured, m *watchcache.Encodings) ([]byte, error) {
	return m.Get(memoProto, func() ([]byte, error) { return protoOf(u) })
}

// eventProto is objectProto of ev's object. A DELETED event's object is
// its last version at the delete's resourceVersion: when that version's
// message is made already (it went to the same watchers when it was
// written), the event's is that message with the new resourceVersion, a
// fraction of the cost of converting the map to its Go type.
func eventProto(ev *watchEvent) ([]byte, error) {
	return ev.ObjectEncodings().Get(memoProto, func() ([]byte, error) {
		if base := ev.BaseEncodings(); base != nil {
			if last, ok := base.Done(memoProto); ok {
				if msg, err := withResourceVersion(ev.Object.GroupVersionKind(), last, ev.Object.GetResourceVersion()); err == nil {
					return msg, nil
				}
			}
		}
		return protoOf(ev.Object)
	})
}

// protoOf is the built-in object u as its typed protobuf message.
func protoOf(u *unstructured.Unstructured) ([]byte, error) {
	typed, err := typedOf(u)
	if err != nil {
		return nil, fmt.Errorf("convert %s %s to its Go type: %w", u.GetKind(), u.GetName(), err)
	}
	pm, ok := typed.(protoMessage)
	if !ok {
		return nil, fmt.Errorf("no protobuf encoding for %s", u.GroupVersionKind())
	}
	return pm.Marshal()
}

// withResourceVersion is msg, the protobuf message of an object of kind
// gvk, with resourceVersion rv.
func withResourceVersion(gvk schema.GroupVersionKind, msg []byte, rv string) ([]byte, error) {
	typed, err := registry.Scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	pm, ok := typed.(protoObject)
	if !ok {
		return nil, fmt.Errorf("no protobuf encoding for %s", gvk)
	}
	um, ok := typed.(interface{ Unmarshal([]byte) error })
	if !ok {
		return nil, fmt.Errorf("no protobuf decoding for %s", gvk)
	}
	if err := um.Unmarshal(msg); err != nil {
		return nil, err
	}
	pm.SetResourceVersion(rv)
	return pm.Marshal()
}

// envelopeSize is the size of the protobuf envelope (magic and
// runtime.Unknown) around a message of n bytes.
func envelopeSize(apiVersion, kind string, n int) int {
	tm := typeMetaSize(apiVersion, kind)
	return len(protoMagic) + 1 + protowire.SizeVarint(uint64(tm)) + tm +
		1 + protowire.SizeVarint(uint64(n)) + n + 4
}

func typeMetaSize(apiVersion, kind string) int {
	return protowire.SizeBytes(len(apiVersion)) + 1 + protowire.SizeBytes(len(kind)) + 1
}

// appendEnvelopeHead appends the envelope up to the message of n bytes:
// the magic, then runtime.Unknown's typeMeta (1) and the tag and length of
// raw (2). appendEnvelopeTail closes it with the empty contentEncoding (3)
// and contentType (4) that the generated marshaller always writes.
func appendEnvelopeHead(b []byte, apiVersion, kind string, n int) []byte {
	b = append(b, protoMagic...)
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(typeMetaSize(apiVersion, kind)))
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, apiVersion)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, kind)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(n))
}

func appendEnvelopeTail(b []byte) []byte {
	return append(b, 0x1a, 0x00, 0x22, 0x00)
}

// jsonEventFrame frames an event as a JSON watch line around the object's
// JSON.
func jsonEventFrame(t watch.EventType, obj []byte) []byte {
	const head, mid, tail = `{"type":"`, `","object":`, "}\n"
	b := make([]byte, 0, len(head)+len(t)+len(mid)+len(obj)+len(tail))
	b = append(b, head...)
	b = append(b, t...)
	b = append(b, mid...)
	b = append(b, obj...)
	return append(b, tail...)
}

// protoEventFrame frames an event as client-go's protobuf watch stream
// expects: a 4-byte big-endian length, then a metav1.WatchEvent whose
// object (a runtime.RawExtension) holds the enveloped object, the message
// msg of the given apiVersion and kind.
func protoEventFrame(t watch.EventType, apiVersion, kind string, msg []byte) []byte {
	env := envelopeSize(apiVersion, kind, len(msg))
	ext := protowire.SizeTag(1) + protowire.SizeBytes(env)
	body := protowire.SizeTag(1) + protowire.SizeBytes(len(t)) + protowire.SizeTag(2) + protowire.SizeBytes(ext)
	b := make([]byte, 4, 4+body)
	binary.BigEndian.PutUint32(b, uint32(body))
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, string(t))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(ext))
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(env))
	b = appendEnvelopeHead(b, apiVersion, kind, len(msg))
	b = append(b, msg...)
	return appendEnvelopeTail(b)
}

// listWriteBuffer sizes the buffer a list is streamed through: large enough
// that a list costs few writes, small next to a large list's body.
const listWriteBuffer = 64 << 10

// writeList streams a page of r's collection in enc (JSON or protobuf)
// from the items' memoized serializations, never building the list as one
// object or one buffer. Every item is encoded before the first byte is
// written, so that a failure is still answered with a Status and the body's
// length is known.
func writeList(w http.ResponseWriter, r *resource, enc encoding, res listResult) error {
	if len(res.encs) != len(res.items) {
		// Lists built outside the cache carry no memos.
		res.encs = make([]*watchcache.Encodings, len(res.items))
		for i := range res.encs {
			res.encs[i] = new(watchcache.Encodings)
		}
	}
	if enc == encProtobuf {
		items, total, err := encodeItems(res, objectProto)
		if err == nil {
			return writeProtoList(w, r, res, items, total)
		}
		// As for single objects, anything the typed scheme cannot encode
		// is answered in JSON.
	}
	itemJSON := objectJSON
	if r.StoredAs != nil {
		itemJSON = convertedItemJSON
	}
	items, total, err := encodeItems(res, itemJSON)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	return writeJSONList(w, r, res, items, total)
}

// encodeItems returns the items of res encoded by encode and their total
// size.
func encodeItems(res listResult, encode func(*unstructured.Unstructured, *watchcache.Encodings) ([]byte, error)) ([][]byte, int, error) {
	items := make([][]byte, len(res.items))
	total := 0
	for i, u := range res.items {
		b, err := encode(u, res.encs[i])
		if err != nil {
			return nil, 0, err
		}
		items[i] = b
		total += len(b)
	}
	return items, total, nil
}

func writeJSONList(w http.ResponseWriter, r *resource, res listResult, items [][]byte, total int) error {
	md := map[string]any{"resourceVersion": strconv.FormatInt(res.rev, 10)}
	if res.continue_ != "" || r.AlwaysContinue() {
		md["continue"] = res.continue_ // a custom resource list always has it
	}
	if res.remaining != nil {
		md["remainingItemCount"] = *res.remaining
	}
	mdJSON, err := json.Marshal(md)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	head := make([]byte, 0, 64+len(mdJSON))
	head = append(head, `{"kind":`...)
	head = strconv.AppendQuote(head, r.GVK.Kind+"List")
	head = append(head, `,"apiVersion":`...)
	head = strconv.AppendQuote(head, r.APIVersion())
	head = append(head, `,"metadata":`...)
	head = append(head, mdJSON...)
	head = append(head, `,"items":[`...)
	const tail = "]}\n"
	n := len(head) + total + max(len(items)-1, 0) + len(tail)

	w.Header().Set("Content-Type", respond.MediaJSON)
	w.Header().Set("Content-Length", strconv.Itoa(n))
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, listWriteBuffer)
	_, _ = bw.Write(head)
	for i, it := range items {
		if i > 0 {
			_ = bw.WriteByte(',')
		}
		_, _ = bw.Write(it)
	}
	_, _ = bw.WriteString(tail)
	// A client gone mid-body is not an error to answer: the status is sent.
	_ = bw.Flush()
	return nil
}

// writeProtoList writes the <Kind>List message (metadata (1), items (2))
// inside the envelope, item by item.
func writeProtoList(w http.ResponseWriter, r *resource, res listResult, items [][]byte, total int) error {
	lm := metav1.ListMeta{ResourceVersion: strconv.FormatInt(res.rev, 10), Continue: res.continue_, RemainingItemCount: res.remaining}
	lmb, err := lm.Marshal()
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	msg := protowire.SizeTag(1) + protowire.SizeBytes(len(lmb))
	for _, it := range items {
		msg += protowire.SizeTag(2) + protowire.SizeBytes(len(it))
	}
	apiVersion, kind := r.APIVersion(), r.GVK.Kind+"List"
	n := envelopeSize(apiVersion, kind, msg)

	w.Header().Set("Content-Type", respond.MediaProtobuf)
	w.Header().Set("Content-Length", strconv.Itoa(n))
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, listWriteBuffer)
	head := appendEnvelopeHead(make([]byte, 0, 64), apiVersion, kind, msg)
	head = protowire.AppendTag(head, 1, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(len(lmb)))
	_, _ = bw.Write(head)
	_, _ = bw.Write(lmb)
	var tag [16]byte
	for _, it := range items {
		t := protowire.AppendTag(tag[:0], 2, protowire.BytesType)
		t = protowire.AppendVarint(t, uint64(len(it)))
		_, _ = bw.Write(t)
		_, _ = bw.Write(it)
	}
	_, _ = bw.Write(appendEnvelopeTail(tag[:0]))
	_ = bw.Flush()
	return nil
}
