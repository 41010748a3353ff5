package leaderelection

import (
	"context"
	"log/slog"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// lease is one replica's side of one Lease: the record last read or
// written, and when, on this replica's clock, its holder or renewal time
// last changed. Both the LeaderElector's single Lease and a Sharder's
// shard and member Leases are held through it.
//
// When a change happened is known only to within the window between the
// last read that did not show it and the first that did. The change is
// placed at the holder's renewTime when that falls within the window, and
// at the window's nearer end otherwise — the holder's clock is trusted
// only to within the window, which is capped at maxEarly before the read
// that saw it. Placing the change at the renewal itself, rather than at
// the read that saw it, lets a dead holder's Lease be taken over
// LeaseDuration after its last renewal instead of up to a read period
// later; trusting it no further than maxEarly (half of LeaseDuration −
// RenewDeadline) leaves the holder's give-up time, RenewDeadline after
// its last renewal, before any takeover by at least the other half.
type lease struct {
	client    LeaseClient
	namespace string
	name      string
	identity  string
	duration  time.Duration
	maxEarly  time.Duration
	// labels are put on the Lease when this replica creates it.
	labels map[string]string
	log    *slog.Logger
	// onHolder, when set, is called with the new holder whenever the
	// holder observed changes ("" when released).
	onHolder func(holder string)

	mu       sync.Mutex
	observed *coordinationv1.Lease
	// observedAt is when the record last changed; takeover is allowed
	// duration after it.
	observedAt time.Time
	// readAt is when the last read of the record was sent: a change seen
	// by the next read happened after it.
	readAt time.Time
	holder string // holder last reported to onHolder
}

// tryAcquireOrRenew reads the Lease and makes one attempt to take or keep
// it (takeOrRenew). It reports whether this replica holds the Lease after
// the attempt.
func (l *lease) tryAcquireOrRenew(ctx context.Context) bool {
	now := time.Now()
	cur, err := l.client.Get(ctx, l.namespace, l.name)
	switch {
	case apierrors.IsNotFound(err):
		cur = nil
	case err != nil:
		l.log.Debug("reading the lease failed", "lease", l.name, "err", err)
		return false
	default:
		l.observe(cur, now, time.Now())
	}
	return l.takeOrRenew(ctx, cur, now)
}

// takeOrRenew makes one attempt to take or keep the Lease whose record,
// read at now and already observed, is cur (nil: there is none, and it is
// created). A Lease held by another is taken over only when it is free (no
// holder) or its record has not changed for duration. It reports whether
// this replica holds the Lease after the attempt.
func (l *lease) takeOrRenew(ctx context.Context, cur *coordinationv1.Lease, now time.Time) bool {
	me := l.identity
	seconds := int32(l.duration / time.Second)
	if seconds < 1 {
		seconds = 1
	}
	if cur == nil {
		created, err := l.client.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: l.namespace, Name: l.name, Labels: l.labels},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       &me,
				LeaseDurationSeconds: &seconds,
				AcquireTime:          &metav1.MicroTime{Time: now},
				RenewTime:            &metav1.MicroTime{Time: now},
				LeaseTransitions:     new(int32),
			},
		})
		if err != nil {
			l.log.Debug("creating the lease failed", "lease", l.name, "err", err)
			return false
		}
		l.observe(created, now, now)
		return true
	}
	holder := holderOf(cur)
	if holder != "" && holder != me && now.Before(l.expiry()) {
		return false
	}

	next := cur.DeepCopy()
	spec := &next.Spec
	if holder != me {
		spec.AcquireTime = &metav1.MicroTime{Time: now}
		transitions := int32(1)
		if spec.LeaseTransitions != nil {
			transitions += *spec.LeaseTransitions
		}
		spec.LeaseTransitions = &transitions
	}
	spec.HolderIdentity = &me
	spec.LeaseDurationSeconds = &seconds
	spec.RenewTime = &metav1.MicroTime{Time: now}
	updated, err := l.client.Update(ctx, next)
	if err != nil {
		l.log.Debug("updating the lease failed", "lease", l.name, "err", err)
		return false
	}
	l.observe(updated, now, now)
	return true
}

