package storagetest

import (
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/listwatch/listwatch/storage"
)

// ListKeys is the number of keys the list benchmarks read.
const ListKeys = 100_000

// benchValue is the size of a small encoded object.
var benchValue = make([]byte, 256)

// Bench runs the storage benchmarks against stores made by newStore: Create,
// Update, List of ListKeys keys (whole and first page of 500) and watch
// event throughput. Bench closes every store it makes.
func Bench(b *testing.B, newStore func(b *testing.B) storage.Interface) {
	open := func(b *testing.B) storage.Interface {
		s := newStore(b)
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
	b.Run("Create", func(b *testing.B) {
		s := open(b)
		i := 0
		for b.Loop() {
			i++
			if _, err := s.Create(b.Context(), "/bench/"+strconv.Itoa(i), benchValue); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Update", func(b *testing.B) {
		s := open(b)
		rev, err := s.Create(b.Context(), "/bench/k", benchValue)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if rev, err = s.Update(b.Context(), "/bench/k", benchValue, rev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(fmt.Sprintf("List%dk", ListKeys/1000), func(b *testing.B) {
		s := open(b)
		fill(b, s, ListKeys)
		for _, limit := range []int64{0, 500} {
			b.Run(fmt.Sprintf("limit=%d", limit), func(b *testing.B) {
				for b.Loop() {
					res, err := s.List(b.Context(), "/bench/", storage.ListOptions{Limit: limit})
					if err != nil {
						b.Fatal(err)
					}
					if int64(len(res.Items))+res.Remaining != ListKeys {
						b.Fatalf("listed %d + %d remaining, want %d", len(res.Items), res.Remaining, ListKeys)
					}
				}
			})
		}
	})
	b.Run("WatchEvents", func(b *testing.B) {
		s := open(b)
		w, err := s.Watch(b.Context(), "/bench/", 0)
		if err != nil {
			b.Fatal(err)
		}
		defer w.Stop()
		b.ResetTimer()
		done := make(chan int)
		go func() {
			n := 0
			for range w.Events() {
				if n++; n == b.N {
					break
				}
			}
			done <- n
		}()
		for i := range b.N {
			if _, err := s.Create(b.Context(), "/bench/"+strconv.Itoa(i), benchValue); err != nil {
				b.Fatal(err)
			}
		}
		if n := <-done; n != b.N {
			b.Fatalf("watch delivered %d of %d events: %v", n, b.N, w.Err())
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

// fill creates n keys under /bench/ from a few goroutines.
func fill(b *testing.B, s storage.Interface, n int) {
	const workers = 32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if _, err := s.Create(b.Context(), fmt.Sprintf("/bench/%07d", i), benchValue); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
