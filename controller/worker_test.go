package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// recorder counts syncs per item and fails or panics on demand.
type recorder struct {
	mu       sync.Mutex
	calls    map[string][]time.Duration
	failures map[string]int // remaining failures per item
	panics   map[string]int
	start    time.Time
}

func newRecorder() *recorder {
	return &recorder{calls: map[string][]time.Duration{}, failures: map[string]int{}, panics: map[string]int{}, start: time.Now()}
}

func (r *recorder) sync(_ context.Context, item string) (Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[item] = append(r.calls[item], time.Since(r.start))
	if r.panics[item] > 0 {
		r.panics[item]--
		r.mu.Unlock()
		defer r.mu.Lock()
		panic("boom")
	}
	if r.failures[item] > 0 {
		r.failures[item]--
		return Result{}, errors.New("transient")
	}
	return Result{}, nil
}

// newTest returns a controller of sync fed by sources, logging nowhere,
// with opts otherwise.
func newTest[K comparable](t *testing.T, sync SyncHandler[K], opts Options, sources ...Source[K]) *Controller[K] {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger
	}
	c, err := New("test", sync, opts, sources...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// run runs c until the returned stop is called, which returns Run's error.
func run[K comparable](c *Controller[K]) (stop func() error) {
	return runUntil(c, nil)
}

// runUntil is run whose stop ends Run's context with cause.
func runUntil[K comparable](c *Controller[K], cause error) (stop func() error) {
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return func() error { cancel(cause); return <-done }
}

func (r *recorder) times(item string) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.calls[item]...)
}

func TestSyncRetryForgetPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rec.failures["flaky"] = 2
		rec.panics["panicky"] = 1
		c := newTest(t, rec.sync, Options{Workers: 3, RetryBaseDelay: time.Second, RetryMaxDelay: time.Minute})
		q := c.Queue()
		stop := run(c)
		for _, k := range []string{"ok", "flaky", "panicky"} {
			q.Add(k)
		}
		time.Sleep(time.Minute)
		synctest.Wait()

		tests := []struct {
			item string
			want []time.Duration
		}{
			{"ok", []time.Duration{0}},
			// Fails at 0 and 1s; retried after 1s, then 2s.
			{"flaky", []time.Duration{0, time.Second, 3 * time.Second}},
			{"panicky", []time.Duration{0, time.Second}},
		}
		for _, tt := range tests {
			got := rec.times(tt.item)
			if len(got) != len(tt.want) {
				t.Errorf("%s synced at %v, want %v", tt.item, got, tt.want)
				continue
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("%s synced at %v, want %v", tt.item, got, tt.want)
				}
			}
			if n := q.NumRequeues(tt.item); n != 0 {
				t.Errorf("%s: NumRequeues = %d after success, want 0 (Forget)", tt.item, n)
			}
		}
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}
	})
}

func TestWaitsForCaches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		var synced atomic.Bool
		c := newTest(t, rec.sync, Options{Workers: 2}, WaitFor[string](func() bool { return true }, synced.Load))
		stop := run(c)
		c.Queue().Add("a")
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := len(rec.times("a")); n != 0 {
			t.Fatalf("synced %d times before the caches", n)
		}
		synced.Store(true)
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if got := rec.times("a"); len(got) != 1 || got[0] != 10100*time.Millisecond {
			t.Fatalf("synced at %v, want once at 10.1s", got)
		}
		_ = stop()
	})
}

func TestCacheSyncAborted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTest(t, newRecorder().sync, Options{}, WaitFor[string](func() bool { return false }))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := c.Run(ctx)
		if !errors.Is(err, ErrCacheSyncAborted) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Run = %v, want ErrCacheSyncAborted and DeadlineExceeded", err)
		}
		if !c.Queue().ShuttingDown() {
			t.Fatal("queue left running")
		}
		if err := c.Run(context.Background()); !errors.Is(err, ErrAlreadyRun) {
			t.Fatalf("second Run = %v, want ErrAlreadyRun", err)
		}
	})
}

