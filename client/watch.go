package client

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client/internal/jsondecode"
)

// ErrEventTooLarge is a watch event or list item over the size cap.
var ErrEventTooLarge = jsondecode.ErrTooLarge

// eventDecoder reads the events of a watch stream one at a time. next
// returns io.EOF only at a clean end of stream, between two events.
type eventDecoder[T cache.Object] interface {
	next() (cache.Event[T], error)
}

// NewJSONDecoder returns a reader of a JSON watch stream (one
// {"type":...,"object":...} value after another) of objects of type T of
// group version gv, each event at most maxEvent bytes (DefaultMaxEventBytes
// when 0). It is what a Watcher decodes with, exposed for benchmarks and
// tools that replay recorded streams.
func NewJSONDecoder[T cache.Object](r io.Reader, gv schema.GroupVersion, maxEvent int) (*Decoder[T], error) {
	c, err := newCodec[T](gv)
	if err != nil {
		return nil, err
	}
	return &Decoder[T]{d: newJSONEvents(c, r, maxEvent)}, nil
}

// NewProtobufDecoder is NewJSONDecoder for a protobuf watch stream.
func NewProtobufDecoder[T cache.Object](r io.Reader, gv schema.GroupVersion, maxEvent int) (*Decoder[T], error) {
	c, err := newCodec[T](gv)
	if err != nil {
		return nil, err
	}
	if !c.proto {
		return nil, fmt.Errorf("client: %s cannot be read from protobuf", c.elem)
	}
	return &Decoder[T]{d: newProtoEvents(c, r, maxEvent)}, nil
}

// Decoder reads the events of a recorded watch stream.
type Decoder[T cache.Object] struct{ d eventDecoder[T] }

// Next returns the next event, io.EOF at the clean end of the stream, or an
// error for a stream that is broken, truncated or not a watch stream.
func (d *Decoder[T]) Next() (cache.Event[T], error) { return d.d.next() }

// jsonEvents decodes a JSON watch stream. Each member of the envelope is
// framed by the Stream and the object decoded once, straight from the
// stream's buffer into its type.
type jsonEvents[T cache.Object] struct {
	codec *codec[T]
	st    *jsondecode.Stream
	dec   *jsondecode.Decoder
}

func newJSONEvents[T cache.Object](c *codec[T], r io.Reader, maxEvent int) *jsonEvents[T] {
	if maxEvent <= 0 {
		maxEvent = DefaultMaxEventBytes
	}
	return &jsonEvents[T]{codec: c, st: jsondecode.NewStream(r, maxEvent), dec: c.decoder()}
}

func (d *jsonEvents[T]) next() (cache.Event[T], error) {
	ev, err := d.read()
	if err != nil {
		if err == io.EOF {
			return cache.Event[T]{}, io.EOF
		}
		return cache.Event[T]{}, fmt.Errorf("reading watch event: %w", err)
	}
	return ev, nil
}

func (d *jsonEvents[T]) read() (cache.Event[T], error) {
	c, err := d.st.Peek()
	if err != nil {
		return cache.Event[T]{}, err
	}
	if c != '{' {
		return cache.Event[T]{}, fmt.Errorf("got %q, not a JSON object", c)
	}
	// The fast path: the event is the line.
	line, err := d.st.Line()
	if err != nil {
		return cache.Event[T]{}, err
	}
	ev, n, err := d.parse(line)
	if err == nil {
		d.st.Advance(n)
		return ev, nil
	}
	if !jsondecode.IsTruncated(err) {
		return cache.Event[T]{}, err
	}
	// An event over several lines: frame it by its brackets.
	v, err := d.st.Value()
	if err != nil {
		return cache.Event[T]{}, err
	}
	ev, _, err = d.parse(v)
	return ev, err
}

