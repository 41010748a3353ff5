package cache

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/listwatch/listwatch/internal/ctxtime"
)

// MutationError reports a cached object that was changed in place, which
// corrupts the cache every handler and lister shares.
type MutationError struct {
	// Key is the object's key.
	Key string
	// Cached is the object as it is now; Original is the copy taken when it
	// was cached.
	Cached, Original any
}

func (e MutationError) Error() string {
	return fmt.Sprintf("cache: cached object %q was mutated in place (a handler or lister user must DeepCopy before changing it)", e.Key)
}

// mutationDetectionFromEnv reports whether the environment asks for the
// mutation detector.
func mutationDetectionFromEnv() bool {
	for _, name := range []string{"LISTWATCH_CACHE_MUTATION_DETECTOR", "KUBE_CACHE_MUTATION_DETECTOR"} {
		if on, err := strconv.ParseBool(os.Getenv(name)); err == nil && on {
			return true
		}
	}
	return false
}

type cachedCopy[T Object] struct {
	obj, copy T
}

// mutationDetector keeps a deep copy of every cached object and compares
// them periodically. It holds one pair per key, so its memory follows the
// cache, not the history. It costs a DeepCopy per change, hence debug only.
type mutationDetector[T Object] struct {
	report func(MutationError)
	log    *slog.Logger

	mu     sync.Mutex
	copies map[string]cachedCopy[T]
}

func newMutationDetector[T Object](report func(MutationError), log *slog.Logger) *mutationDetector[T] {
	return &mutationDetector[T]{report: report, log: log, copies: map[string]cachedCopy[T]{}}
}

func (d *mutationDetector[T]) add(key string, obj T) {
	cp, ok := obj.DeepCopyObject().(T)
	if !ok {
		// A DeepCopyObject that changes the type cannot be compared.
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.copies[key] = cachedCopy[T]{obj: obj, copy: cp}
}

func (d *mutationDetector[T]) remove(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.copies, key)
}

// check compares every cached object with its copy and reports each that
// differs, once: the copy is then refreshed.
func (d *mutationDetector[T]) check(ctx context.Context) []MutationError {
	d.mu.Lock()
	var found []MutationError
	for key, c := range d.copies {
		if equality.Semantic.DeepEqual(c.obj, c.copy) {
			continue
		}
		found = append(found, MutationError{Key: key, Cached: c.obj, Original: c.copy})
		if cp, ok := c.obj.DeepCopyObject().(T); ok {
			d.copies[key] = cachedCopy[T]{obj: c.obj, copy: cp}
		}
	}
	d.mu.Unlock()
	for _, m := range found {
		if d.report != nil {
			d.report(m)
		} else {
			d.log.ErrorContext(ctx, m.Error(), "key", m.Key)
		}
	}
	return found
}

func (d *mutationDetector[T]) run(ctx context.Context, period time.Duration) {
	ctxtime.Every(ctx, period, func() bool {
		d.check(ctx)
		return true
	})
}

// CheckMutations compares every cached object with the copy the mutation
// detector took of it and returns those mutated in place since (each is
// also reported). It returns nil when the detector is off.
func (s *SharedIndexInformer[T]) CheckMutations(ctx context.Context) []MutationError {
	if s.detector == nil {
		return nil
	}
	return s.detector.check(ctx)
}
