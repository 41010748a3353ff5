// Package record writes Kubernetes Events about the objects controllers act
// on, like the eventBroadcaster of the seeds: a controller's Recorder hands
// each event to a Broadcaster without blocking, and the Broadcaster's loop
// aggregates repeats, rate-limits per object and writes through a Sink.
//
// A sync never waits for an event: when the Broadcaster's buffer is full the
// event is dropped and counted, as events are advisory.
package record

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Sink writes events to the API server. The REST client's events resource
// implements it.
type Sink interface {
	Create(ctx context.Context, event *corev1.Event) (*corev1.Event, error)
	// Patch applies a JSON merge patch to the event namespace/name.
	Patch(ctx context.Context, namespace, name string, pt types.PatchType, data []byte) (*corev1.Event, error)
}

// Options tune a Broadcaster; the zero value gives client-go's defaults.
type Options struct {
	// QueueSize bounds the events waiting to be written (default 1000).
	QueueSize int
	// Burst and Refill set the per-object token bucket: Burst events at
	// once, then one per Refill (defaults 25 and 5 minutes).
	Burst  int
	Refill time.Duration
	// MaxObjects bounds the objects whose rate limits and recent events are
	// remembered (default 4096, least recently used forgotten first).
	MaxObjects int
	// SimilarThreshold is how many events with the same object, type and
	// reason but different messages are written as they are within
	// SimilarWindow before further ones are combined into one event whose
	// count grows (defaults 10 and 10 minutes).
	SimilarThreshold int
	SimilarWindow    time.Duration
	// WriteTimeout bounds each write to the Sink (default 10 s).
	WriteTimeout time.Duration
	Logger       *slog.Logger
}

