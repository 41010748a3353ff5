package client

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client/internal/jsondecode"
	"github.com/listwatch/listwatch/client/internal/protodecode"
)

// Lists are decoded as they arrive, item by item, so that the response's
// bytes and the decoded list are never both held whole: only one item's
// bytes are buffered at a time.

// decodeJSONList reads a JSON list response.
func decodeJSONList[T cache.Object](c *codec[T], r io.Reader, maxItem int) (*cache.List[T], error) {
	st := jsondecode.NewStream(r, maxItem)
	dec := c.decoder()
	var list cache.List[T]
	var meta metav1.ListMeta
	var apiVersion, kind string
	if c, err := st.Peek(); err != nil || c != '{' {
		return nil, fmt.Errorf("list: not a JSON object: %v", errOr(err, io.ErrUnexpectedEOF))
	}
	err := members(st, dec, func(key string) error {
		if key == "items" {
			var err error
			list.Items, err = decodeJSONItems(c, st, dec)
			return err
		}
		v, err := st.Value()
		if err != nil {
			return err
		}
		switch key {
		case "metadata":
			err = dec.Unmarshal(v, &meta)
		case "kind":
			err = dec.Unmarshal(v, &kind)
		case "apiVersion":
			err = dec.Unmarshal(v, &apiVersion)
		default:
			if !jsondecode.Valid(v) {
				err = errors.New("invalid JSON")
			}
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", key, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	if err := c.checkListKind(apiVersion, kind); err != nil {
		return nil, err
	}
	if c.unstructured {
		// Items of a custom resource's list may leave their kind to the
		// list's.
		itemKind := strings.TrimSuffix(kind, "List")
		for _, obj := range list.Items {
			u := any(obj).(*unstructured.Unstructured)
			if u.GetKind() == "" {
				u.SetKind(itemKind)
			}
			if u.GetAPIVersion() == "" {
				u.SetAPIVersion(apiVersion)
			}
		}
	}
	fillList(&list, &meta)
	return &list, nil
}

// members calls fn with the key of each member of the object st is at; fn
// reads the value.
func members(st *jsondecode.Stream, dec *jsondecode.Decoder, fn func(key string) error) error {
	if err := st.Expect('{'); err != nil {
		return err
	}
	for first := true; ; first = false {
		c, err := st.Peek()
		if err != nil {
			return errOr(err, io.ErrUnexpectedEOF)
		}
		switch {
		case c == '}':
			return st.Expect('}')
		case !first && c != ',':
			return fmt.Errorf("json: expected ',' or '}', got %q", c)
		case !first:
			if err := st.Expect(','); err != nil {
				return err
			}
		}
		kb, err := st.Value()
		if err != nil {
			return err
		}
		var key string
		if err := dec.Unmarshal(kb, &key); err != nil || len(kb) == 0 || kb[0] != '"' {
			return fmt.Errorf("json: bad object key %.40q", kb)
		}
		if err := st.Expect(':'); err != nil {
			return err
		}
		if err := fn(key); err != nil {
			return err
		}
	}
}

// decodeJSONItems reads the items array, one item at a time.
func decodeJSONItems[T cache.Object](c *codec[T], st *jsondecode.Stream, dec *jsondecode.Decoder) ([]T, error) {
	b, err := st.Peek()
	if err != nil {
		return nil, fmt.Errorf("list items: %w", errOr(err, io.ErrUnexpectedEOF))
	}
	if b == 'n' {
		v, err := st.Value()
		if err != nil || string(v) != "null" {
			return nil, errors.New("list items: not an array")
		}
		return nil, nil
	}
	if err := st.Expect('['); err != nil {
		return nil, fmt.Errorf("list items: not an array: %w", err)
	}
	var items []T
	for {
		b, err := st.Peek()
		if err != nil {
			return nil, fmt.Errorf("list items: %w", errOr(err, io.ErrUnexpectedEOF))
		}
		if b == ']' {
			return items, st.Expect(']')
		}
		if len(items) > 0 {
			if err := st.Expect(','); err != nil {
				return nil, fmt.Errorf("list items: %w", err)
			}
		}
		v, err := st.Value()
		if err != nil {
			return nil, fmt.Errorf("list item %d: %w", len(items), err)
		}
		obj, err := c.decodeJSON(dec, v)
		if err != nil {
			return nil, fmt.Errorf("list item %d: %w", len(items), err)
		}
		items = append(items, obj)
	}
}

func errOr(err, def error) error {
	if err == nil || err == io.EOF {
		return def
	}
	return err
}

// checkListKind checks that a list is one of the resource's kind.
func (c *codec[T]) checkListKind(apiVersion, kind string) error {
	if c.unstructured || c.metadata {
		if kind == "" || !strings.HasSuffix(kind, "List") {
			return fmt.Errorf("%w: %q is not a list", errWrongKind, kind)
		}
		return nil
	}
	if kind != c.kind+"List" || apiVersion != "" && apiVersion != c.apiVersion {
		return fmt.Errorf("%w: list is a %s %s, expected %s %sList", errWrongKind, apiVersion, kind, c.apiVersion, c.kind)
	}
	return nil
}

func fillList[T cache.Object](l *cache.List[T], m *metav1.ListMeta) {
	l.ResourceVersion = m.ResourceVersion
	l.Continue = m.Continue
	l.RemainingItemCount = m.RemainingItemCount
	l.ShardInfo = m.ShardInfo
}

// protoStream reads a protobuf message from a stream, field by field,
// within a byte count.
type protoStream struct {
	r    *bufio.Reader
	left int64 // bytes left in the message being read
	max  int   // the largest length-delimited field read whole
	buf  []byte
}

func (s *protoStream) ReadByte() (byte, error) {
	if s.left <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	b, err := s.r.ReadByte()
	if err != nil {
		return 0, errOr(err, io.ErrUnexpectedEOF)
	}
	s.left--
	return b, nil
}

// key reads a field's key and, for length-delimited fields, its length.
func (s *protoStream) key() (num, wire int, length int64, err error) {
	k, err := binary.ReadUvarint(s)
	if err != nil {
		return 0, 0, 0, err
	}
	num, wire = int(k>>3), int(k&7)
	if wire == 2 {
		l, err := binary.ReadUvarint(s)
		if err != nil {
			return 0, 0, 0, err
		}
		if l > uint64(s.left) {
			return 0, 0, 0, io.ErrUnexpectedEOF
		}
		length = int64(l)
	}
	return num, wire, length, nil
}

// read returns the next n bytes, valid until the next call.
func (s *protoStream) read(n int64) ([]byte, error) {
	if n > int64(s.max) {
		return nil, fmt.Errorf("field of %d bytes: %w", n, ErrEventTooLarge)
	}
	if int64(cap(s.buf)) < n {
		s.buf = make([]byte, n)
	}
	b := s.buf[:n]
	if _, err := io.ReadFull(s.r, b); err != nil {
		return nil, errOr(err, io.ErrUnexpectedEOF)
	}
	s.left -= n
	return b, nil
}

// skip passes over a field of wire type wire and length length.
func (s *protoStream) skip(wire int, length int64) error {
	var n int64
	switch wire {
	case 0:
		_, err := binary.ReadUvarint(s)
		return err
	case 1:
		n = 8
	case 2:
		n = length
	case 5:
		n = 4
	default:
		return fmt.Errorf("protobuf: unsupported wire type %d", wire)
	}
	if n > s.left {
		return io.ErrUnexpectedEOF
	}
	m, err := s.r.Discard(int(n))
	s.left -= int64(m)
	return errOr(err, nil)
}

// decodeProtoList reads a protobuf list response, each item at most maxItem
// bytes.
func decodeProtoList[T cache.Object](c *codec[T], r io.Reader, maxItem int) (*cache.List[T], error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var magic [4]byte
	if _, err := io.ReadFull(br, magic[:]); err != nil || string(magic[:]) != string(protoMagic) {
		return nil, errors.New("list: protobuf body without the k8s envelope")
	}
	// The envelope: the stream up to its end.
	s := &protoStream{r: br, left: 1<<63 - 1, max: maxItem}
	var list *cache.List[T]
	var tm typeMeta
	for {
		if _, err := br.Peek(1); err == io.EOF {
			break
		}
		num, wire, length, err := s.key()
		if err != nil {
			return nil, fmt.Errorf("list envelope: %w", err)
		}
		switch {
		case num == 1 && wire == 2:
			b, err := s.read(length)
			if err == nil {
				tm, err = parseTypeMeta(b)
			}
			if err != nil {
				return nil, fmt.Errorf("list envelope: %w", err)
			}
		case num == 2 && wire == 2:
			outer := s.left
			s.left = length
			list, err = c.protoListBody(s)
			if err != nil {
				return nil, err
			}
			s.left = outer - length
		default:
			if err := s.skip(wire, length); err != nil {
				return nil, fmt.Errorf("list envelope: %w", err)
			}
		}
	}
	if err := c.checkListKind(tm.APIVersion, tm.Kind); err != nil {
		return nil, err
	}
	if list == nil {
		return nil, errors.New("list: envelope without a list")
	}
	return list, nil
}

// protoListBody reads a list message: metadata = 1, items = 2. The items
// are decoded as they are read, by up to GOMAXPROCS goroutines (see
// itemDecoder), into the list in their order.
func (c *codec[T]) protoListBody(s *protoStream) (*cache.List[T], error) {
	var list cache.List[T]
	d := newItemDecoder(c)
	defer d.stop()
	n := 0 // items read
	for s.left > 0 {
		num, wire, length, err := s.key()
		if err != nil {
			return nil, fmt.Errorf("list: %w", err)
		}
		switch {
		case num == 1 && wire == 2:
			b, err := s.read(length)
			if err != nil {
				return nil, fmt.Errorf("list metadata: %w", err)
			}
			var meta metav1.ListMeta
			if err := meta.Unmarshal(b); err != nil {
				return nil, fmt.Errorf("list metadata: %w", err)
			}
			fillList(&list, &meta)
		case num == 2 && wire == 2:
			if length > int64(s.max) {
				return nil, fmt.Errorf("list item %d: field of %d bytes: %w", n, length, ErrEventTooLarge)
			}
			if err := d.add(s, int(length)); err != nil {
				return nil, fmt.Errorf("list item %d: %w", n, err)
			}
			n++
		default:
			if err := s.skip(wire, length); err != nil {
				return nil, fmt.Errorf("list: %w", err)
			}
		}
	}
	items, err := d.finish()
	if err != nil {
		return nil, err
	}
	list.Items = items
	return &list, nil
}

// Decoding a list's items takes far longer than reading them, so a long
// list is decoded on every core while it is read: the reader cuts the
// items into batches, each read into a buffer of its own, which decoders
// turn into objects and hand back for reuse. A few batches are in flight
// at a time, so the bytes held are a few batches' worth, whatever the
// list's length, and the buffers are reused rather than made garbage.

const (
	// itemBatch is the most items, and itemBatchBytes about the most
	// bytes, in a batch.
	itemBatch      = 64
	itemBatchBytes = 256 << 10
)

// batchBufs keeps the read buffers of batches from one list to the next
// (decoded objects never point into them): a paged list decodes page after
// page, and buffers made afresh for each page would add garbage of the
// order of the pages themselves, which raises the heap's peak during a
// sync well above what the cache holds after it.
var batchBufs sync.Pool // of *batchBuf

type batchBuf struct {
	buf  []byte
	ends []int
}

// itemBatchOf holds the bytes of consecutive items and, once decoded, their
// objects.
type itemBatchOf[T cache.Object] struct {
	first int    // the index of the first item in the list
	buf   []byte // the items' bytes, one after the other
	ends  []int  // where each item's bytes end in buf
	objs  []T    // the decoded items
	err   error  // the first failure
	next  *itemBatchOf[T]
}

type itemDecoder[T cache.Object] struct {
	c       *codec[T]
	workers int
	work    chan *itemBatchOf[T] // batches to decode
	free    chan *itemBatchOf[T] // decoded batches whose buffers are free
	wg      sync.WaitGroup
	started int
	cur     *itemBatchOf[T] // the batch being read
	batches []*itemBatchOf[T]
	n       int // items read
	stopped bool
}

func newItemDecoder[T cache.Object](c *codec[T]) *itemDecoder[T] {
	w := runtime.GOMAXPROCS(0)
	d := &itemDecoder[T]{c: c, workers: w}
	if w > 1 {
		d.work = make(chan *itemBatchOf[T], w)
		// Each worker's batch, those queued, and the one being read.
		d.free = make(chan *itemBatchOf[T], 2*w+1)
	}
	return d
}

// add reads an item of length bytes from s.
func (d *itemDecoder[T]) add(s *protoStream, length int) error {
	if d.work == nil {
		// One core: decode in line, from s's buffer.
		b, err := s.read(int64(length))
		if err != nil {
			return err
		}
		obj, err := d.c.decodeProtoRaw(b, typeMeta{APIVersion: d.c.apiVersion, Kind: d.c.kind})
		if err != nil {
			return err
		}
		if d.cur == nil {
			d.cur = &itemBatchOf[T]{}
			d.batches = append(d.batches, d.cur)
		}
		d.cur.objs = append(d.cur.objs, obj)
		d.n++
		return nil
	}
	if d.cur == nil {
		d.cur = d.batch()
		d.cur.first = d.n
	}
	b := d.cur
	start := len(b.buf)
	b.buf = slices.Grow(b.buf, length)[:start+length]
	if _, err := io.ReadFull(s.r, b.buf[start:]); err != nil {
		return errOr(err, io.ErrUnexpectedEOF)
	}
	s.left -= int64(length)
	b.ends = append(b.ends, len(b.buf))
	d.n++
	if len(b.ends) == itemBatch || len(b.buf) >= itemBatchBytes {
		d.send()
	}
	return nil
}

// batch returns an empty batch: a new one while fewer than the free
// channel holds were made, else a decoded one, its objects taken out.
func (d *itemDecoder[T]) batch() *itemBatchOf[T] {
	var b *itemBatchOf[T]
	if d.started < cap(d.free) {
		d.started++
		if d.started <= d.workers {
			d.wg.Add(1)
			go d.decodeLoop()
		}
		b = &itemBatchOf[T]{}
		if p, ok := batchBufs.Get().(*batchBuf); ok {
			b.buf, b.ends = p.buf, p.ends
		}
	} else {
		b = <-d.free
		// Its objects move to a batch of their own, in the list's order.
		*b.next = itemBatchOf[T]{objs: b.objs, err: b.err, first: b.first}
		b.objs, b.err = nil, nil
	}
	b.buf, b.ends = b.buf[:0], b.ends[:0]
	// A placeholder for this batch's objects, filled when it is reused
	// or at the end.
	b.next = &itemBatchOf[T]{}
	d.batches = append(d.batches, b.next)
	return b
}

func (d *itemDecoder[T]) send() {
	d.work <- d.cur
	d.cur = nil
}

func (d *itemDecoder[T]) decodeLoop() {
	defer d.wg.Done()
	var pd protodecode.Decoder
	for b := range d.work {
		b.objs = make([]T, 0, len(b.ends))
		start := 0
		for i, end := range b.ends {
			if b.err != nil {
				break
			}
			obj, err := d.c.decodeProtoWith(&pd, b.buf[start:end], typeMeta{APIVersion: d.c.apiVersion, Kind: d.c.kind})
			if err != nil {
				b.err = fmt.Errorf("list item %d: %w", b.first+i, err)
				break
			}
			b.objs = append(b.objs, obj)
			start = end
		}
		if b.err == nil && d.c.share && !d.c.shareDecodedOnly {
			internObjects(b.objs, true)
		}
		d.free <- b
	}
}

// stop ends the decoders; finish calls it, and so must anyone who gives
// up reading first.
func (d *itemDecoder[T]) stop() {
	if d.work == nil || d.stopped {
		return
	}
	d.stopped = true
	close(d.work)
	d.wg.Wait()
}

// finish decodes what is left and returns every item in order, or the
// first failure.
func (d *itemDecoder[T]) finish() ([]T, error) {
	if d.work != nil {
		if d.cur != nil && len(d.cur.ends) > 0 {
			d.send()
		}
		d.stop()
		// Every batch made is now in free, decoded.
		for range len(d.free) {
			b := <-d.free
			*b.next = itemBatchOf[T]{objs: b.objs, err: b.err, first: b.first}
			batchBufs.Put(&batchBuf{buf: b.buf[:0], ends: b.ends[:0]})
		}
	}
	items := make([]T, 0, d.n)
	for _, b := range d.batches {
		if b.err != nil {
			return nil, b.err
		}
		items = append(items, b.objs...)
	}
	if len(items) != d.n {
		return nil, fmt.Errorf("list: %d items decoded of %d", len(items), d.n)
	}
	if d.n == 0 {
		return nil, nil
	}
	return items, nil
}
