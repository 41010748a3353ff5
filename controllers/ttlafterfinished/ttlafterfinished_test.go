package ttlafterfinished

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/internal/kubelog"
)

func TestMain(m *testing.M) {
	kubelog.ToStderr()
	goleak.VerifyTestMain(m)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var jobsResource = schema.GroupResource{Group: "batch", Resource: "jobs"}

// api serves the Jobs of a cachetest source, as the API server would,
// and keeps the options of every delete.
type api struct {
	jobs *cachetest.Source[*batchv1.Job]
	// server, when set, is what GetJob answers instead of the source:
	// a change the informer has not shown yet.
	server  func(*batchv1.Job) *batchv1.Job
	mu      sync.Mutex
	deletes []metav1.DeleteOptions
}

func (a *api) GetJob(_ context.Context, ns, name string) (*batchv1.Job, error) {
	j, ok := a.jobs.Get(ns, name)
	if !ok {
		return nil, apierrors.NewNotFound(jobsResource, name)
	}
	j = j.DeepCopy()
	if a.server != nil {
		j = a.server(j)
	}
	return j, nil
}

func (a *api) DeleteJob(_ context.Context, ns, name string, opts metav1.DeleteOptions) error {
	j, ok := a.jobs.Get(ns, name)
	if !ok {
		return apierrors.NewNotFound(jobsResource, name)
	}
	if p := opts.Preconditions; p != nil && p.UID != nil && *p.UID != j.UID {
		return apierrors.NewConflict(jobsResource, name, nil)
	}
	a.mu.Lock()
	a.deletes = append(a.deletes, opts)
	a.mu.Unlock()
	_, err := a.jobs.Delete(ns, name)
	return err
}

func (a *api) gone(name string) bool {
	_, ok := a.jobs.Get("ns", name)
	return !ok
}

func run(t *testing.T, a *api) func() {
	t.Helper()
	inf := cache.NewSharedIndexInformer[*batchv1.Job](a.jobs, cache.SharedInformerOptions{Reflector: cache.ReflectorOptions{Logger: quiet}})
	c, err := New(inf, a, Options{Controller: controller.Options{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { inf.Run(ctx) })
	wg.Go(func() {
		if err := c.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	time.Sleep(time.Second)
	synctest.Wait()
	return func() { cancel(); wg.Wait() }
}

// job is a Job with the given TTL, finished finishedAgo ago (not
// finished when negative).
func job(name string, ttl *int32, finishedAgo time.Duration) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec:       batchv1.JobSpec{TTLSecondsAfterFinished: ttl},
	}
	if finishedAgo >= 0 {
		at := metav1.NewTime(time.Now().Add(-finishedAgo))
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: at}}
	}
	return j
}

// TestDeletesAfterTTL: each Job goes at its TTL after its finish, not
// before, with foreground propagation and its uid as precondition; Jobs
// unfinished or without TTL stay.
func TestDeletesAfterTTL(t *testing.T) {
	for _, tc := range []struct {
		name string
		// job is made in the test's bubble, whose clock it reads.
		job func() *batchv1.Job
		// goneAfter is when, from the start, the Job is deleted; 0:
		// never.
		goneAfter time.Duration
	}{
		{"ttl 100s, finished now", func() *batchv1.Job { return job("j", new(int32(100)), 0) }, 100 * time.Second},
		{"ttl 0", func() *batchv1.Job { return job("j", new(int32(0)), 0) }, time.Second},
		{"ttl 60s, finished 30s ago", func() *batchv1.Job { return job("j", new(int32(60)), 30*time.Second) }, 30 * time.Second},
		{"ttl 60s, finished 10m ago", func() *batchv1.Job { return job("j", new(int32(60)), 10*time.Minute) }, time.Second},
		{"not finished", func() *batchv1.Job { return job("j", new(int32(0)), -1) }, 0},
		{"no ttl", func() *batchv1.Job { return job("j", nil, time.Hour) }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := &api{jobs: cachetest.New[*batchv1.Job]()}
				if _, err := a.jobs.Create(tc.job()); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				stop := run(t, a)
				defer stop()
				if tc.goneAfter == 0 {
					time.Sleep(24 * time.Hour)
					synctest.Wait()
					if a.gone("j") {
						t.Fatal("deleted")
					}
					return
				}
				time.Sleep(tc.goneAfter - time.Since(start) - time.Millisecond)
				synctest.Wait()
				if tc.goneAfter > time.Second && a.gone("j") {
					t.Fatalf("deleted before %v", tc.goneAfter)
				}
				time.Sleep(time.Millisecond)
				synctest.Wait()
				if !a.gone("j") {
					t.Fatalf("not deleted after %v", tc.goneAfter)
				}
				opts := a.deletes[0]
				if opts.PropagationPolicy == nil || *opts.PropagationPolicy != metav1.DeletePropagationForeground ||
					opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != "uid-j" {
					t.Errorf("delete options %+v", opts)
				}
			})
		})
	}
}

// TestFreshTTLDecides: a TTL the cache says has expired but the server's
// copy has since raised keeps the Job until the raised TTL expires.
func TestFreshTTLDecides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &api{jobs: cachetest.New[*batchv1.Job]()}
		if _, err := a.jobs.Create(job("j", new(int32(10)), 0)); err != nil {
			t.Fatal(err)
		}
		a.server = func(j *batchv1.Job) *batchv1.Job {
			j.Spec.TTLSecondsAfterFinished = new(int32(100))
			return j
		}
		start := time.Now()
		stop := run(t, a)
		defer stop()
		time.Sleep(99*time.Second - time.Since(start))
		synctest.Wait()
		if a.gone("j") {
			t.Fatal("deleted at the cached TTL")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if !a.gone("j") {
			t.Fatal("not deleted at the server's TTL")
		}
	})
}

// TestIgnoresDeleting: a Job already being deleted is left alone.
func TestIgnoresDeleting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &api{jobs: cachetest.New[*batchv1.Job]()}
		j := job("j", new(int32(0)), time.Minute)
		j.DeletionTimestamp = new(metav1.Now())
		j.Finalizers = []string{"orphan"}
		if _, err := a.jobs.Create(j); err != nil {
			t.Fatal(err)
		}
		stop := run(t, a)
		defer stop()
		time.Sleep(time.Hour)
		synctest.Wait()
		if len(a.deletes) != 0 {
			t.Errorf("deleted %d times", len(a.deletes))
		}
	})
}
