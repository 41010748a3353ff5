package main

// The informer's cost per watch event against its floor: decoding the same
// bytes with the same decoder. Both sides read one recorded watch stream
// (updates of 1,000 realistic pods) from the replay server of client.go
// over HTTP on 127.0.0.1, so the transport is in both:
//
//   - floor: the Watcher that listwatch's client hands the informers
//     (Client.ListerWatcher, Unerase'd as the factory does: the decoder
//     without managedFields and with sharing, reading a few events ahead),
//     drained by a loop that does nothing with the events;
//   - listwatch: a SharedInformerFactory's pod informer over the same
//     client, with one update handler, timed as client-events-* are, until
//     the handler has seen every pod's last update.
//
// Everything after decoding (Reflector, DeltaFIFO, indexer, listener,
// handler) is what listwatch/floor shows above 1. Each side runs a few
// times, alternately, and reports its best, so that a burst of load on a
// shared machine does not land on one side only.

import (
	"context"
	"fmt"
	"runtime"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	lwcache "github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
)

// floorRounds is how many times each side of a floor workload runs.
const floorRounds = 3

func init() {
	for _, enc := range []string{"json", "protobuf"} {
		name := "client-events-floor-" + enc
		register(name, func(cfg config) ([]Row, error) {
			return benchClientEventsFloor(name, enc, sizeFor(cfg, 100_000, 5_000))
		})
	}
}

func benchClientEventsFloor(name, enc string, updates int) ([]Row, error) {
	list, _ := buildPods(1000, 7)
	rec := record(list, updates, enc == "protobuf")
	final := finalRevs(list, updates, "")
	type result struct {
		best    time.Duration
		mallocs uint64
	}
	var informer, floor result
	for range floorRounds {
		elapsed, mallocs, err := measureBareDecode(rec, updates)
		if err != nil {
			return nil, fmt.Errorf("bare decode: %w", err)
		}
		if floor.best == 0 || elapsed < floor.best {
			floor = result{elapsed, mallocs}
		}
		srv, err := startReplay(rec)
		if err != nil {
			return nil, err
		}
		elapsed, mallocs, err = measureEvents(implListwatch, srv.url(), rec.proto, final, nil, func() error {
			close(srv.gate)
			return nil
		})
		srv.close()
		if err != nil {
			return nil, err
		}
		if informer.best == 0 || elapsed < informer.best {
			informer = result{elapsed, mallocs}
		}
	}
	n := float64(updates)
	metric := fmt.Sprintf("per event, best of %d", floorRounds)
	return []Row{
		{name, implListwatch, metric, float64(informer.best.Nanoseconds()) / n, "ns"},
		{name, implFloor, metric, float64(floor.best.Nanoseconds()) / n, "ns"},
		{name, implListwatch, "allocs per event", float64(informer.mallocs) / n, "allocs"},
		{name, implFloor, "allocs per event", float64(floor.mallocs) / n, "allocs"},
	}, nil
}

// measureBareDecode opens the watch an informer's Reflector would, on a
// fresh replay of rec, and times reading its n events and nothing else.
func measureBareDecode(rec *recording, n int) (time.Duration, uint64, error) {
	srv, err := startReplay(rec)
	if err != nil {
		return 0, 0, err
	}
	defer srv.close()
	c, err := client.New(&client.Config{REST: &rest.Config{Host: srv.url()}, PreferJSON: !rec.proto})
	if err != nil {
		return 0, 0, err
	}
	lw := lwcache.Unerase[*corev1.Pod](c.ListerWatcher(corev1.SchemeGroupVersion.WithResource("pods"), "", nil))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	w, err := lw.Watch(ctx, metav1.ListOptions{ResourceVersion: "1", AllowWatchBookmarks: true})
	if err != nil {
		return 0, 0, err
	}
	defer w.Stop()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs := ms.Mallocs
	start := time.Now()
	close(srv.gate)
	for i := range n {
		ev, err := w.Next()
		if err != nil {
			return 0, 0, fmt.Errorf("event %d of %d: %w", i, n, err)
		}
		if ev.Type != lwcache.EventModified || ev.Object == nil {
			return 0, 0, fmt.Errorf("event %d: %s", i, ev.Type)
		}
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&ms)
	return elapsed, ms.Mallocs - mallocs, nil
}
