package protodecode

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// sink keeps the decoded values on the heap, as they are in use: a value
// the generated Unmarshal decodes into could otherwise stay on the stack.
var sink any

// BenchmarkUnmarshalPod decodes a realistic pod into a new value each time
// with the generated code and with a Decoder.
func BenchmarkUnmarshalPod(b *testing.B) {
	data := mustMarshal(realisticPod())
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			pod := new(corev1.Pod)
			if err := pod.Unmarshal(data); err != nil {
				b.Fatal(err)
			}
			sink = pod
		}
	})
	for _, bc := range []struct {
		name string
		skip bool
	}{{"protodecode", false}, {"protodecode-skipManagedFields", true}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			d := Decoder{SkipManagedFields: bc.skip}
			for b.Loop() {
				pod := new(corev1.Pod)
				if err := d.Unmarshal(data, pod); err != nil {
					b.Fatal(err)
				}
				sink = pod
			}
		})
	}
}

// BenchmarkDeepCopyPod allocates the object graph of the realistic pod,
// strings aside, without parsing anything: a floor for the time of any
// decoder that makes the same Go values.
func BenchmarkDeepCopyPod(b *testing.B) {
	pod := realisticPod()
	b.ReportAllocs()
	for b.Loop() {
		sink = pod.DeepCopy()
	}
}
