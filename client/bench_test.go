package client

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
)

var benchEvents = flag.Int("decode-events", 100_000, "events in the recorded streams of the decoder benchmarks")

var recorded struct {
	once        sync.Once
	json, proto []byte
}

// recordedStreams returns the same history of pod events (adds, then
// updates of each pod) as a JSON and a protobuf watch stream.
func recordedStreams(b *testing.B) ([]byte, []byte) {
	recorded.once.Do(func() {
		var j, p bytes.Buffer
		for i := range *benchEvents {
			ev := recordedEvent{typ: cache.EventAdded, pod: makePod(i%(*benchEvents/2+1), 1000+i)}
			if i >= *benchEvents/2 {
				ev.typ = cache.EventModified
			}
			j.Write(jsonStream(b, []recordedEvent{ev}))
			p.Write(protoFrame(b, ev))
		}
		recorded.json, recorded.proto = j.Bytes(), p.Bytes()
	})
	return recorded.json, recorded.proto
}

// BenchmarkWatchDecode decodes a recorded stream of pod events per
// iteration, and reports events per second and allocations per event.
func BenchmarkWatchDecode(b *testing.B) {
	js, pb := recordedStreams(b)
	run := func(b *testing.B, data []byte, decode func(r io.Reader) int) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		events, perStream := 0, 0
		for b.Loop() {
			perStream = decode(bytes.NewReader(data))
			events += perStream
		}
		b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(float64(len(data))/float64(perStream), "wire-B/event")
	}
	drain := func(d *Decoder[*corev1.Pod], err error) int {
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			_, err := d.Next()
			if err == io.EOF {
				return n
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
	}
	b.Run("json", func(b *testing.B) {
		run(b, js, func(r io.Reader) int {
			return drain(NewJSONDecoder[*corev1.Pod](r, corev1.SchemeGroupVersion, 0))
		})
	})
	b.Run("protobuf", func(b *testing.B) {
		run(b, pb, func(r io.Reader) int {
			return drain(NewProtobufDecoder[*corev1.Pod](r, corev1.SchemeGroupVersion, 0))
		})
	})
	// The floor of a JSON decoder built on encoding/json: each line
	// unmarshalled once into the event type, with the object typed.
	b.Run("json-stdlib-unmarshal", func(b *testing.B) {
		run(b, js, func(r io.Reader) int {
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 1<<20), 1<<26)
			n := 0
			for sc.Scan() {
				var ev struct {
					Type   string
					Object *corev1.Pod
				}
				if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
					b.Fatal(err)
				}
				n++
			}
			return n
		})
	})
}

func ExampleNewJSONDecoder() {
	stream := `{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"5"}}}
{"type":"DELETED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"6"}}}
`
	d, err := NewJSONDecoder[*corev1.Pod](bytes.NewReader([]byte(stream)), corev1.SchemeGroupVersion, 0)
	if err != nil {
		panic(err)
	}
	for {
		ev, err := d.Next()
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(ev.Type, ev.Object.Name, ev.Object.ResourceVersion)
	}
	// Output:
	// ADDED a 5
	// DELETED a 6
	// EOF
}

// BenchmarkListDecode decodes a protobuf list of pods per iteration, as a
// caller gets it and as an informer's cache gets it (managedFields left
// out, repeated strings and maps shared), and reports the heap the decoded
// pods keep.
func BenchmarkListDecode(b *testing.B) {
	const n = 5000
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, ListMeta: metav1.ListMeta{ResourceVersion: "9"}}
	for i := range n {
		list.Items = append(list.Items, *makePod(i, 10+i))
	}
	raw, err := list.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	body := wrapEnvelope(raw, "v1", "PodList")
	for _, mode := range []string{"plain", "lean", "shared"} {
		b.Run(mode, func(b *testing.B) {
			c, err := newCodec[*corev1.Pod](corev1.SchemeGroupVersion)
			if err != nil {
				b.Fatal(err)
			}
			c.dropManaged = mode != "plain"
			c.share = mode == "shared"
			b.ReportAllocs()
			var kept uint64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				l, err := decodeProtoList(c, bytes.NewReader(body), DefaultMaxEventBytes)
				if err != nil || len(l.Items) != n {
					b.Fatalf("%d items: %v", len(l.Items), err)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				kept = after.HeapAlloc - min(before.HeapAlloc, after.HeapAlloc)
				runtime.KeepAlive(l)
			}
			b.ReportMetric(float64(kept)/n, "heap-B/pod")
			b.ReportMetric(b.Elapsed().Seconds()*1e6/float64(b.N*n), "µs/pod")
		})
	}
}
