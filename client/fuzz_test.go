package client

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
)

// The fuzz targets decode arbitrary bytes and check, against an independent
// reading of the same bytes with encoding/json or the generated protobuf
// code, that every event produced came from a well-formed event of that
// type: garbage must end the stream with an error, never become an event.
// They must also never panic or hang: each event consumes input, which is
// finite.

const fuzzMaxEvent = 1 << 16

func FuzzJSONWatchDecoder(f *testing.F) {
	for _, s := range jsonSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := NewJSONDecoder[*corev1.Pod](bytes.NewReader(data), corev1.SchemeGroupVersion, fuzzMaxEvent)
		if err != nil {
			t.Fatal(err)
		}
		oracle := json.NewDecoder(bytes.NewReader(data))
		// The same stream read as for an informer's cache, sharing what
		// objects repeat, gives the same events.
		sc, err := newCodec[*corev1.Pod](corev1.SchemeGroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		sc.share = true
		shared := newJSONEvents(sc, bytes.NewReader(data), fuzzMaxEvent)
		for i := 0; ; i++ {
			ev, err := d.Next()
			sev, serr := shared.next()
			if (err == nil) != (serr == nil) {
				t.Fatalf("event %d: plain decoding: %v, sharing decoding: %v", i, err, serr)
			}
			if err == nil && (!apiequality.Semantic.DeepEqual(ev.Object, sev.Object) || !apiequality.Semantic.DeepEqual(ev.Status, sev.Status)) {
				t.Fatalf("event %d: sharing decoding differs", i)
			}
			if err != nil {
				if err == io.EOF {
					// A clean end: the oracle sees no further value either.
					var v any
					if oerr := oracle.Decode(&v); oerr != io.EOF {
						t.Fatalf("decoder ended cleanly after %d events, encoding/json reads on: %v", i, oerr)
					}
				}
				return
			}
			var env struct {
				Type   string          `json:"type"`
				Object json.RawMessage `json:"object"`
			}
			if err := oracle.Decode(&env); err != nil {
				t.Fatalf("event %d (%s) from bytes encoding/json refuses: %v", i, ev.Type, err)
			}
			if string(ev.Type) != env.Type || len(env.Object) == 0 {
				t.Fatalf("event %d: type %q, the bytes say %q", i, ev.Type, env.Type)
			}
			checkFuzzEvent(t, ev)
		}
	})
}

func FuzzProtobufWatchDecoder(f *testing.F) {
	for _, s := range protoSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := NewProtobufDecoder[*corev1.Pod](bytes.NewReader(data), corev1.SchemeGroupVersion, fuzzMaxEvent)
		if err != nil {
			t.Fatal(err)
		}
		// The same stream, read leaving managedFields out, must give the
		// same events less those: as for the list of an informer's cache
		// (protodecode, strings of their own, then interned), and as for
		// an informer's watch (protodecode, strings in one block, two
		// frames decoded at once).
		lean := make([]eventDecoder[*corev1.Pod], 2)
		for k := range lean {
			lc, err := newCodec[*corev1.Pod](corev1.SchemeGroupVersion)
			if err != nil {
				t.Fatal(err)
			}
			lc.dropManaged, lc.share, lc.shareDecodedOnly = true, true, k == 1
			lean[k] = newProtoEvents(lc, bytes.NewReader(data), fuzzMaxEvent)
			if k == 1 {
				ahead := startReadAheadN(lean[k], 2)
				defer ahead.close()
				lean[k] = ahead
			}
		}
		rest := data
		for i := 0; ; i++ {
			ev, err := d.Next()
			for k, ld := range lean {
				if ld == nil {
					continue
				}
				lev, lerr := ld.next()
				// Leaving managedFields out frames the object strictly, so
				// it may refuse a mangled object the generated code accepts
				// (that code lets a map entry run past its end): only one
				// that is not the canonical encoding of what it decodes to.
				if err == nil && lerr != nil && canonical(t, rest, ev.Object) {
					t.Fatalf("event %d, decoder %d: leaving managedFields out failed: %v", i, k, lerr)
				}
				if lerr != nil {
					lean[k] = nil
				}
				if err == nil && lerr == nil && ev.Object != nil && canonical(t, rest, ev.Object) {
					want := ev.Object.DeepCopy()
					want.ManagedFields = nil
					if !apiequality.Semantic.DeepEqual(lev.Object, want) {
						t.Fatalf("event %d, decoder %d: leaving managedFields out changed the object", i, k)
					}
				}
			}
			if err != nil {
				if err == io.EOF && len(rest) != 0 {
					t.Fatalf("clean end after %d events with %d bytes left", i, len(rest))
				}
				return
			}
			// The oracle: frame i, read with the generated code.
			if len(rest) < 4 || int(binary.BigEndian.Uint32(rest)) > len(rest)-4 {
				t.Fatalf("event %d (%s) from a truncated frame", i, ev.Type)
			}
			n := int(binary.BigEndian.Uint32(rest))
			var we metav1.WatchEvent
			if err := we.Unmarshal(rest[4 : 4+n]); err != nil {
				t.Fatalf("event %d (%s) from a frame the generated code refuses: %v", i, ev.Type, err)
			}
			rest = rest[4+n:]
			if we.Type != string(ev.Type) || !bytes.HasPrefix(we.Object.Raw, protoMagic) {
				t.Fatalf("event %d: type %q, the frame says %q", i, ev.Type, we.Type)
			}
			checkFuzzEvent(t, ev)
		}
	})
}

