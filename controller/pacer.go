package controller

import (
	"sync"
	"time"
)

// Pacer spaces out a controller's writes of one object's running state,
// so that a burst of events (a thousand pods becoming ready) costs a few
// writes of the running count rather than one per event, and the writes
// it saves their watch events and the syncs those start elsewhere. A
// write the caller must not hold back (a state others wait for) simply
// does not ask.
//
// Memory holds one entry per key written within the last Interval, and
// the keys Forget was not told about for at most as long again. The zero
// value paces nothing.
type Pacer struct {
	// Interval is the least time between two paced writes of one key.
	Interval time.Duration

	mu   sync.Mutex
	last map[string]time.Time
	// prune is the size at which stale entries are next dropped.
	prune int
}

// Delay returns how long a write of key must wait at now: zero if it may
// be made now, which counts as made.
func (p *Pacer) Delay(key string, now time.Time) time.Duration {
	if p.Interval <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.last[key]; ok {
		if wait := t.Add(p.Interval).Sub(now); wait > 0 {
			return wait
		}
	}
	if p.last == nil {
		p.last = map[string]time.Time{}
	}
	if len(p.last) >= p.prune {
		for k, t := range p.last {
			if now.Sub(t) >= p.Interval {
				delete(p.last, k)
			}
		}
		p.prune = max(64, 2*len(p.last))
	}
	p.last[key] = now
	return 0
}

// Forget drops key, whose object is gone.
func (p *Pacer) Forget(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, key)
}