// parse decodes the event at the start of b, and returns how many bytes it
// took.
func (d *jsonEvents[T]) parse(b []byte) (cache.Event[T], int, error) {
	var ev cache.Event[T]
	var raw []byte // the object, when it came before the type
	haveObj := false
	n, err := d.dec.Object(b, func(key []byte, v *jsondecode.Value) error {
		switch string(key) {
		case "type":
			var s string
			if err := v.Decode(&s); err != nil || ev.Type != "" {
				return fmt.Errorf("bad or repeated event type: %v", err)
			}
			t, err := eventType(s)
			ev.Type = t
			return err
		case "object":
			if haveObj {
				return errors.New("repeated event object")
			}
			haveObj = true
			if ev.Type == "" {
				b, err := v.Raw()
				raw = b
				return err
			}
			return d.objectValue(&ev, v)
		}
		return nil
	})
	if err != nil {
		return ev, 0, err
	}
	switch {
	case ev.Type == "":
		return ev, 0, errors.New("event without a type")
	case !haveObj:
		return ev, 0, fmt.Errorf("%s event without an object", ev.Type)
	case raw != nil:
		if err := d.object(&ev, raw); err != nil {
			return ev, 0, err
		}
	}
	return ev, n, nil
}

// objectValue decodes the event's object, from the envelope, according to
// the event's type.
func (d *jsonEvents[T]) objectValue(ev *cache.Event[T], v *jsondecode.Value) error {
	if v.Null() {
		return fmt.Errorf("%s event: null object", ev.Type)
	}
	if ev.Type == cache.EventError {
		var s metav1.Status
		if err := v.Decode(&s); err != nil {
			return fmt.Errorf("ERROR event: %w", err)
		}
		ev.Status = &s
		return nil
	}
	if d.codec.unstructured {
		b, err := v.Raw()
		if err != nil {
			return err
		}
		return d.object(ev, b)
	}
	obj := d.codec.new()
	if err := v.Decode(obj); err != nil {
		return fmt.Errorf("%s event: %w", ev.Type, err)
	}
	if err := d.codec.checkKind(obj); err != nil {
		return fmt.Errorf("%s event: %w", ev.Type, err)
	}
	ev.Object = obj
	return nil
}

// object decodes the event's object according to its type.
func (d *jsonEvents[T]) object(ev *cache.Event[T], b []byte) error {
	if ev.Type == cache.EventError {
		var s metav1.Status
		if isNull(b) {
			return errors.New("ERROR event: null status")
		}
		if err := d.dec.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("ERROR event: %w", err)
		}
		ev.Status = &s
		return nil
	}
	obj, err := d.codec.decodeJSON(d.dec, b)
	if err != nil {
		return fmt.Errorf("%s event: %w", ev.Type, err)
	}
	if d.codec.unstructured && obj.GetObjectKind().GroupVersionKind().Kind == "" {
		return fmt.Errorf("%s event: object without a kind", ev.Type)
	}
	ev.Object = obj
	return nil
}

// eventType returns the constant for a known event type, and fails for
// any other.
func eventType(s string) (cache.EventType, error) {
	switch cache.EventType(s) {
	case cache.EventAdded:
		return cache.EventAdded, nil
	case cache.EventModified:
		return cache.EventModified, nil
	case cache.EventDeleted:
		return cache.EventDeleted, nil
	case cache.EventBookmark:
		return cache.EventBookmark, nil
	case cache.EventError:
		return cache.EventError, nil
	}
	return "", fmt.Errorf("unknown event type %q", s)
}

// protoEvents decodes a protobuf watch stream: frames of a 4-byte
// big-endian length and a metav1.WatchEvent.
type protoEvents[T cache.Object] struct {
	codec *codec[T]
	r     *bufio.Reader
	max   int
	buf   []byte
}

func newProtoEvents[T cache.Object](c *codec[T], r io.Reader, maxEvent int) *protoEvents[T] {
	if maxEvent <= 0 {
		maxEvent = DefaultMaxEventBytes
	}
	return &protoEvents[T]{codec: c, r: bufio.NewReaderSize(r, 32<<10), max: maxEvent}
}

// keepFrameBuf is the largest frame buffer kept from one event to the next.
const keepFrameBuf = 1 << 20

func (d *protoEvents[T]) next() (cache.Event[T], error) {
	frame, err := d.frame(d.buf)
	if cap(frame) <= keepFrameBuf {
		d.buf = frame
	}
	if err != nil {
		return cache.Event[T]{}, err
	}
	return d.decodeFrame(frame)
}

