package controller

import (
	"sync"
	"time"
)

// ExpectationsTimeout is how long expectations hold before a controller
// stops waiting for the watch events that would fulfil them: after it, an
// event lost or never sent cannot block the controller forever.
const ExpectationsTimeout = 5 * time.Minute

// ControllerExpectations counts, per controller key, the pod creations and
// deletions a controller has asked for but not yet seen in its cache. While
// any are outstanding the cache is known to be stale and the controller
// must not compute new creations or deletions from it.
//
// The zero value is ready to use with ExpectationsTimeout.
type ControllerExpectations struct {
	// TTL overrides ExpectationsTimeout when positive.
	TTL time.Duration

	mu sync.Mutex
	m  map[string]*expectation
}

type expectation struct {
	adds, dels int64
	timestamp  time.Time
}

func (e *expectation) fulfilled() bool { return e.adds <= 0 && e.dels <= 0 }

func (c *ControllerExpectations) ttl() time.Duration {
	if c.TTL > 0 {
		return c.TTL
	}
	return ExpectationsTimeout
}

// SatisfiedExpectations reports whether the controller with key may sync:
// true when it has no expectations, when they are fulfilled, or when they
// are older than the TTL.
func (c *ControllerExpectations) SatisfiedExpectations(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok {
		return true
	}
	return e.fulfilled() || time.Since(e.timestamp) > c.ttl()
}

// SetExpectations replaces key's expectations with adds creations and dels
// deletions, restarting the TTL.
func (c *ControllerExpectations) SetExpectations(key string, adds, dels int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]*expectation)
	}
	c.m[key] = &expectation{adds: int64(adds), dels: int64(dels), timestamp: time.Now()}
}

// ExpectCreations sets key's expectations to adds creations.
func (c *ControllerExpectations) ExpectCreations(key string, adds int) {
	c.SetExpectations(key, adds, 0)
}

// ExpectDeletions sets key's expectations to dels deletions.
func (c *ControllerExpectations) ExpectDeletions(key string, dels int) {
	c.SetExpectations(key, 0, dels)
}

// RaiseExpectations adds to key's outstanding counts, if it has any.
func (c *ControllerExpectations) RaiseExpectations(key string, adds, dels int) {
	c.adjust(key, int64(adds), int64(dels))
}

// LowerExpectations subtracts from key's outstanding counts, if it has any.
func (c *ControllerExpectations) LowerExpectations(key string, adds, dels int) {
	c.adjust(key, -int64(adds), -int64(dels))
}

// CreationObserved records that one expected creation was seen.
func (c *ControllerExpectations) CreationObserved(key string) { c.adjust(key, -1, 0) }

// DeletionObserved records that one expected deletion was seen.
func (c *ControllerExpectations) DeletionObserved(key string) { c.adjust(key, 0, -1) }

func (c *ControllerExpectations) adjust(key string, adds, dels int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		e.adds += adds
		e.dels += dels
	}
}

// GetExpectations returns key's outstanding creations and deletions, and
// whether it has expectations at all.
func (c *ControllerExpectations) GetExpectations(key string) (adds, dels int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok {
		return 0, 0, false
	}
	return int(e.adds), int(e.dels), true
}

// DeleteExpectations forgets key, as when its controller is deleted.
func (c *ControllerExpectations) DeleteExpectations(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

// UIDTrackingControllerExpectations adds, for deletions, the identities
// (pod keys) of the pods expected to go. A pod's deletion is then counted
// once even if the controller sees it deleted more than once (say, both
// gracefully and finally), and deletions of pods it did not ask for do not
// count.
//
// The zero value is ready to use.
type UIDTrackingControllerExpectations struct {
	ControllerExpectations

	umu  sync.Mutex // taken before ControllerExpectations.mu
	uids map[string]map[string]struct{}
}

// ExpectDeletions sets key's expectations to the deletion of the pods
// named by podKeys, replacing any earlier set.
func (u *UIDTrackingControllerExpectations) ExpectDeletions(key string, podKeys []string) {
	set := make(map[string]struct{}, len(podKeys))
	for _, k := range podKeys {
		set[k] = struct{}{}
	}
	u.umu.Lock()
	defer u.umu.Unlock()
	if u.uids == nil {
		u.uids = make(map[string]map[string]struct{})
	}
	u.uids[key] = set
	u.ControllerExpectations.ExpectDeletions(key, len(set))
}

// DeletionObserved records that the pod podKey is gone; it counts only if
// the pod was expected to go and has not been counted already.
func (u *UIDTrackingControllerExpectations) DeletionObserved(key, podKey string) {
	u.umu.Lock()
	defer u.umu.Unlock()
	set := u.uids[key]
	if _, ok := set[podKey]; !ok {
		return
	}
	delete(set, podKey)
	u.ControllerExpectations.DeletionObserved(key)
}

// GetUIDs returns the pod keys still expected to be deleted for key.
func (u *UIDTrackingControllerExpectations) GetUIDs(key string) []string {
	u.umu.Lock()
	defer u.umu.Unlock()
	out := make([]string, 0, len(u.uids[key]))
	for k := range u.uids[key] {
		out = append(out, k)
	}
	return out
}

// DeleteExpectations forgets key and the pods it expected to go.
func (u *UIDTrackingControllerExpectations) DeleteExpectations(key string) {
	u.umu.Lock()
	defer u.umu.Unlock()
	delete(u.uids, key)
	u.ControllerExpectations.DeleteExpectations(key)
}
