package apiserver

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/apiserver/internal/respond"
	"github.com/listwatch/listwatch/apiserver/internal/wire"
)

// listWriteBuffer sizes the buffer a list is streamed through: large enough
// that a list costs few writes, small next to a large list's body.
const listWriteBuffer = 64 << 10

// writeList streams a page of r's collection in enc (JSON or protobuf)
// from the items' kept bytes or memoized serializations, never building
// the list as one object or one buffer. Every item is encoded before the
// first byte is written, so that a failure is still answered with a Status
// and the body's length is known.
func writeList(w http.ResponseWriter, r *resource, enc encoding, res listResult) error {
	if enc == encProtobuf {
		items, total, err := encodeItems(res, func(it *wire.Item) (wire.Piece, error) {
			msg, err := wire.ObjectProto(it)
			return wire.Piece{Body: msg}, err
		})
		if err == nil {
			return writeProtoList(w, r, res, items, total)
		}
		// As for single objects, anything the typed scheme cannot encode
		// is answered in JSON.
	}
	itemJSON := wire.ItemJSON
	switch {
	case r.Custom:
		itemJSON = func(it *wire.Item) (wire.Piece, error) {
			js, err := wire.DecodedJSON(it)
			return wire.Piece{Body: js}, err
		}
	case r.StoredAs != nil:
		itemJSON = func(it *wire.Item) (wire.Piece, error) {
			js, err := wire.ConvertedItemJSON(it)
			return wire.Piece{Body: js}, err
		}
	}
	items, total, err := encodeItems(res, itemJSON)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	return writeJSONList(w, r, res, items, total)
}

// encodeItems returns the items of res encoded by encode and their total
// size.
func encodeItems(res listResult, encode func(*wire.Item) (wire.Piece, error)) ([]wire.Piece, int, error) {
	items := make([]wire.Piece, len(res.items))
	total := 0
	for i, it := range res.items {
		p, err := encode(it)
		if err != nil {
			return nil, 0, err
		}
		items[i] = p
		total += p.Len()
	}
	return items, total, nil
}

func writeJSONList(w http.ResponseWriter, r *resource, res listResult, items []wire.Piece, total int) error {
	md := map[string]any{"resourceVersion": strconv.FormatInt(res.rev, 10)}
	if res.continue_ != "" || r.AlwaysContinue() {
		md["continue"] = res.continue_ // a custom resource list always has it
	}
	if res.remaining != nil {
		md["remainingItemCount"] = *res.remaining
	}
	if res.shardInfo != nil {
		md["shardInfo"] = res.shardInfo
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
	var buf []byte
	for i, it := range items {
		if i > 0 {
			_ = bw.WriteByte(',')
		}
		it.Write(bw, &buf)
	}
	_, _ = bw.WriteString(tail)
	// A client gone mid-body is not an error to answer: the status is sent.
	_ = bw.Flush()
	return nil
}

// writeProtoList writes the <Kind>List message (metadata (1), items (2))
// inside the envelope, item by item.
func writeProtoList(w http.ResponseWriter, r *resource, res listResult, items []wire.Piece, total int) error {
	lm := metav1.ListMeta{ResourceVersion: strconv.FormatInt(res.rev, 10), Continue: res.continue_, RemainingItemCount: res.remaining, ShardInfo: res.shardInfo}
	lmb, err := lm.Marshal()
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	msg := protowire.SizeTag(1) + protowire.SizeBytes(len(lmb))
	for _, it := range items {
		msg += protowire.SizeTag(2) + protowire.SizeBytes(it.Len())
	}
	apiVersion, kind := r.APIVersion(), r.GVK.Kind+"List"
	n := wire.EnvelopeSize(apiVersion, kind, msg)

	w.Header().Set("Content-Type", respond.MediaProtobuf)
	w.Header().Set("Content-Length", strconv.Itoa(n))
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, listWriteBuffer)
	head := wire.AppendEnvelopeHead(make([]byte, 0, 64), apiVersion, kind, msg)
	head = protowire.AppendTag(head, 1, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(len(lmb)))
	_, _ = bw.Write(head)
	_, _ = bw.Write(lmb)
	var (
		tag [16]byte
		buf []byte
	)
	for _, it := range items {
		t := protowire.AppendTag(tag[:0], 2, protowire.BytesType)
		t = protowire.AppendVarint(t, uint64(it.Len()))
		_, _ = bw.Write(t)
		it.Write(bw, &buf)
	}
	_, _ = bw.Write(wire.AppendEnvelopeTail(tag[:0]))
	_ = bw.Flush()
	return nil
}