// frame reads the next frame's message into buf's storage, or a larger
// slice when it does not fit.
func (d *protoEvents[T]) frame(buf []byte) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(d.r, hdr[:]); err != nil {
		if err == io.EOF {
			return buf, io.EOF
		}
		return buf, fmt.Errorf("reading watch frame length: %w", err)
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n > d.max {
		return buf, fmt.Errorf("watch frame of %d bytes: %w", n, ErrEventTooLarge)
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	frame := buf[:n]
	if _, err := io.ReadFull(d.r, frame); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return frame, fmt.Errorf("reading watch frame of %d bytes: %w", n, err)
	}
	return frame, nil
}

// decodeFrame decodes a frame's message; it keeps no reference to frame,
// and may run for several frames at once.
func (d *protoEvents[T]) decodeFrame(frame []byte) (cache.Event[T], error) {
	ev, err := d.codec.protoEvent(frame)
	if err != nil {
		return cache.Event[T]{}, fmt.Errorf("decoding watch frame: %w", err)
	}
	return ev, nil
}

// protoEvent decodes a metav1.WatchEvent message.
func (c *codec[T]) protoEvent(b []byte) (cache.Event[T], error) {
	var ev cache.Event[T]
	var typ, obj []byte
	haveType, haveObj := false, false
	for len(b) > 0 {
		f, rest, err := nextField(b)
		if err != nil {
			return ev, err
		}
		b = rest
		if f.wire != 2 {
			continue
		}
		switch f.num {
		case 1:
			typ, haveType = f.bytes, true
		case 2:
			// RawExtension: raw = 1.
			haveObj = true
			obj = nil
			for r := f.bytes; len(r) > 0; {
				g, rest, err := nextField(r)
				if err != nil {
					return ev, err
				}
				r = rest
				if g.num == 1 && g.wire == 2 {
					obj = g.bytes
				}
			}
		}
	}
	if !haveType {
		return ev, errors.New("event without a type")
	}
	t, err := eventType(string(typ))
	if err != nil {
		return ev, err
	}
	ev.Type = t
	if !haveObj || len(obj) == 0 {
		return ev, fmt.Errorf("%s event without an object", t)
	}
	raw, tm, err := unwrapEnvelope(obj)
	if err != nil {
		return ev, fmt.Errorf("%s event: %w", t, err)
	}
	if t == cache.EventError {
		if tm.Kind != "Status" {
			return ev, fmt.Errorf("ERROR event: %w: %s, expected Status", errWrongKind, tm.Kind)
		}
		s := new(metav1.Status)
		if err := s.Unmarshal(raw); err != nil {
			return ev, fmt.Errorf("ERROR event: %w", err)
		}
		ev.Status = s
		return ev, nil
	}
	if ev.Object, err = c.decodeProtoRaw(raw, tm); err != nil {
		return ev, fmt.Errorf("%s event: %w", t, err)
	}
	return ev, nil
}

// watcher is an open watch: events are decoded from the response body a
// few ahead of the consumer (readAhead).
type watcher[T cache.Object] struct {
	dec     eventDecoder[T]
	ahead   *readAhead[T]
	body    io.Closer
	cancel  context.CancelFunc
	stopped atomic.Bool
	once    sync.Once
	err     error // sticky: the stream's first failure
}

func (w *watcher[T]) Next() (cache.Event[T], error) {
	if w.stopped.Load() {
		return cache.Event[T]{}, io.EOF
	}
	if w.err != nil {
		return cache.Event[T]{}, w.err
	}
	ev, err := w.dec.next()
	if err != nil {
		if w.stopped.Load() {
			return cache.Event[T]{}, io.EOF
		}
		w.err = err
		w.release()
		return cache.Event[T]{}, err
	}
	return ev, nil
}

func (w *watcher[T]) Stop() {
	w.stopped.Store(true)
	w.release()
}

func (w *watcher[T]) release() {
	w.once.Do(func() {
		w.cancel()
		w.body.Close()
		if w.ahead != nil {
			w.ahead.close()
		}
	})
}