func (o *Options) defaults() {
	if o.QueueSize <= 0 {
		o.QueueSize = 1000
	}
	if o.Burst <= 0 {
		o.Burst = 25
	}
	if o.Refill <= 0 {
		o.Refill = 5 * time.Minute
	}
	if o.MaxObjects <= 0 {
		o.MaxObjects = 4096
	}
	if o.SimilarThreshold <= 0 {
		o.SimilarThreshold = 10
	}
	if o.SimilarWindow <= 0 {
		o.SimilarWindow = 10 * time.Minute
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Broadcaster queues events from Recorders and writes them from Run.
type Broadcaster struct {
	sink    Sink
	opts    Options
	queue   chan *corev1.Event
	dropped atomic.Int64
	// lastNanos is the last timestamp used in an event name.
	lastNanos atomic.Int64

	// Used only by the Run goroutine.
	limits  *lru[*rate.Limiter]
	exact   *lru[*written] // exact repeats: same object, type, reason, message
	similar *lru[*similar] // same object, type and reason
}

// written remembers an event already in the API server, so that a repeat
// raises its count instead of creating another.
type written struct {
	namespace, name string
	count           int32
}

// similar counts the distinct messages seen for one object, type and
// reason within the window.
type similar struct {
	since    time.Time
	messages map[string]struct{}
}

// NewBroadcaster returns a Broadcaster writing to sink; call Run to start
// writing.
func NewBroadcaster(sink Sink, opts Options) *Broadcaster {
	opts.defaults()
	return &Broadcaster{
		sink:    sink,
		opts:    opts,
		queue:   make(chan *corev1.Event, opts.QueueSize),
		limits:  newLRU[*rate.Limiter](opts.MaxObjects),
		exact:   newLRU[*written](opts.MaxObjects),
		similar: newLRU[*similar](opts.MaxObjects),
	}
}

// Dropped returns how many events were dropped because the queue was full.
func (b *Broadcaster) Dropped() int64 { return b.dropped.Load() }

// Run writes queued events until ctx ends, then writes what is already
// queued within one WriteTimeout, and returns. Writes are not cancelled by
// ctx: an event accepted before shutdown is not lost to it.
func (b *Broadcaster) Run(ctx context.Context) {
	writeCtx := context.WithoutCancel(ctx)
	for {
		select {
		case ev := <-b.queue:
			b.write(writeCtx, ev)
		case <-ctx.Done():
			flushCtx, cancel := context.WithTimeout(writeCtx, b.opts.WriteTimeout)
			defer cancel()
			for {
				select {
				case ev := <-b.queue:
					b.write(flushCtx, ev)
				default:
					return
				}
			}
		}
	}
}

// uniqueNanos returns t in nanoseconds, or one more than the last value it
// returned if that is not smaller: two events recorded within one clock tick
// still get distinct names.
func (b *Broadcaster) uniqueNanos(t time.Time) int64 {
	n := t.UnixNano()
	for {
		last := b.lastNanos.Load()
		if n <= last {
			n = last + 1
		}
		if b.lastNanos.CompareAndSwap(last, n) {
			return n
		}
	}
}

// enqueue hands ev to Run without blocking.
func (b *Broadcaster) enqueue(ev *corev1.Event) {
	select {
	case b.queue <- ev:
	default:
		if n := b.dropped.Add(1); n&(n-1) == 0 { // log at powers of two
			b.opts.Logger.Warn("event queue full; dropping events", "dropped", n)
		}
	}
}

// write aggregates, rate-limits and writes one event.
func (b *Broadcaster) write(ctx context.Context, ev *corev1.Event) {
	obj := objectKey(&ev.InvolvedObject)
	now := ev.LastTimestamp.Time

	// Combine similar events once an object produces many distinct messages
	// for one reason, so a flapping error cannot flood the API server.
	simKey := obj + "\x00" + ev.Type + "\x00" + ev.Reason
	sim, ok := b.similar.get(simKey)
	if !ok || now.Sub(sim.since) > b.opts.SimilarWindow {
		sim = &similar{since: now, messages: map[string]struct{}{}}
		b.similar.put(simKey, sim)
	}
	sim.messages[ev.Message] = struct{}{}
	if len(sim.messages) > b.opts.SimilarThreshold {
		ev.Message = "(combined from similar events): " + ev.Message
		simKey += "\x00combined"
	} else {
		simKey += "\x00" + ev.Message
	}

	lim, ok := b.limits.get(obj)
	if !ok {
		lim = rate.NewLimiter(rate.Every(b.opts.Refill), b.opts.Burst)
		b.limits.put(obj, lim)
	}
	if !lim.AllowN(now, 1) {
		b.opts.Logger.Debug("event rate-limited", "object", obj, "reason", ev.Reason)
		return
	}

	wctx, cancel := context.WithTimeout(ctx, b.opts.WriteTimeout)
	defer cancel()
	if prev, ok := b.exact.get(simKey); ok {
		patch, err := json.Marshal(map[string]any{
			"count":         prev.count + 1,
			"lastTimestamp": ev.LastTimestamp,
			"message":       ev.Message,
		})
		if err == nil {
			_, err = b.sink.Patch(wctx, prev.namespace, prev.name, types.MergePatchType, patch)
		}
		if err == nil {
			prev.count++
			return
		}
		if !apierrors.IsNotFound(err) {
			b.opts.Logger.Warn("updating event failed", "event", prev.namespace+"/"+prev.name, "err", err)
			return
		}
		// The event expired in the API server: write it anew.
	}
	created, err := b.sink.Create(wctx, ev)
	if err != nil {
		b.opts.Logger.Warn("writing event failed", "object", obj, "reason", ev.Reason, "err", err)
		return
	}
	b.exact.put(simKey, &written{namespace: created.Namespace, name: created.Name, count: max(created.Count, 1)})
}

// Recorder records events from one component. It is safe for concurrent
// use and never blocks.
type Recorder struct {
	b        *Broadcaster
	source   corev1.EventSource
	instance string
}

// NewRecorder returns a Recorder whose events name component as their
// source and reporting controller, and no host or reporting instance, as
// kube-controller-manager's controllers' events do.
func (b *Broadcaster) NewRecorder(component string) *Recorder {
	return &Recorder{b: b, source: corev1.EventSource{Component: component}}
}

// NewHostnameRecorder returns a Recorder whose events name component as
// their source and this machine's hostname as its host, and
// "<component>-<hostname>" as their reporting instance, as
// kube-scheduler's do.
func (b *Broadcaster) NewHostnameRecorder(component string) *Recorder {
	host, _ := os.Hostname()
	return &Recorder{b: b, source: corev1.EventSource{Component: component, Host: host}, instance: component + "-" + host}
}

// NewHostRecorder returns a Recorder of component on host whose events
// name host as their source's host and reporting instance, as a kubelet's
// name its node.
func (b *Broadcaster) NewHostRecorder(component, host string) *Recorder {
	return &Recorder{b: b, source: corev1.EventSource{Component: component, Host: host}, instance: host}
}

// Event records an event about object with a fixed message.
func (r *Recorder) Event(object runtime.Object, eventType, reason, message string) {
	r.record(object, eventType, reason, message)
}

// Eventf records an event about object; messageFmt and args as for
// fmt.Sprintf. It implements controller.EventRecorder.
func (r *Recorder) Eventf(object runtime.Object, eventType, reason, messageFmt string, args ...any) {
	r.record(object, eventType, reason, fmt.Sprintf(messageFmt, args...))
}

func (r *Recorder) record(object runtime.Object, eventType, reason, message string) {
	ref, err := Reference(object)
	if err != nil {
		r.b.opts.Logger.Warn("cannot record event", "reason", reason, "err", err)
		return
	}
	if eventType != corev1.EventTypeNormal && eventType != corev1.EventTypeWarning {
		r.b.opts.Logger.Warn("event has an unknown type; recording it as Warning", "type", eventType, "reason", reason)
		eventType = corev1.EventTypeWarning
	}
	now := metav1.Now()
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	r.b.enqueue(&corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			// kube's convention: the object's name and a unique suffix.
			Name:      ref.Name + "." + strconv.FormatInt(r.b.uniqueNanos(now.Time), 16),
			Namespace: ns,
		},
		InvolvedObject:      *ref,
		Reason:              reason,
		Message:             message,
		Source:              r.source,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		Type:                eventType,
		ReportingController: r.source.Component,
		ReportingInstance:   r.instance,
	})
}

