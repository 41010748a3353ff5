package client

import (
	"bytes"
	"io"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/client-go/kubernetes/scheme"
	restclientwatch "k8s.io/client-go/rest/watch"
)

// BenchmarkWatchDecodeClientGo decodes the same recorded streams as
// BenchmarkWatchDecode with client-go's watch decoder, for comparison in
// the same run.
func BenchmarkWatchDecodeClientGo(b *testing.B) {
	js, pb := recordedStreams(b)
	for _, tc := range []struct {
		name, mediaType string
		data            []byte
	}{{"json", runtime.ContentTypeJSON, js}, {"protobuf", runtime.ContentTypeProtobuf, pb}} {
		b.Run(tc.name, func(b *testing.B) {
			info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), tc.mediaType)
			if !ok || info.StreamSerializer == nil {
				b.Fatalf("no stream serializer for %s", tc.mediaType)
			}
			objDecoder := scheme.Codecs.UniversalDeserializer()
			b.SetBytes(int64(len(tc.data)))
			b.ReportAllocs()
			events := 0
			for b.Loop() {
				fr := info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(bytes.NewReader(tc.data)))
				d := restclientwatch.NewDecoder(streaming.NewDecoder(fr, info.StreamSerializer.Serializer), objDecoder)
				for {
					_, _, err := d.Decode()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					events++
				}
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
