package controller

import (
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/workqueue"
)

// Stale-read protection (KEP-5647's, on for every controller): the writes
// a sync makes through a client (client.WithWriteRecorder is in its
// context) are recorded per key, with the resourceVersion each answered;
// the next sync of that key runs only once the informers of the resources
// written have shown those versions (cache.CompareResourceVersion orders
// them). Until then the key is put back, with a short delay, and counted
// as a stale sync skipped; the informer's own event for the write queues
// it again too. A key that waits past Options.StaleReadTimeout is synced
// anyway, counted, logged and reported as a Warning event
// (StaleReadTimeoutReason, through Options.Recorder) on each object whose
// write was not shown, so a lagging informer costs time, never a silent
// hang. Entries go once the caches show the write, so memory is bounded
// by the keys whose writes are still in flight.
//
// Unlike client-go's gate, which a controller wires by hand for the
// resources it names, this one needs nothing of the controller: every
// source registered on an informer that states its store's
// resourceVersion (the factory's informers do) is checked, and every
// write made under the sync's context is recorded.

// versionedStore is an informer whose store states the resourceVersion it
// reflects, and of which resource.
type versionedStore interface {
	GroupResource() schema.GroupResource
	LastStoreSyncResourceVersion() string
}

// StaleSyncMetricsProvider is a workqueue.MetricsProvider that also
// counts stale-read protection's skips and timeouts; the controller
// manager's provider is one.
type StaleSyncMetricsProvider interface {
	// NewStaleSyncSkipsMetric counts the syncs put back because an
	// informer had not yet shown the controller's own last write.
	NewStaleSyncSkipsMetric(name string) workqueue.CounterMetric
	// NewStaleSyncTimeoutsMetric counts the keys synced anyway after
	// waiting StaleReadTimeout for an informer.
	NewStaleSyncTimeoutsMetric(name string) workqueue.CounterMetric
}

// StaleReadTimeoutReason is the reason of the Warning event recorded on an
// object whose write a controller's informer had not shown when the key's
// wait ran out.
const StaleReadTimeoutReason = "StaleReadTimeout"

// DefaultStaleReadTimeout is Options.StaleReadTimeout when zero.
const DefaultStaleReadTimeout = 10 * time.Second

const (
	// staleRetryDelay is how soon a key put back is looked at again when
	// no event queues it first.
	staleRetryDelay = 5 * time.Millisecond
)

// freshness is a controller's record of its own writes per key.
type freshness[K comparable] struct {
	timeout time.Duration

	mu                sync.Mutex
	stores            map[schema.GroupResource]versionedStore
	written           map[K]*pendingWrites
	skipped, timedOut atomic.Int64
	skips, timeouts   workqueue.CounterMetric
	// events, when set, receives a Warning per object not shown in time.
	events EventRecorder
}

// pendingWrites are the newest objects one key's syncs wrote, per
// resource, that the caches have not shown yet, and when a sync of the key
// was first put back for them.
type pendingWrites struct {
	written   map[schema.GroupResource]writtenObject
	waitingAt time.Time
	// retrying: a retryLater timer is set for the key.
	retrying bool
}

// writtenObject is an object as a write answered it: its resourceVersion
// is what the informer must reach, and the object is what a timeout's
// event is about.
type writtenObject struct {
	rv  string
	obj cache.Object
}

func (f *freshness[K]) addStore(s versionedStore) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stores == nil {
		f.stores = map[schema.GroupResource]versionedStore{}
	}
	f.stores[s.GroupResource()] = s
}

// recorder returns the client.WriteRecorder of one sync of key.
func (f *freshness[K]) recorder(key K) client.WriteRecorder {
	return keyRecorder[K]{f: f, key: key}
}

type keyRecorder[K comparable] struct {
	f   *freshness[K]
	key K
}

func (r keyRecorder[K]) RecordWrite(gr schema.GroupResource, obj cache.Object) {
	rv := obj.GetResourceVersion()
	f := r.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, watched := f.stores[gr]; !watched {
		return // no informer of ours to wait for
	}
	if f.written == nil {
		f.written = map[K]*pendingWrites{}
	}
	p := f.written[r.key]
	if p == nil {
		p = &pendingWrites{written: map[schema.GroupResource]writtenObject{}}
		f.written[r.key] = p
	}
	if cur, ok := p.written[gr]; !ok {
		p.written[gr] = writtenObject{rv: rv, obj: obj}
	} else if c, err := cache.CompareResourceVersion(rv, cur.rv); err == nil && c > 0 {
		p.written[gr] = writtenObject{rv: rv, obj: obj}
	}
}

// stale reports whether key's sync must wait: an informer has not yet
// shown a version the key's earlier syncs wrote, and the key has not
// waited for it past the timeout.
func (f *freshness[K]) stale(key K, now time.Time) (wait bool, waited time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.written[key]
	if p == nil {
		return false, 0
	}
	for gr, w := range p.written {
		cur := f.stores[gr].LastStoreSyncResourceVersion()
		// Versions that cannot be ordered cannot be waited for.
		if c, err := cache.CompareResourceVersion(cur, w.rv); err != nil || c >= 0 {
			delete(p.written, gr)
		}
	}
	if len(p.written) == 0 {
		delete(f.written, key)
		return false, 0
	}
	if p.waitingAt.IsZero() {
		p.waitingAt = now
	}
	if waited = now.Sub(p.waitingAt); waited >= f.timeout {
		delete(f.written, key)
		f.timedOut.Add(1)
		if f.timeouts != nil {
			f.timeouts.Inc()
		}
		if f.events != nil {
			for gr, w := range p.written {
				f.events.Eventf(w.obj, corev1.EventTypeWarning, StaleReadTimeoutReason,
					"A sync went ahead after waiting %s for the %s informer to show resourceVersion %s of this object, written by the controller; the informer shows %s",
					waited.Round(time.Millisecond), gr, w.rv, f.stores[gr].LastStoreSyncResourceVersion())
			}
		}
		return false, waited
	}
	f.skipped.Add(1)
	if f.skips != nil {
		f.skips.Inc()
	}
	return true, waited
}

// retryLater has key, put back by stale, queued again (add) after
// staleRetryDelay unless a sync of it went ahead meanwhile, as it does
// when the informer's event for the write queues it first: one timer per
// wait rather than one queued item per skip, so that the retry of a wait
// already over does not sync the key a second time.
func (f *freshness[K]) retryLater(key K, add func(K)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.written[key]
	if p == nil || p.retrying {
		return
	}
	p.retrying = true
	time.AfterFunc(staleRetryDelay, func() {
		f.mu.Lock()
		waiting := f.written[key] == p
		p.retrying = false
		f.mu.Unlock()
		if waiting {
			add(key)
		}
	})
}

// StaleSyncs reports how many syncs stale-read protection has put back,
// and how many keys it let sync after waiting Options.StaleReadTimeout.
func (c *Controller[K]) StaleSyncs() (skipped, timedOut int64) {
	if c.fresh == nil {
		return 0, 0
	}
	return c.fresh.skipped.Load(), c.fresh.timedOut.Load()
}

var _ StaleSyncMetricsProvider = (*workqueue.PrometheusProvider)(nil)
