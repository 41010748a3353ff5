package client

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A protobuf list long enough to be decoded in many batches, on one core
// or several, comes out whole and in order, equal to its plain decoding;
// a bad item fails the list, naming the item.
func TestProtoListBatches(t *testing.T) {
	const n = 3*itemBatch + 17
	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "77", Continue: "next"}}
	for i := range n {
		list.Items = append(list.Items, *makePod(i, 10+i))
	}
	raw, err := list.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	body := wrapEnvelope(raw, "v1", "PodList")
	for _, procs := range []int{1, 2, 4} {
		for _, share := range []bool{false, true} {
			t.Run(fmt.Sprintf("procs=%d/share=%v", procs, share), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				c, err := newCodec[*corev1.Pod](corev1.SchemeGroupVersion)
				if err != nil {
					t.Fatal(err)
				}
				c.dropManaged, c.share = true, share
				got, err := decodeProtoList(c, bytes.NewReader(body), DefaultMaxEventBytes)
				if err != nil {
					t.Fatal(err)
				}
				if got.ResourceVersion != "77" || got.Continue != "next" || len(got.Items) != n {
					t.Fatalf("list rv %q continue %q, %d items", got.ResourceVersion, got.Continue, len(got.Items))
				}
				for i, p := range got.Items {
					want := list.Items[i].DeepCopy()
					want.ManagedFields = nil
					want.APIVersion, want.Kind = "v1", "Pod"
					if !apiequality.Semantic.DeepEqual(p, want) {
						t.Fatalf("item %d differs:\n%+v\n%+v", i, p, want)
					}
				}

				// An item that is not a pod message, past the first batches.
				bad := list.DeepCopy()
				bad.Items = bad.Items[:2*itemBatch+3]
				braw, err := bad.Marshal()
				if err != nil {
					t.Fatal(err)
				}
				braw = protowireAppendBytes(braw, 2, []byte{0xff, 0xff, 0xff})
				for range 5 {
					braw = protowireAppendBytes(braw, 2, mustMarshal(t, makePod(1, 1)))
				}
				_, err = decodeProtoList(c, bytes.NewReader(wrapEnvelope(braw, "v1", "PodList")), DefaultMaxEventBytes)
				if want := fmt.Sprintf("list item %d:", 2*itemBatch+3); err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("bad item: got %v, want %q", err, want)
				}

				// A list cut short.
				_, err = decodeProtoList(c, bytes.NewReader(body[:len(body)/2]), DefaultMaxEventBytes)
				if err == nil {
					t.Fatal("a truncated list decoded")
				}

				// An item too large.
				_, err = decodeProtoList(c, bytes.NewReader(body), 100)
				if !errors.Is(err, ErrEventTooLarge) {
					t.Fatalf("item too large: %v", err)
				}

				// No items.
				empty, err := (&corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "5"}}).Marshal()
				if err != nil {
					t.Fatal(err)
				}
				l, err := decodeProtoList(c, bytes.NewReader(wrapEnvelope(empty, "v1", "PodList")), DefaultMaxEventBytes)
				if err != nil || l.Items != nil || l.ResourceVersion != "5" {
					t.Fatalf("empty list: %+v, %v", l, err)
				}
			})
		}
	}
}