func TestNewBadConfig(t *testing.T) {
	sync := func(context.Context, string) (Result, error) { return Result{}, nil }
	tests := []struct {
		name    string
		ctrl    string
		sync    SyncHandler[string]
		sources []Source[string]
	}{
		{"no name", "", sync, nil},
		{"no sync", "test", nil, nil},
		{"nil source", "test", sync, []Source[string]{nil}},
	}
	for _, tt := range tests {
		if _, err := New(tt.ctrl, tt.sync, Options{}, tt.sources...); err == nil {
			t.Errorf("%s: New succeeded", tt.name)
		}
	}
}

func TestDrainsOnShutdown(t *testing.T) {
	tests := []struct {
		name      string
		drain     time.Duration
		cause     error // of the end of Run's context
		wantSyncs int   // of the 5 items queued at cancel, each taking 1s
		wantTime  time.Duration
	}{
		{"drain everything", time.Minute, nil, 5, 5 * time.Second},
		// The third sync is cancelled when the drain time is up.
		{"drain cut short", 2500 * time.Millisecond, nil, 2, 2500 * time.Millisecond},
		{"no drain", -1, nil, 0, 0},
		// A replica that lost its Lease stops at once, drain or not.
		{"stop now", time.Minute, fmt.Errorf("lease lost: %w", ErrStopNow), 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var syncs atomic.Int32
				started := make(chan struct{}, 10)
				sync := func(ctx context.Context, item int) (Result, error) {
					started <- struct{}{}
					select {
					case <-time.After(time.Second):
						syncs.Add(1)
						return Result{}, nil
					case <-ctx.Done():
						return Result{}, ctx.Err()
					}
				}
				c := newTest(t, sync, Options{DrainTimeout: tt.drain})
				for i := range 5 {
					c.Queue().Add(i)
				}
				start := time.Now()
				stop := runUntil(c, tt.cause)
				<-started
				_ = stop()
				if n := int(syncs.Load()); n != tt.wantSyncs {
					t.Errorf("%d syncs finished, want %d", n, tt.wantSyncs)
				}
				if d := time.Since(start); d != tt.wantTime {
					t.Errorf("Run returned after %v, want %v", d, tt.wantTime)
				}
			})
		})
	}
}

// logRecord is one record a captureHandler saw, with the attributes of the
// logger it came through.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]any
}

// captureHandler is a slog.Handler that keeps every record.
type captureHandler struct {
	mu    *sync.Mutex
	recs  *[]logRecord
	attrs []slog.Attr
}

func newCaptureHandler() *captureHandler {
	return &captureHandler{mu: new(sync.Mutex), recs: new([]logRecord)}
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]any{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.Resolve().Any()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.Resolve().Any()
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.recs = append(*h.recs, rec)
	return nil
}

func (h *captureHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	h2 := *h
	h2.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	return &h2
}

// WithGroup is not used by Runner; groups are flattened away.
func (h *captureHandler) WithGroup(string) slog.Handler { return h }

func (h *captureHandler) records() []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]logRecord(nil), *h.recs...)
}

