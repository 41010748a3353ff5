package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// event is what watchload reads of one watch event. Its byte slices point
// into the decoder's buffer and are valid until the next call to next.
type event struct {
	// typ is the event's type (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR).
	typ []byte
	// rv is the object's metadata.resourceVersion.
	rv []byte
	// stamp is the value of the object's annotation the decoder was made
	// for, nil when it has none.
	stamp []byte
	// frame is the whole event as it was read.
	frame []byte
}

// maxFrame bounds one event, as a guard against a stream that is not JSON.
const maxFrame = 64 << 20

// maxDepth bounds the nesting of an event's values.
const maxDepth = 256

// errShort reports that the buffer ends inside the value being parsed.
var errShort = errors.New("short")

// eventDecoder decodes a JSON watch stream (a sequence of JSON objects
// {"type":...,"object":{...}} separated by optional whitespace, as
// kube-apiserver and listwatch write them, one event per line or not) as
// it arrives. It is a streaming decoder that takes from each event only
// what watchload needs — the event's type, its object's
// metadata.resourceVersion and one annotation — in one pass over the
// bytes, building nothing: the thousand watchers share the machine with
// the server they measure, and decoding every object whole (as
// encoding/json does) would cost the client more CPU than the server
// spends on its fan-out, so that the benchmark would measure itself. It
// does not validate what it skips beyond finding where each value ends.
type eventDecoder struct {
	r   io.Reader
	key []byte
	buf []byte
	// buf[start:end] is read and not yet decoded.
	start, end int
	// err is the reader's error, returned once the buffer is used up.
	err error
	// n counts the bytes of the events decoded.
	n int64
}

// newEventDecoder decodes the events of r, reading the annotation named
// annotation.
func newEventDecoder(r io.Reader, annotation string) *eventDecoder {
	return &eventDecoder{r: r, key: []byte(annotation), buf: make([]byte, 64<<10)}
}

// next decodes the next event into ev. At the end of the stream it returns
// io.EOF, or io.ErrUnexpectedEOF when it ends inside an event; it returns
// the reader's other errors as they are.
func (d *eventDecoder) next(ev *event) error {
	for {
		for d.start < d.end && isSpace(d.buf[d.start]) {
			d.start++
		}
		if d.start < d.end {
			*ev = event{}
			p := parser{b: d.buf[d.start:d.end], key: d.key, ev: ev}
			err := p.event()
			if err == nil {
				ev.frame = p.b[:p.i]
				d.start += p.i
				d.n += int64(p.i)
				return nil
			}
			if err != errShort {
				return fmt.Errorf("decode watch event at %q: %w", clip(p.b, 200), err)
			}
		}
		if d.err != nil {
			if d.err == io.EOF && d.start < d.end {
				return io.ErrUnexpectedEOF
			}
			return d.err
		}
		d.fill()
	}
}

