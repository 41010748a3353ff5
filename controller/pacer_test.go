package controller

import (
	"fmt"
	"testing"
	"time"
)

func TestPacer(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		key  string
		at   time.Duration // after t0
		want time.Duration
	}
	for _, tc := range []struct {
		name     string
		interval time.Duration
		steps    []step
	}{
		{"zero value paces nothing", 0, []step{{"a", 0, 0}, {"a", 0, 0}, {"a", time.Millisecond, 0}}},
		{"second write waits the rest of the interval", 50 * time.Millisecond, []step{
			{"a", 0, 0}, {"a", 10 * time.Millisecond, 40 * time.Millisecond}, {"a", 49 * time.Millisecond, time.Millisecond},
			{"a", 50 * time.Millisecond, 0}, {"a", 60 * time.Millisecond, 40 * time.Millisecond}}},
		{"keys are paced apart", 50 * time.Millisecond, []step{{"a", 0, 0}, {"b", time.Millisecond, 0}, {"a", 2 * time.Millisecond, 48 * time.Millisecond}}},
		{"a refused write is not counted as made", 50 * time.Millisecond, []step{
			{"a", 0, 0}, {"a", 40 * time.Millisecond, 10 * time.Millisecond}, {"a", 55 * time.Millisecond, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Pacer{Interval: tc.interval}
			for i, s := range tc.steps {
				if got := p.Delay(s.key, t0.Add(s.at)); got != s.want {
					t.Errorf("step %d: Delay(%s, +%v) = %v, want %v", i, s.key, s.at, got, s.want)
				}
			}
		})
	}
}

// TestPacerForgetAndBound: Forget lets a key write at once, and keys not
// written for an interval are dropped, so memory follows the keys being
// written rather than every key ever written.
func TestPacerForgetAndBound(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := &Pacer{Interval: time.Second}
	p.Delay("a", t0)
	p.Forget("a")
	if d := p.Delay("a", t0); d != 0 {
		t.Fatalf("after Forget: Delay = %v, want 0", d)
	}
	for i := range 10_000 {
		p.Delay(fmt.Sprint(i), t0.Add(time.Duration(i)*time.Millisecond))
	}
	// Within the last second: 1,000 keys; pruning is amortised, so allow
	// twice that and the floor of 64.
	if n := len(p.last); n > 2*1000+64 {
		t.Fatalf("%d keys held, want at most %d", n, 2*1000+64)
	}
}