// TestRunnerLogsSyncErrors: a failed sync is logged at error level with the
// controller's name, the item's key and the error Sync returned, and a
// panicking one with the key and the panic value; a successful sync logs
// nothing at error level.
func TestLogsSyncErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errConflict := errors.New("conflict writing status")
		syncFn := func(_ context.Context, key string) (Result, error) {
			switch key {
			case "ns/failing":
				return Result{}, fmt.Errorf("update %s: %w", key, errConflict)
			case "ns/panicky":
				panic("boom")
			}
			return Result{}, nil
		}
		h := newCaptureHandler()
		// A backoff that never retries within the test: one failure each.
		c, err := New("rc", syncFn, Options{Workers: 2, Logger: slog.New(h), RetryBaseDelay: time.Hour, RetryMaxDelay: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		q := c.Queue()
		stop := run(c)
		for _, k := range []string{"ns/ok", "ns/failing", "ns/panicky"} {
			q.Add(k)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}

		var errs []logRecord
		for _, rec := range h.records() {
			if rec.level >= slog.LevelError {
				errs = append(errs, rec)
			}
		}
		byItem := map[any]logRecord{}
		for _, rec := range errs {
			if rec.attrs["controller"] != "rc" {
				t.Errorf("error record %q has controller %v, want rc", rec.msg, rec.attrs["controller"])
			}
			byItem[rec.attrs["item"]] = rec
		}
		if len(errs) != 2 || len(byItem) != 2 {
			t.Fatalf("error records %+v, want one for ns/failing and one for ns/panicky", errs)
		}
		failed, ok := byItem["ns/failing"]
		if !ok {
			t.Fatalf("no error record with item ns/failing: %+v", errs)
		}
		if err, _ := failed.attrs["err"].(error); !errors.Is(err, errConflict) {
			t.Errorf("ns/failing logged with err %v, want the error Sync returned", failed.attrs["err"])
		}
		if !strings.Contains(failed.msg, "sync failed") {
			t.Errorf("ns/failing logged as %q", failed.msg)
		}
		panicked, ok := byItem["ns/panicky"]
		if !ok {
			t.Fatalf("no error record with item ns/panicky: %+v", errs)
		}
		if panicked.attrs["panic"] != "boom" {
			t.Errorf("ns/panicky logged with panic %v, want boom", panicked.attrs["panic"])
		}
		if stack, _ := panicked.attrs["stack"].(string); !strings.Contains(stack, "goroutine") {
			t.Errorf("ns/panicky logged without a stack: %q", stack)
		}
		// Both were retried with backoff rather than dropped.
		for _, k := range []string{"ns/failing", "ns/panicky"} {
			if n := q.NumRequeues(k); n != 1 {
				t.Errorf("%s: NumRequeues = %d, want 1", k, n)
			}
		}
	})
}

// TestSyncErrorLogLevels: a failed sync is logged at the level that says
// whether someone must act: a 409 Conflict or a 404 of the object, which
// the retry resolves by reading what is there now, at debug level (a 404
// of a resource not served is an error); any other error, a terminal
// one or a panic at error level. All but the terminal one are retried.
func TestSyncErrorLogLevels(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "replicasets"}, "web", errors.New("the object has been modified"))
	tests := []struct {
		name      string
		err       error
		panics    bool
		wantLevel slog.Level
		retried   bool
	}{
		{"conflict", conflict, false, slog.LevelDebug, true},
		{"wrapped conflict", fmt.Errorf("update status: %w", conflict), false, slog.LevelDebug, true},
		{"object gone", fmt.Errorf("update status: %w", apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web")), false, slog.LevelDebug, true},
		{"resource not served", apierrors.NewGenericServerResponse(404, "GET", schema.GroupResource{Group: "example.com", Resource: "widgets"}, "", "", 0, false), false, slog.LevelError, true},
		{"other API error", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p", errors.New("no")), false, slog.LevelError, true},
		{"plain error", errors.New("boom"), false, slog.LevelError, true},
		{"terminal", Terminal(errors.New("bad spec")), false, slog.LevelError, false},
		{"panic", nil, true, slog.LevelError, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newCaptureHandler()
				c, err := New("rc", func(context.Context, string) (Result, error) {
					if tt.panics {
						panic("boom")
					}
					return Result{}, tt.err
				}, Options{Workers: 1, Logger: slog.New(h), RetryBaseDelay: time.Hour, RetryMaxDelay: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				stop := run(c)
				c.Queue().Add("ns/web")
				synctest.Wait()
				if err := stop(); err != nil {
					t.Fatalf("Run = %v", err)
				}
				var got []logRecord
				for _, rec := range h.records() {
					if rec.attrs["item"] == "ns/web" {
						got = append(got, rec)
					}
				}
				if len(got) != 1 || got[0].level != tt.wantLevel {
					t.Fatalf("records of the item %+v, want one at %v", got, tt.wantLevel)
				}
				if n := c.Queue().NumRequeues("ns/web"); (n == 1) != tt.retried {
					t.Errorf("NumRequeues = %d, retried want %v", n, tt.retried)
				}
			})
		})
	}
}