// fill reads more of the stream into the buffer, moving what is pending
// to its start and growing it when it is full of one event.
func (d *eventDecoder) fill() {
	if d.start > 0 {
		d.end = copy(d.buf, d.buf[d.start:d.end])
		d.start = 0
	}
	if d.end == len(d.buf) {
		if len(d.buf) >= maxFrame {
			d.err = fmt.Errorf("watch event larger than %d bytes", maxFrame)
			return
		}
		d.buf = append(d.buf, make([]byte, len(d.buf))...)
	}
	n, err := d.r.Read(d.buf[d.end:])
	d.end += n
	d.err = err
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// clip is at most the first n bytes of b.
func clip(b []byte, n int) []byte { return b[:min(len(b), n)] }

// Where a value is in an event: the places parser takes a string from,
// and the objects on the way to them.
type place int

const (
	elsewhere   place = iota
	top               // the event
	evType            // the event's "type"
	object            // the event's "object"
	metadata          // .object.metadata
	rv                // .object.metadata.resourceVersion
	annotations       // .object.metadata.annotations
	stamp             // the annotation asked for
)

// child is where the member named k of the object at at is.
func (p *parser) child(at place, k []byte) place {
	switch at {
	case top:
		switch string(k) {
		case "type":
			return evType
		case "object":
			return object
		}
	case object:
		if string(k) == "metadata" {
			return metadata
		}
	case metadata:
		switch string(k) {
		case "resourceVersion":
			return rv
		case "annotations":
			return annotations
		}
	case annotations:
		if bytes.Equal(k, p.key) {
			return stamp
		}
	}
	return elsewhere
}

// parser parses one event from b, from i on. Names and strings are taken
// as they are written (escapes are not undone): the ones it reads never
// hold any.
type parser struct {
	b     []byte
	i     int
	key   []byte
	ev    *event
	depth int
}

func (p *parser) event() error {
	if p.b[p.i] != '{' {
		return fmt.Errorf("want an object, found %q", p.b[p.i])
	}
	return p.value(top)
}

func (p *parser) space() {
	for p.i < len(p.b) && isSpace(p.b[p.i]) {
		p.i++
	}
}

// value parses the value at p.i (after whitespace), which is at at.
func (p *parser) value(at place) error {
	p.space()
	if p.i >= len(p.b) {
		return errShort
	}
	switch c := p.b[p.i]; {
	case (c == '{' || c == '[') && at == elsewhere:
		return p.skip()
	case c == '{':
		return p.object(at)
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.str()
		if err != nil {
			return err
		}
		switch at {
		case evType:
			p.ev.typ = s
		case rv:
			p.ev.rv = s
		case stamp:
			p.ev.stamp = s
		}
		return nil
	case c == '-' || c >= '0' && c <= '9' || c == 't' || c == 'f' || c == 'n':
		// A number or literal ends at a delimiter; the top level is
		// always an object, so one that reaches the end is cut short.
		for p.i++; p.i < len(p.b); p.i++ {
			switch p.b[p.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return nil
			}
		}
		return errShort
	default:
		return fmt.Errorf("unexpected %q", c)
	}
}

func (p *parser) object(at place) error {
	if p.depth++; p.depth > maxDepth {
		return errors.New("nested too deep")
	}
	defer func() { p.depth-- }()
	p.i++ // {
	p.space()
	if p.i >= len(p.b) {
		return errShort
	}
	if p.b[p.i] == '}' {
		p.i++
		return nil
	}
	for {
		p.space()
		if p.i >= len(p.b) {
			return errShort
		}
		if p.b[p.i] != '"' {
			return fmt.Errorf("want a member name, found %q", p.b[p.i])
		}
		k, err := p.str()
		if err != nil {
			return err
		}
		p.space()
		if p.i >= len(p.b) {
			return errShort
		}
		if p.b[p.i] != ':' {
			return fmt.Errorf("want ':', found %q", p.b[p.i])
		}
		p.i++
		if err := p.value(p.child(at, k)); err != nil {
			return err
		}
		if done, err := p.more('}'); done || err != nil {
			return err
		}
	}
}

func (p *parser) array() error {
	if p.depth++; p.depth > maxDepth {
		return errors.New("nested too deep")
	}
	defer func() { p.depth-- }()
	p.i++ // [
	p.space()
	if p.i >= len(p.b) {
		return errShort
	}
	if p.b[p.i] == ']' {
		p.i++
		return nil
	}
	for {
		if err := p.value(elsewhere); err != nil {
			return err
		}
		if done, err := p.more(']'); done || err != nil {
			return err
		}
	}
}

// skip passes over the object or array at p.i, which holds nothing
// watchload reads: it finds where the value ends by its brackets and
// strings alone, without parsing its members.
func (p *parser) skip() error {
	depth := 0
	for i := p.i; i < len(p.b); i++ {
		switch p.b[i] {
		case '"':
			p.i = i
			if _, err := p.str(); err != nil {
				return err
			}
			i = p.i - 1
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				p.i = i + 1
				return nil
			}
		}
	}
	return errShort
}

// more consumes what follows a member or element: ',' (done is false) or
// the closing byte end (done is true).
func (p *parser) more(end byte) (done bool, err error) {
	p.space()
	if p.i >= len(p.b) {
		return false, errShort
	}
	switch c := p.b[p.i]; c {
	case ',':
		p.i++
		return false, nil
	case end:
		p.i++
		return true, nil
	default:
		return false, fmt.Errorf("want ',' or %q, found %q", end, c)
	}
}

// str parses the string at p.i and returns its bytes between the quotes,
// escapes left as they are.
func (p *parser) str() ([]byte, error) {
	from := p.i + 1
	for j := from; ; {
		k := bytes.IndexByte(p.b[j:], '"')
		if k < 0 {
			return nil, errShort
		}
		q := j + k
		// A quote preceded by an odd number of backslashes is escaped.
		n := 0
		for q-1-n >= from && p.b[q-1-n] == '\\' {
			n++
		}
		if n%2 == 1 {
			j = q + 1
			continue
		}
		p.i = q + 1
		return p.b[from:q], nil
	}
}