// canonical reports whether the frame at the start of stream holds obj in
// the encoding the generated code gives it.
func canonical(t *testing.T, stream []byte, obj *corev1.Pod) bool {
	if obj == nil || len(stream) < 4 {
		return false
	}
	n := int(binary.BigEndian.Uint32(stream))
	var we metav1.WatchEvent
	if n > len(stream)-4 || we.Unmarshal(stream[4:4+n]) != nil {
		return false
	}
	raw, _, err := unwrapEnvelope(we.Object.Raw)
	if err != nil {
		return false
	}
	cp := obj.DeepCopy()
	cp.TypeMeta = metav1.TypeMeta{}
	b, err := cp.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(b, raw)
}

// checkFuzzEvent checks what every event must be: of a known type, with an
// object of the resource's kind, or a Status for ERROR.
func checkFuzzEvent(t *testing.T, ev cache.Event[*corev1.Pod]) {
	t.Helper()
	switch ev.Type {
	case cache.EventError:
		if ev.Status == nil || ev.Object != nil {
			t.Fatalf("ERROR event with status %v, object %v", ev.Status, ev.Object)
		}
	case cache.EventAdded, cache.EventModified, cache.EventDeleted, cache.EventBookmark:
		if ev.Object == nil || ev.Object.Kind != "Pod" || ev.Object.APIVersion != "v1" {
			t.Fatalf("%s event with object %v", ev.Type, ev.Object)
		}
	default:
		t.Fatalf("event of unknown type %q", ev.Type)
	}
}

func seedEvents() []recordedEvent {
	hist := history(2)
	return append(hist, recordedEvent{typ: cache.EventError, status: &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired}})
}

func jsonSeeds(tb testing.TB) [][]byte {
	all := jsonStream(tb, seedEvents())
	return [][]byte{
		all,
		all[:len(all)/2],
		[]byte(`{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"}}}{"type":"DELETED","object":{"kind":"Pod","metadata":{"name":"a"}}}`),
		[]byte(`{"object":{"kind":"Pod"},"type":"MODIFIED"}`),
		[]byte(`{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}}`),
		[]byte(`{"type":"RENAMED","object":{}}`),
		[]byte(`{"type":"ADDED","object":{"kind":"Service"}}`),
		[]byte("\x00garbage"),
	}
}

func protoSeeds(tb testing.TB) [][]byte {
	evs := seedEvents()
	all := protoStreamOf(tb, evs)
	one := protoFrame(tb, evs[0])
	return [][]byte{
		all,
		all[:len(all)-7],
		one,
		append(binary.BigEndian.AppendUint32(nil, 3), 0xff, 0xff, 0xff),
		binary.BigEndian.AppendUint32(nil, 1<<31),
	}
}

// TestWriteFuzzCorpus writes the seeds into testdata/fuzz, where go test
// reads them as the committed corpus. It runs only when asked:
// LISTWATCH_WRITE_FUZZ_CORPUS=1 go test -run TestWriteFuzzCorpus ./client/
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("LISTWATCH_WRITE_FUZZ_CORPUS") == "" {
		t.Skip("set LISTWATCH_WRITE_FUZZ_CORPUS=1 to rewrite testdata/fuzz")
	}
	for name, seeds := range map[string][][]byte{"FuzzJSONWatchDecoder": jsonSeeds(t), "FuzzProtobufWatchDecoder": protoSeeds(t)} {
		dir := filepath.Join("testdata", "fuzz", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, s := range seeds {
			body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s)) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
