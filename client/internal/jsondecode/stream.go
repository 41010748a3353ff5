package jsondecode

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ErrTooLarge is a value over the Stream's size cap.
var ErrTooLarge = errors.New("value over the size limit")

// Stream reads JSON values from a reader one at a time, buffering only the
// value being read: a watch stream's events, or a list's items. It frames
// values by their brackets and quotes only; decoding the bytes it returns
// is what validates them.
type Stream struct {
	r        io.Reader
	buf      []byte
	pos, end int
	max      int
	err      error // the reader's error, once it returned one
}

// NewStream returns a Stream over r that refuses values over max bytes.
func NewStream(r io.Reader, max int) *Stream {
	return &Stream{r: r, buf: make([]byte, 32<<10), max: max}
}

// fill reads more input, keeping the bytes from s.pos on. It returns false,
// with s.err set, when there is none.
func (s *Stream) fill() bool {
	if s.err != nil {
		return false
	}
	if s.pos > 0 {
		n := copy(s.buf, s.buf[s.pos:s.end])
		s.pos, s.end = 0, n
	}
	if s.end == len(s.buf) {
		if s.end > s.max {
			s.err = ErrTooLarge
			return false
		}
		grown := make([]byte, min(2*len(s.buf), s.max+1))
		copy(grown, s.buf[:s.end])
		s.buf = grown
	}
	for range 100 {
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		if err != nil {
			s.err = err
			return n > 0
		}
		if n > 0 {
			return true
		}
	}
	s.err = io.ErrNoProgress
	return false
}

// failed is the error for input that ran out inside a value.
func (s *Stream) failed() error {
	if s.err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return s.err
}

// Peek returns the next byte that is not white space, without consuming
// it; io.EOF when the input ended cleanly before it.
func (s *Stream) Peek() (byte, error) {
	for {
		for s.pos < s.end {
			switch c := s.buf[s.pos]; c {
			case ' ', '\t', '\n', '\r':
				s.pos++
			default:
				return c, nil
			}
		}
		if !s.fill() {
			return 0, s.err
		}
	}
}

// Expect consumes the next byte that is not white space, which must be c.
func (s *Stream) Expect(c byte) error {
	got, err := s.Peek()
	if err != nil {
		return s.failed()
	}
	if got != c {
		return fmt.Errorf("json: expected %q, got %q", c, got)
	}
	s.pos++
	return nil
}

// Value returns the bytes of the next value, valid until the next call.
func (s *Stream) Value() ([]byte, error) {
	c, err := s.Peek()
	if err != nil {
		return nil, s.failed()
	}
	// i is the scan position relative to s.pos, which fill may move.
	i := 1
	depth, inString := 0, false
	switch c {
	case '{', '[':
		depth = 1
	case '"':
		inString = true
	}
	scalar := depth == 0 && !inString
	for {
		for s.pos+i < s.end {
			if inString {
				// Jump to the next quote or backslash.
				seg := s.buf[s.pos+i : s.end]
				q := bytes.IndexByte(seg, '"')
				before := seg
				if q >= 0 {
					before = seg[:q]
				}
				if bs := bytes.IndexByte(before, '\\'); bs >= 0 {
					i += bs + 2 // the escaped byte, perhaps not read yet
					continue
				}
				if q < 0 {
					i += len(seg)
					continue
				}
				i += q + 1
				inString = false
				if depth == 0 {
					return s.take(i)
				}
				continue
			}
			b := s.buf[s.pos+i]
			i++
			if scalar {
				switch b {
				case ',', '}', ']', ' ', '\t', '\n', '\r', '{', '[', '"', ':':
					return s.take(i - 1)
				}
				continue
			}
			switch b {
			case '"':
				inString = true
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return s.take(i)
				}
			}
		}
		if i >= s.max {
			return nil, ErrTooLarge
		}
		if !s.fill() {
			if scalar && s.err == io.EOF {
				return s.take(s.end - s.pos)
			}
			if s.err == ErrTooLarge {
				return nil, ErrTooLarge
			}
			return nil, s.failed()
		}
	}
}

func (s *Stream) take(n int) ([]byte, error) {
	if n > s.max {
		return nil, ErrTooLarge
	}
	v := s.buf[s.pos : s.pos+n]
	s.pos += n
	return v, nil
}

// Line returns the buffered input from the next byte that is not white
// space up to and including the next newline, or up to the end of the input
// when no newline follows, reading more as needed. A Kubernetes API server
// writes one event per line, and a raw newline cannot occur inside a JSON
// string, so the line is the next value unless the writer spread it over
// several lines. The bytes are valid until the next call; Advance consumes
// them.
func (s *Stream) Line() ([]byte, error) {
	if _, err := s.Peek(); err != nil {
		return nil, err
	}
	scanned := 0
	for {
		if i := bytes.IndexByte(s.buf[s.pos+scanned:s.end], '\n'); i >= 0 {
			if scanned+i+1 > s.max {
				return nil, ErrTooLarge
			}
			return s.buf[s.pos : s.pos+scanned+i+1], nil
		}
		scanned = s.end - s.pos
		if scanned > s.max {
			return nil, ErrTooLarge
		}
		if !s.fill() {
			if s.err == io.EOF {
				return s.buf[s.pos:s.end], nil
			}
			if s.err == ErrTooLarge {
				return nil, ErrTooLarge
			}
			return nil, s.failed()
		}
	}
}

// Advance consumes n bytes returned by Line.
func (s *Stream) Advance(n int) { s.pos += n }
