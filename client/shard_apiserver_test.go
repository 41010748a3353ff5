package client

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/informers"
)

// notedHandler is a slog handler that keeps the messages logged.
type notedHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *notedHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *notedHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *notedHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *notedHandler) WithGroup(string) slog.Handler      { return h }

// TestShardedInformersAgainstAPIServer: four factories, each holding one
// of four shards of the pods, against listwatch's server, streaming or
// paging, in JSON and protobuf: each informer holds its shard and no
// more, through creates, updates and deletes, the four hold every pod
// once, and the server did the filtering (no informer had to drop an
// object sent from another shard); a list's answer carries shardInfo.
func TestShardedInformersAgainstAPIServer(t *testing.T) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			api := startRealAPI(t, b.New(t), apiserver.WatchCacheConfig{})
			direct := NewResource[*corev1.Pod](api.client(t, false, false), podsGVR, "default")
			for i := range 60 {
				if _, err := direct.Create(t.Context(), newPod(fmt.Sprintf("p%03d", i)), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			const n = 4
			logs := &notedHandler{}
			infs := make([]*informers.Informer[*corev1.Pod], n)
			for i := range n {
				ro := cache.ReflectorOptions{Logger: slog.New(logs), PageSize: 7, DisableWatchList: i%2 == 0}
				f := informers.NewSharedInformerFactory(api.client(t, false, i == 1), informers.Options{
					Reflector: ro,
					Shard:     &informers.Shard{Count: n, Index: []int{i}},
				})
				t.Cleanup(f.Shutdown)
				infs[i] = informers.For[*corev1.Pod](f)
				f.Start(t.Context())
				for gvr, ok := range f.WaitForCacheSync(t.Context()) {
					if !ok {
						t.Fatalf("%s did not sync", gvr)
					}
				}
			}
			for i := 60; i < 90; i++ {
				if _, err := direct.Create(t.Context(), newPod(fmt.Sprintf("p%03d", i)), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 90; i += 4 {
				if err := direct.Delete(t.Context(), fmt.Sprintf("p%03d", i), metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
					t.Fatal(err)
				}
			}
			all, err := direct.ListAll(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, p := range all.Items {
				want = append(want, p.Name)
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				var got []string
				ok := true
				for i, inf := range infs {
					sel, _ := informers.Shard{Count: n, Index: []int{i}}.Selector()
					held, _ := inf.Lister().List(labels.Everything())
					for _, p := range held {
						if in, _ := sel.Matches(p); !in {
							t.Fatalf("shard %d holds %s, which is not in it", i, p.Name)
						}
						got = append(got, p.Name)
					}
					if len(held) == 0 {
						ok = false
					}
				}
				slices.Sort(got)
				if ok && slices.Equal(got, want) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the shards hold %v\nwant each of %v once", got, want)
				}
				time.Sleep(20 * time.Millisecond)
			}
			logs.mu.Lock()
			for _, m := range logs.msgs {
				if strings.Contains(m, "outside the shard") {
					t.Errorf("an informer dropped an object the server sent: %s", m)
				}
			}
			logs.mu.Unlock()
			sel, _ := informers.Shard{Count: n, Index: []int{2}}.Selector()
			l, err := direct.ListAll(t.Context(), metav1.ListOptions{ShardSelector: sel.String(), Limit: 5})
			if err != nil {
				t.Fatal(err)
			}
			if l.ShardInfo == nil || l.ShardInfo.Selector != sel.String() {
				t.Errorf("list shardInfo %v", l.ShardInfo)
			}
			for _, p := range l.Items {
				if in, _ := sel.Matches(p); !in {
					t.Errorf("listed %s, not in the shard", p.Name)
				}
			}
		})
	}
}
