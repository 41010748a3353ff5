package workqueue

import (
	"fmt"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

func TestItemExponentialFailureRateLimiter(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name      string
		limiter   *ItemExponentialFailureRateLimiter[string]
		wantDelay []time.Duration
	}{
		{
			name:      "defaults double from 5ms",
			limiter:   &ItemExponentialFailureRateLimiter[string]{},
			wantDelay: []time.Duration{5 * ms, 10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms},
		},
		{
			name:      "capped at max",
			limiter:   NewItemExponentialFailureRateLimiter[string](ms, 10*ms),
			wantDelay: []time.Duration{ms, 2 * ms, 4 * ms, 8 * ms, 10 * ms, 10 * ms},
		},
		{
			name:      "max below base is raised to base",
			limiter:   NewItemExponentialFailureRateLimiter[string](5*ms, ms),
			wantDelay: []time.Duration{5 * ms, 5 * ms},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, want := range tt.wantDelay {
				if got := tt.limiter.When("a"); got != want {
					t.Fatalf("failure %d: When = %v, want %v", i+1, got, want)
				}
			}
			if n := tt.limiter.NumRequeues("a"); n != len(tt.wantDelay) {
				t.Fatalf("NumRequeues = %d, want %d", n, len(tt.wantDelay))
			}
			if got := tt.limiter.When("b"); got != tt.wantDelay[0] {
				t.Fatalf("other item: When = %v, want %v", got, tt.wantDelay[0])
			}
			tt.limiter.Forget("a")
			if n := tt.limiter.NumRequeues("a"); n != 0 {
				t.Fatalf("NumRequeues after Forget = %d", n)
			}
			if got := tt.limiter.When("a"); got != tt.wantDelay[0] {
				t.Fatalf("after Forget: When = %v, want %v", got, tt.wantDelay[0])
			}
		})
	}
}

func TestExponentialDefaultReachesMax(t *testing.T) {
	// 5ms·2^n first exceeds 1000s at n = 18; it must saturate, not overflow.
	var l ItemExponentialFailureRateLimiter[int]
	var last time.Duration
	for i := range 200 {
		d := l.When(1)
		if d < last || d > DefaultMaxDelay {
			t.Fatalf("failure %d: When = %v after %v", i+1, d, last)
		}
		last = d
	}
	if last != DefaultMaxDelay {
		t.Fatalf("final delay %v, want %v", last, DefaultMaxDelay)
	}
}

func TestExponentialHuge(t *testing.T) {
	l := NewItemExponentialFailureRateLimiter[int](time.Nanosecond, math.MaxInt64)
	for i := range 100 {
		if d := l.When(1); d < 0 {
			t.Fatalf("failure %d: negative delay %v", i+1, d)
		}
	}
}

func TestLimiterMemoryBoundedWithoutForget(t *testing.T) {
	tests := []struct {
		name    string
		limiter interface {
			RateLimiter[string]
			tracked() int
		}
	}{
		{"exponential", &expTracked{NewItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second)}},
		{"fast-slow", &fastSlowTracked{NewItemFastSlowRateLimiter[string](time.Millisecond, time.Second, 3)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Ten waves of 10k distinct items a minute apart, never
				// forgotten: only about the last two minutes' worth stay.
				for wave := range 10 {
					for i := range 10_000 {
						tt.limiter.When(fmt.Sprintf("w%d-%d", wave, i))
					}
					if n := tt.limiter.tracked(); n > 30_000 {
						t.Fatalf("wave %d: %d items tracked", wave, n)
					}
					time.Sleep(time.Minute)
				}
				// An item failing steadily keeps its count meanwhile.
			})
		})
	}
}

type expTracked struct {
	*ItemExponentialFailureRateLimiter[string]
}

func (e *expTracked) tracked() int { return e.failures.tracked() }

type fastSlowTracked struct {
	*ItemFastSlowRateLimiter[string]
}

func (e *fastSlowTracked) tracked() int { return e.failures.tracked() }

func TestExponentialKeepsCountOfItemInFullBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l ItemExponentialFailureRateLimiter[int]
		for i := range 40 {
			d := l.When(1)
			time.Sleep(d) // the retry comes when it is due, and fails again
			if n := l.NumRequeues(1); n != i+1 {
				t.Fatalf("after %d failures NumRequeues = %d", i+1, n)
			}
		}
	})
}

func TestItemFastSlowRateLimiter(t *testing.T) {
	l := NewItemFastSlowRateLimiter[string](time.Millisecond, time.Second, 3)
	want := []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond, time.Second, time.Second}
	for i, w := range want {
		if got := l.When("a"); got != w {
			t.Fatalf("failure %d: When = %v, want %v", i+1, got, w)
		}
	}
	if n := l.NumRequeues("a"); n != 5 {
		t.Fatalf("NumRequeues = %d", n)
	}
	l.Forget("a")
	if got := l.When("a"); got != time.Millisecond {
		t.Fatalf("after Forget: When = %v", got)
	}
}

func TestBucketRateLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l BucketRateLimiter[int] // zero value: 10 qps, burst 100
		for i := range DefaultBurst {
			if d := l.When(i); d != 0 {
				t.Fatalf("token %d of the burst: delay %v", i, d)
			}
		}
		// Beyond the burst, tokens come every 100ms.
		for i := 1; i <= 5; i++ {
			want := time.Duration(i) * 100 * time.Millisecond
			if d := l.When(0); d != want {
				t.Fatalf("token %d past the burst: delay %v, want %v", i, d, want)
			}
		}
		// After the reserved tokens are paid for and 2s more pass, 20
		// tokens are free again.
		time.Sleep(500*time.Millisecond + 2*time.Second)
		for i := range 20 {
			if d := l.When(0); d != 0 {
				t.Fatalf("refilled token %d: delay %v", i, d)
			}
		}
		if d := l.When(0); d != 100*time.Millisecond {
			t.Fatalf("token past the refill: delay %v", d)
		}
		if l.NumRequeues(0) != 0 {
			t.Fatal("bucket counts requeues")
		}
		l.Forget(0)
	})
}

func TestMaxOfRateLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewMaxOfRateLimiter[string](
			NewItemFastSlowRateLimiter[string](time.Millisecond, 3*time.Second, 2),
			nil,
			NewItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second),
			&BucketRateLimiter[string]{Limiter: rate.NewLimiter(1, 1)},
		)
		want := []time.Duration{
			time.Millisecond, // fast, 1ms exp, bucket has a token
			time.Second,      // bucket: next token in 1s
			3 * time.Second,  // slow
			3 * time.Second,  // slow (exp 8ms, bucket 3s)
		}
		for i, w := range want {
			if got := l.When("a"); got != w {
				t.Fatalf("failure %d: When = %v, want %v", i+1, got, w)
			}
		}
		if n := l.NumRequeues("a"); n != 4 {
			t.Fatalf("NumRequeues = %d", n)
		}
		l.Forget("a")
		if n := l.NumRequeues("a"); n != 0 {
			t.Fatalf("NumRequeues after Forget = %d", n)
		}
	})
}

func TestDefaultControllerRateLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := DefaultControllerRateLimiter[string]()
		if d := l.When("a"); d != 5*time.Millisecond {
			t.Fatalf("first When = %v", d)
		}
		if d := l.When("a"); d != 10*time.Millisecond {
			t.Fatalf("second When = %v", d)
		}
	})
}

func TestRateLimitingQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewRateLimitingQueue[string](NewItemExponentialFailureRateLimiter[string](time.Second, time.Minute), Config{})
		start := time.Now()
		out := collect(&q.DelayingQueue, start)
		q.AddRateLimited("a") // due at 1s
		time.Sleep(1500 * time.Millisecond)
		q.AddRateLimited("a") // due at 1.5s + 2s
		time.Sleep(3 * time.Second)
		if n := q.NumRequeues("a"); n != 2 {
			t.Fatalf("NumRequeues = %d", n)
		}
		q.Forget("a")
		q.AddRateLimited("a") // due at 4.5s + 1s
		time.Sleep(10 * time.Second)
		q.ShutDown()
		if q.AddRateLimited("b") {
			t.Fatal("AddRateLimited after ShutDown accepted")
		}
		got := <-out
		want := []arrival[string]{{"a", time.Second}, {"a", 3500 * time.Millisecond}, {"a", 5500 * time.Millisecond}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}

func TestRateLimitingQueueZeroValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var q RateLimitingQueue[int]
		q.AddRateLimited(1)
		time.Sleep(5 * time.Millisecond)
		synctest.Wait()
		if n := q.Len(); n != 1 {
			t.Fatalf("Len = %d after the default 5ms", n)
		}
		q.ShutDown()
	})
}

// TestTokenBucketThroughQueue: 150 distinct items rate limited at once by
// the default bucket (burst 100, 10 qps) are delivered 100 at once and then
// ten a second.
func TestTokenBucketThroughQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewRateLimitingQueue[int](&BucketRateLimiter[int]{}, Config{})
		for i := range 150 {
			q.AddRateLimited(i)
		}
		synctest.Wait()
		if n := q.Len(); n != 100 {
			t.Fatalf("at once: Len = %d, want 100", n)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := q.Len(); n != 120 {
			t.Fatalf("after 2s: Len = %d, want 120", n)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if n := q.Len(); n != 150 {
			t.Fatalf("after 5s: Len = %d, want 150", n)
		}
		q.ShutDown()
	})
}
