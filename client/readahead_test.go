package client

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
)

// readAll reads dec to its first error, and returns each event as its
// type, name and resourceVersion, then the error's text.
func readAll(dec eventDecoder[*corev1.Pod]) []string {
	var got []string
	for {
		ev, err := dec.next()
		if err != nil {
			return append(got, "error: "+err.Error())
		}
		s := string(ev.Type)
		if ev.Object != nil {
			s += " " + ev.Object.Name + " " + ev.Object.ResourceVersion
		}
		if ev.Status != nil {
			s += " " + ev.Status.Message
		}
		got = append(got, s)
	}
}

// TestReadAheadKeepsOrder reads streams through read-aheads of 1 to 4
// decoders, as an informer's watch does: each must give the events and the
// error that ends the stream exactly as reading it in one goroutine does,
// in the same order.
func TestReadAheadKeepsOrder(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var stream []byte
	var offs []int // where each frame starts
	for i := range 41 {
		offs = append(offs, len(stream))
		ev := recordedEvent{typ: cache.EventModified, pod: makePod(i%7, 100+i)}
		if i == 20 {
			ev = recordedEvent{typ: cache.EventError, status: &metav1.Status{Status: metav1.StatusFailure, Message: "too old", Code: 410}}
		}
		stream = append(stream, protoFrame(t, ev)...)
	}
	garbage := binary.BigEndian.AppendUint32(nil, 5)
	garbage = append(garbage, 0xff, 0xff, 0xff, 0xff, 0xff)
	last := offs[len(offs)-1]
	tests := []struct {
		name    string
		stream  []byte
		wantErr string // in the last result
	}{
		{"whole stream", stream, "EOF"},
		{"cut in a frame", stream[:last+100], "unexpected EOF"},
		{"cut in a length", stream[:last+2], "unexpected EOF"},
		{"garbage after 13 events", append(append(bytes.Clone(stream[:offs[13]]), garbage...), stream[offs[13]:]...), "decoding watch frame"},
		{"oversized frame after 3 events", append(bytes.Clone(stream[:offs[3]]), 0x7f, 0, 0, 0), "over the size limit"},
		{"empty", nil, "EOF"},
	}
	newDec := func(b []byte) *protoEvents[*corev1.Pod] {
		c, err := newCodec[*corev1.Pod](corev1.SchemeGroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		c.dropManaged, c.share, c.shareDecodedOnly = true, true, true
		return newProtoEvents(c, bytes.NewReader(b), 1<<20)
	}
	for _, tc := range tests {
		want := readAll(newDec(tc.stream))
		if last := want[len(want)-1]; !bytes.Contains([]byte(last), []byte(tc.wantErr)) {
			t.Fatalf("%s: the stream read in one goroutine ends with %q, want %q in it", tc.name, last, tc.wantErr)
		}
		for n := 1; n <= 4; n++ {
			t.Run(fmt.Sprintf("%s/%d decoders", tc.name, n), func(t *testing.T) {
				a := startReadAheadN(eventDecoder[*corev1.Pod](newDec(tc.stream)), n)
				defer a.close()
				got := readAll(a)
				if len(got) != len(want) {
					t.Fatalf("%d results, want %d:\n%q\n%q", len(got), len(want), got, want)
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("result %d: %q, want %q", i, got[i], want[i])
					}
				}
			})
		}
	}
}

// TestReadAheadClose closes read-aheads whose stream blocks, before and
// after events were read: every goroutine ends.
func TestReadAheadClose(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	frame := protoFrame(t, recordedEvent{typ: cache.EventAdded, pod: makePod(1, 9)})
	for _, n := range []int{1, 2, 4} {
		for _, read := range []int{0, 1, 30} {
			t.Run(fmt.Sprintf("%d decoders, %d read", n, read), func(t *testing.T) {
				pr, pw := io.Pipe()
				go func() {
					// Far more than the read-ahead takes: the writer
					// blocks until the stream is closed.
					for range 200 {
						if _, err := pw.Write(frame); err != nil {
							return
						}
					}
				}()
				c, err := newCodec[*corev1.Pod](corev1.SchemeGroupVersion)
				if err != nil {
					t.Fatal(err)
				}
				a := startReadAheadN(eventDecoder[*corev1.Pod](newProtoEvents(c, pr, 1<<20)), n)
				for i := range read {
					if _, err := a.next(); err != nil {
						t.Fatalf("event %d: %v", i, err)
					}
				}
				// As a watcher stops: the body first, then the read-ahead.
				pr.CloseWithError(errors.New("closed"))
				a.close()
				if _, err := a.next(); err != io.EOF {
					t.Fatalf("next after close: %v, want EOF", err)
				}
			})
		}
	}
}
