package cache

import (
	"math/rand/v2"
	"time"
)

// Backoff configures the delays between retries after failures: Initial,
// doubling to Max, each stretched by up to Jitter times itself at random, and
// back to Initial after ResetAfter without a failure. The zero Backoff means
// DefaultBackoff; in any other, a zero duration takes DefaultBackoff's value
// and a zero Jitter means none.
type Backoff struct {
	Initial    time.Duration
	Max        time.Duration
	ResetAfter time.Duration
	Jitter     float64
}

// DefaultBackoff is the Reflector's backoff: 0.8 s doubling to 30 s, reset
// after 2 minutes of health, with up to 100% jitter so that many clients
// failing together do not retry together.
var DefaultBackoff = Backoff{Initial: 800 * time.Millisecond, Max: 30 * time.Second, ResetAfter: 2 * time.Minute, Jitter: 1.0}

// backoffState is a Backoff in use. It is not safe for concurrent use.
type backoffState struct {
	cfg         Backoff
	cur         time.Duration
	lastFailure time.Time
}

func newBackoffState(cfg Backoff) *backoffState {
	if cfg == (Backoff{}) {
		// Filling the fields one by one would leave Jitter at 0, and every
		// client failing together would retry together.
		cfg = DefaultBackoff
	}
	if cfg.Initial <= 0 {
		cfg.Initial = DefaultBackoff.Initial
	}
	if cfg.Max < cfg.Initial {
		cfg.Max = max(cfg.Initial, DefaultBackoff.Max)
	}
	if cfg.ResetAfter <= 0 {
		cfg.ResetAfter = DefaultBackoff.ResetAfter
	}
	if cfg.Jitter < 0 {
		cfg.Jitter = 0
	}
	return &backoffState{cfg: cfg}
}

// next records a failure now and returns how long to wait before retrying.
func (b *backoffState) next() time.Duration {
	now := time.Now()
	if b.cur == 0 || now.Sub(b.lastFailure) > b.cfg.ResetAfter {
		b.cur = b.cfg.Initial
	} else {
		b.cur = min(2*b.cur, b.cfg.Max)
	}
	b.lastFailure = now
	d := b.cur
	if b.cfg.Jitter > 0 {
		d += time.Duration(rand.Float64() * b.cfg.Jitter * float64(b.cur))
	}
	return d
}