// scheme knows the Go types of the built-in resources controllers record
// events on, to fill in the kind of objects whose TypeMeta is empty (as
// decoded objects in an informer's cache are).
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, coordinationv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("record: building the scheme: %v", err)) // static input: cannot fail
		}
	}
	return s
}()

// Reference returns the ObjectReference an event about object carries:
// a copy of object when it is an ObjectReference already (one naming a
// part of an object by its fieldPath, as a pod's container).
func Reference(object runtime.Object) (*corev1.ObjectReference, error) {
	if object == nil {
		return nil, fmt.Errorf("record: nil object")
	}
	if ref, ok := object.(*corev1.ObjectReference); ok {
		if ref == nil {
			return nil, fmt.Errorf("record: nil object")
		}
		return ref.DeepCopy(), nil
	}
	m, err := meta.Accessor(object)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	gvk := object.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" {
		kinds, _, err := scheme.ObjectKinds(object)
		if err != nil || len(kinds) == 0 {
			return nil, fmt.Errorf("record: kind of %T unknown: set its apiVersion and kind", object)
		}
		gvk = kinds[0]
	}
	return &corev1.ObjectReference{
		Kind:            gvk.Kind,
		APIVersion:      gvk.GroupVersion().String(),
		Namespace:       m.GetNamespace(),
		Name:            m.GetName(),
		UID:             m.GetUID(),
		ResourceVersion: m.GetResourceVersion(),
	}, nil
}

func objectKey(ref *corev1.ObjectReference) string {
	return ref.APIVersion + "/" + ref.Kind + "/" + ref.Namespace + "/" + ref.Name + "/" + string(ref.UID)
}