// expiry is when the Lease, unchanged since last observed, may be taken
// over.
func (l *lease) expiry() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.observedAt.Add(l.duration)
}

// wake shortens d, the wait before a replica's next attempt begun now,
// to end when this Lease may be taken over, if it is held by another
// replica and became free to take only after since, the start of the last
// attempt: an attempt that saw the Lease still held is followed by one
// the moment it may be taken, even if that moment has already come.
func (l *lease) wake(since, now time.Time, d time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.observed == nil || holderOf(l.observed) == "" || holderOf(l.observed) == l.identity {
		return d
	}
	at := l.observedAt.Add(l.duration)
	if !at.After(since) {
		return d
	}
	return min(d, max(0, at.Sub(now)))
}

// release gives the Lease up, if this replica holds it, so that another
// need not wait for it to expire: the holder is cleared and the duration
// shortened to one second. It reports whether the Lease was released.
func (l *lease) release(timeout time.Duration) bool {
	l.mu.Lock()
	cur := l.observed
	l.mu.Unlock()
	if cur == nil || holderOf(cur) != l.identity {
		return false
	}
	// The caller's context has usually ended; the release gets a short
	// one of its own.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	empty, one := "", int32(1)
	now := metav1.NewMicroTime(time.Now())
	cleared := func(cur *coordinationv1.Lease) *coordinationv1.Lease {
		next := cur.DeepCopy()
		next.Spec.HolderIdentity = &empty
		next.Spec.LeaseDurationSeconds = &one
		next.Spec.RenewTime = &now
		next.Spec.AcquireTime = &now
		return next
	}
	updated, err := l.client.Update(ctx, cleared(cur))
	if apierrors.IsConflict(err) {
		// A renewal cut short by the end of the caller's context may have
		// reached the server after all, leaving observed one version
		// behind: read the Lease again and release it if still ours.
		if fresh, gerr := l.client.Get(ctx, l.namespace, l.name); gerr == nil && holderOf(fresh) == l.identity {
			updated, err = l.client.Update(ctx, cleared(fresh))
		}
	}
	if err != nil {
		l.log.Warn("releasing the lease failed", "lease", l.name, "err", err)
		return false
	}
	done := time.Now()
	l.observe(updated, done, done)
	l.log.Info("released the lease", "lease", l.name)
	return true
}

// observe records rec, read by a request sent at sent and answered at
// received (both the attempt's start for this replica's own writes), as
// the latest seen. The takeover clock restarts only when the holder or the
// renewal time changed — a Lease nobody renews must expire even though
// this replica keeps reading it — and then at changedAt.
func (l *lease) observe(rec *coordinationv1.Lease, sent, received time.Time) {
	l.mu.Lock()
	changed := l.observed == nil || holderOf(l.observed) != holderOf(rec) ||
		!renewTimeOf(l.observed).Equal(renewTimeOf(rec))
	l.observed = rec
	if changed {
		l.observedAt = changedAt(renewTimeOf(rec), l.readAt, received, l.maxEarly)
	}
	l.readAt = sent
	holder := holderOf(rec)
	notify := holder != l.holder
	l.holder = holder
	l.mu.Unlock()
	if notify && l.onHolder != nil {
		l.onHolder(holder)
	}
}

// changedAt places a change of a Lease to renewTime, seen by a read
// answered at received and not by the last read before it, sent at prev
// (zero if none): renewTime itself when it falls in that window, else the
// window's nearer end, the window reaching back at most maxEarly from
// received.
func changedAt(renewTime, prev, received time.Time, maxEarly time.Duration) time.Time {
	earliest := received.Add(-maxEarly)
	if prev.After(earliest) {
		earliest = prev
	}
	switch {
	case renewTime.Before(earliest):
		return earliest
	case renewTime.After(received):
		return received
	}
	return renewTime
}

// lastHolder returns the holder of the record last observed, "" if none.
func (l *lease) lastHolder() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.observed == nil {
		return ""
	}
	return holderOf(l.observed)
}

func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func renewTimeOf(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}
