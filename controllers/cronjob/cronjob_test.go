package cronjob

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/informers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// api applies the controller's writes to cachetest sources as the API
// server would, and keeps its events.
type api struct {
	mu       sync.Mutex
	cronJobs *cachetest.Source[*batchv1.CronJob]
	jobs     *cachetest.Source[*batchv1.Job]
	events   []string
}

var (
	cronJobsResource = schema.GroupResource{Group: "batch", Resource: "cronjobs"}
	jobsResource     = schema.GroupResource{Group: "batch", Resource: "jobs"}
)

func (a *api) GetCronJob(_ context.Context, ns, name string) (*batchv1.CronJob, error) {
	cj, ok := a.cronJobs.Get(ns, name)
	if !ok {
		return nil, apierrors.NewNotFound(cronJobsResource, name)
	}
	return cj.DeepCopy(), nil
}

func (a *api) UpdateStatus(ctx context.Context, cj *batchv1.CronJob) (*batchv1.CronJob, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur, ok := a.cronJobs.Get(cj.Namespace, cj.Name)
	if !ok {
		return nil, apierrors.NewNotFound(cronJobsResource, cj.Name)
	}
	next := cur.DeepCopy()
	next.Status = *cj.Status.DeepCopy()
	next.ResourceVersion = cj.ResourceVersion
	return recorded(ctx, cronJobsResource, next, a.cronJobs.Update)
}

// recorded makes a write as the API client would: it tells the sync's
// stale-read protection what the write returned.
func recorded[T cache.Object](ctx context.Context, gr schema.GroupResource, obj T, write func(T) (T, error)) (T, error) {
	out, err := write(obj)
	if err == nil {
		client.RecordWrite(ctx, gr, out)
	}
	return out, err
}

func (a *api) GetJob(_ context.Context, ns, name string) (*batchv1.Job, error) {
	j, ok := a.jobs.Get(ns, name)
	if !ok {
		return nil, apierrors.NewNotFound(jobsResource, name)
	}
	return j.DeepCopy(), nil
}

func (a *api) CreateJob(ctx context.Context, ns string, j *batchv1.Job) (*batchv1.Job, error) {
	j = j.DeepCopy()
	j.Namespace = ns
	j.UID = types.UID("uid-" + j.Name)
	j.CreationTimestamp = metav1.Now()
	return recorded(ctx, jobsResource, j, a.jobs.Create)
}

func (a *api) DeleteJob(_ context.Context, ns, name string) error {
	_, err := a.jobs.Delete(ns, name)
	return err
}

func (a *api) Eventf(_ runtime.Object, _, reason, format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, reason+": "+fmt.Sprintf(format, args...))
}

// takeEvents returns the events since the last call.
func (a *api) takeEvents() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.events
	a.events = nil
	return out
}

func (a *api) cronJob(t *testing.T) *batchv1.CronJob {
	t.Helper()
	cj, ok := a.cronJobs.Get("ns", "cj")
	if !ok {
		t.Fatal("cronjob gone")
	}
	return cj
}

// jobNames returns the names of the Jobs, sorted.
func (a *api) jobNames() []string {
	var out []string
	for _, j := range a.jobs.Items() {
		out = append(out, j.Name)
	}
	sort.Strings(out)
	return out
}

// finish ends the Job name as the Job controller would: Complete, or
// Failed.
func (a *api) finish(t *testing.T, name string, ok bool) {
	t.Helper()
	j, found := a.jobs.Get("ns", name)
	if !found {
		t.Fatalf("job %s not found", name)
	}
	j = j.DeepCopy()
	now := metav1.Now()
	j.Status.StartTime = &j.CreationTimestamp
	c := batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: now}
	if ok {
		c.Type = batchv1.JobComplete
		j.Status.CompletionTime = &now
	}
	j.Status.Conditions = append(j.Status.Conditions, c)
	if _, err := a.jobs.Update(j); err != nil {
		t.Fatal(err)
	}
}

// run starts the controller over an api holding cj, until the returned
// stop.
func run(t *testing.T, cj *batchv1.CronJob, jobs ...*batchv1.Job) (*api, func()) {
	t.Helper()
	a := &api{
		cronJobs: cachetest.New(cachetest.WithResource[*batchv1.CronJob](cronJobsResource)),
		jobs:     cachetest.New(cachetest.WithResource[*batchv1.Job](jobsResource)),
	}
	if _, err := a.cronJobs.Create(cj); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if _, err := a.jobs.Create(j); err != nil {
			t.Fatal(err)
		}
	}
	// The factory's informers, as the controller-manager's, state their
	// stores' resourceVersions, so the controller's syncs wait for its
	// own writes (stale-read protection).
	factory := informers.NewSharedInformerFactory(informers.SourceFunc(
		func(gvr schema.GroupVersionResource, _ string, _ func(*metav1.ListOptions)) cache.ListerWatcher[cache.Object] {
			if gvr.Resource == "cronjobs" {
				return cache.Erase(a.cronJobs)
			}
			return cache.Erase(a.jobs)
		}), informers.Options{Reflector: cache.ReflectorOptions{Logger: quiet}})
	c, err := New(informers.For[*batchv1.CronJob](factory), informers.For[*batchv1.Job](factory), a, Options{Recorder: a, Controller: controller.Options{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	factory.Start(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := c.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	synctest.Wait()
	return a, func() { cancel(); wg.Wait(); factory.Shutdown() }
}

// newCronJob is a CronJob created now, as the API server defaults it.
func newCronJob(schedule string) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cj", UID: "uid-cj", CreationTimestamp: metav1.Now()},
		Spec: batchv1.CronJobSpec{
			Schedule:                   schedule,
			ConcurrencyPolicy:          batchv1.AllowConcurrent,
			Suspend:                    new(false),
			SuccessfulJobsHistoryLimit: new(int32(3)),
			FailedJobsHistoryLimit:     new(int32(1)),
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "cron"}, Annotations: map[string]string{"note": "x"}},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
				}}},
			},
		},
	}
}

// nameAt is the name of the Job of the schedule time t.
func nameAt(t time.Time) string { return fmt.Sprintf("cj-%d", t.Unix()/60) }

// sleep advances the bubble's clock by d and lets the controller act.
func sleep(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// TestFirstRun: a CronJob of every minute creates nothing before the
// minute, then its Job, named and annotated as kube names it, lists it as
// active, and once it completes records the completion.
func TestFirstRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		a, stop := run(t, newCronJob("*/1 * * * *"))
		defer stop()
		sleep(59 * time.Second)
		if got := a.jobNames(); len(got) != 0 {
			t.Fatalf("jobs %v before the first minute", got)
		}
		sleep(2 * time.Second)
		minute := start.Truncate(time.Minute).Add(time.Minute)
		if got, want := a.jobNames(), []string{nameAt(minute)}; !slices.Equal(got, want) {
			t.Fatalf("jobs %v, want %v", got, want)
		}
		j, _ := a.jobs.Get("ns", nameAt(minute))
		if got := j.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; got != minute.UTC().Format(time.RFC3339) {
			t.Errorf("scheduled-timestamp %q, want %q", got, minute.UTC().Format(time.RFC3339))
		}
		if j.Labels["app"] != "cron" || j.Annotations["note"] != "x" || !metav1.IsControlledBy(j, a.cronJob(t)) {
			t.Errorf("job metadata %+v", j.ObjectMeta)
		}
		st := a.cronJob(t).Status
		if len(st.Active) != 1 || st.Active[0].Name != j.Name || st.Active[0].Kind != "Job" || st.Active[0].APIVersion != "batch/v1" || st.Active[0].UID != j.UID ||
			st.LastScheduleTime == nil || !st.LastScheduleTime.Time.Equal(minute) || st.LastSuccessfulTime != nil {
			t.Errorf("status %+v", st)
		}
		if got, want := a.takeEvents(), []string{"SuccessfulCreate: Created job " + j.Name}; !slices.Equal(got, want) {
			t.Errorf("events %q, want %q", got, want)
		}
		a.finish(t, j.Name, true)
		sleep(time.Second)
		st = a.cronJob(t).Status
		if len(st.Active) != 0 || st.LastSuccessfulTime == nil {
			t.Errorf("status after the job completed %+v", st)
		}
		if got, want := a.takeEvents(), []string{"SawCompletedJob: Saw completed job: " + j.Name + ", condition: Complete"}; !slices.Equal(got, want) {
			t.Errorf("events %q, want %q", got, want)
		}
	})
}

// TestConcurrencyPolicy: at the second minute, with the first Job still
// running, Allow runs both, Forbid skips the minute, Replace deletes the
// first.
func TestConcurrencyPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy     batchv1.ConcurrencyPolicy
		jobs       func(m1, m2 time.Time) []string
		active     func(m1, m2 time.Time) []string
		lastEvents func(m1, m2 time.Time) []string
	}{{
		policy:     batchv1.AllowConcurrent,
		jobs:       func(m1, m2 time.Time) []string { return []string{nameAt(m1), nameAt(m2)} },
		active:     func(m1, m2 time.Time) []string { return []string{nameAt(m1), nameAt(m2)} },
		lastEvents: func(_, m2 time.Time) []string { return []string{"SuccessfulCreate: Created job " + nameAt(m2)} },
	}, {
		policy: batchv1.ForbidConcurrent,
		jobs:   func(m1, _ time.Time) []string { return []string{nameAt(m1)} },
		active: func(m1, _ time.Time) []string { return []string{nameAt(m1)} },
		lastEvents: func(time.Time, time.Time) []string {
			return []string{"JobAlreadyActive: Not starting job because prior execution is running and concurrency policy is Forbid"}
		},
	}, {
		policy: batchv1.ReplaceConcurrent,
		jobs:   func(_, m2 time.Time) []string { return []string{nameAt(m2)} },
		active: func(_, m2 time.Time) []string { return []string{nameAt(m2)} },
		lastEvents: func(m1, m2 time.Time) []string {
			return []string{"SuccessfulDelete: Deleted job " + nameAt(m1), "SuccessfulCreate: Created job " + nameAt(m2)}
		},
	}} {
		t.Run(string(tc.policy), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cj := newCronJob("*/1 * * * *")
				cj.Spec.ConcurrencyPolicy = tc.policy
				m1 := time.Now().Truncate(time.Minute).Add(time.Minute)
				m2 := m1.Add(time.Minute)
				a, stop := run(t, cj)
				defer stop()
				sleep(61 * time.Second)
				a.takeEvents()
				sleep(time.Minute)
				if got, want := a.jobNames(), tc.jobs(m1, m2); !slices.Equal(got, want) {
					t.Errorf("jobs %v, want %v", got, want)
				}
				var active []string
				for _, r := range a.cronJob(t).Status.Active {
					active = append(active, r.Name)
				}
				if want := tc.active(m1, m2); !slices.Equal(active, want) {
					t.Errorf("active %v, want %v", active, want)
				}
				if got, want := a.takeEvents(), tc.lastEvents(m1, m2); !slices.Equal(got, want) {
					t.Errorf("events %q, want %q", got, want)
				}
			})
		})
	}
}

// TestSuspend: a suspended CronJob creates nothing; resumed, it runs the
// most recent time it missed at once (no startingDeadlineSeconds).
func TestSuspend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cj := newCronJob("*/1 * * * *")
		cj.Spec.Suspend = new(true)
		a, stop := run(t, cj)
		defer stop()
		sleep(5*time.Minute + 30*time.Second)
		if got := a.jobNames(); len(got) != 0 {
			t.Fatalf("suspended, jobs %v", got)
		}
		cj = a.cronJob(t).DeepCopy()
		cj.Spec.Suspend = new(false)
		if _, err := a.cronJobs.Update(cj); err != nil {
			t.Fatal(err)
		}
		sleep(time.Second)
		if got, want := a.jobNames(), []string{nameAt(time.Now().Truncate(time.Minute))}; !slices.Equal(got, want) {
			t.Errorf("jobs %v, want %v", got, want)
		}
	})
}

// TestStartingDeadline: a CronJob whose last schedule time is further in
// the past than startingDeadlineSeconds waits for the next one; without
// the deadline it runs the most recent one missed at once.
func TestStartingDeadline(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline *int64
		want     func(now time.Time) (after time.Duration, job string)
	}{
		{"none", nil, func(now time.Time) (time.Duration, string) { return time.Second, nameAt(now.Truncate(time.Minute)) }},
		{"10s", new(int64(10)), func(now time.Time) (time.Duration, string) {
			return 31 * time.Second, nameAt(now.Truncate(time.Minute).Add(time.Minute))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				time.Sleep(30 * time.Second)
				cj := newCronJob("*/1 * * * *")
				cj.CreationTimestamp = metav1.NewTime(time.Now().Add(-3 * time.Minute))
				cj.Spec.StartingDeadlineSeconds = tc.deadline
				after, want := tc.want(time.Now())
				a, stop := run(t, cj)
				defer stop()
				sleep(after - time.Second)
				if tc.deadline != nil {
					if got := a.jobNames(); len(got) != 0 {
						t.Fatalf("jobs %v before the next schedule", got)
					}
				}
				sleep(time.Second)
				if got := a.jobNames(); !slices.Equal(got, []string{want}) {
					t.Errorf("jobs %v, want [%s]", got, want)
				}
			})
		})
	}
}

// TestHistoryLimits: finished Jobs beyond the limits go, the oldest
// first.
func TestHistoryLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cj := newCronJob("*/1 * * * *")
		cj.Spec.SuccessfulJobsHistoryLimit = new(int32(1))
		cj.Spec.FailedJobsHistoryLimit = new(int32(0))
		first := time.Now().Truncate(time.Minute).Add(time.Minute)
		a, stop := run(t, cj)
		defer stop()
		for i := range 4 {
			sleep(time.Minute + time.Second)
			if i == 0 {
				sleep(-time.Second) // the first minute was a second away less
			}
			name := nameAt(first.Add(time.Duration(i) * time.Minute))
			a.finish(t, name, i != 2)
			sleep(time.Second)
		}
		if got, want := a.jobNames(), []string{nameAt(first.Add(3 * time.Minute))}; !slices.Equal(got, want) {
			t.Errorf("jobs %v, want %v", got, want)
		}
		var deleted []string
		for _, e := range a.takeEvents() {
			if len(e) > len("SuccessfulDelete") && e[:len("SuccessfulDelete")] == "SuccessfulDelete" {
				deleted = append(deleted, e)
			}
		}
		want := []string{
			"SuccessfulDelete: Deleted job " + nameAt(first),
			"SuccessfulDelete: Deleted job " + nameAt(first.Add(2*time.Minute)),
			"SuccessfulDelete: Deleted job " + nameAt(first.Add(time.Minute)),
		}
		if !slices.Equal(deleted, want) {
			t.Errorf("deletions %q, want %q", deleted, want)
		}
	})
}

// TestTimeZone: the schedule is read in the CronJob's time zone, and the
// scheduled-timestamp annotation is written in it.
func TestTimeZone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cj := newCronJob("0 9 * * *")
		cj.Spec.TimeZone = new("Asia/Tokyo")
		a, stop := run(t, cj)
		defer stop()
		tokyo, err := time.LoadLocation("Asia/Tokyo")
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().In(tokyo)
		next := time.Date(now.Year(), now.Month(), now.Day(), 9, 0, 0, 0, tokyo)
		if !next.After(now) {
			next = next.AddDate(0, 0, 1)
		}
		sleep(time.Until(next) + time.Second)
		if got := a.jobNames(); !slices.Equal(got, []string{nameAt(next)}) {
			t.Fatalf("jobs %v, want [%s]", got, nameAt(next))
		}
		j, _ := a.jobs.Get("ns", nameAt(next))
		if got, want := j.Annotations[batchv1.CronJobScheduledTimestampAnnotation], next.Format(time.RFC3339); got != want || want[len(want)-6:] != "+09:00" {
			t.Errorf("scheduled-timestamp %q, want %q", got, want)
		}
	})
}

// TestBadSpecs: what the controller cannot schedule is reported, and
// nothing is created.
func TestBadSpecs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*batchv1.CronJob)
		event string
	}{
		{"unknown time zone", func(cj *batchv1.CronJob) { cj.Spec.TimeZone = new("Mars/Olympus_Mons") },
			`UnknownTimeZone: invalid timeZone: "Mars/Olympus_Mons": unknown time zone Mars/Olympus_Mons`},
		{"unparseable", func(cj *batchv1.CronJob) { cj.Spec.Schedule = "every minute" },
			`UnparseableSchedule: unparseable schedule: "every minute" : expected exactly 5 fields, found 2: [every minute]`},
		{"31st of February", func(cj *batchv1.CronJob) { cj.Spec.Schedule = "59 23 31 2 *" },
			"InvalidSchedule: invalid schedule: 59 23 31 2 * : time difference between two schedules is less than 1 second"},
		{"TZ in the schedule", func(cj *batchv1.CronJob) { cj.Spec.Schedule = "TZ=UTC 0 0 1 1 *" },
			`UnsupportedSchedule: CRON_TZ or TZ used in schedule "TZ=UTC 0 0 1 1 *" is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cj := newCronJob("*/1 * * * *")
				tc.edit(cj)
				a, stop := run(t, cj)
				defer stop()
				sleep(2 * time.Minute)
				if got := a.jobNames(); len(got) != 0 {
					t.Errorf("jobs %v", got)
				}
				events := a.takeEvents()
				if len(events) == 0 || events[0] != tc.event {
					t.Errorf("events %q, want %q first", events, tc.event)
				}
			})
		})
	}
}

// TestMissingJob: a Job the status lists that the server no longer has
// is dropped from status.active.
func TestMissingJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cj := newCronJob("0 0 1 1 *")
		cj.Status.Active = []corev1.ObjectReference{{Kind: "Job", APIVersion: "batch/v1", Namespace: "ns", Name: "gone", UID: "uid-gone"}}
		a, stop := run(t, cj)
		defer stop()
		sleep(time.Second)
		if st := a.cronJob(t).Status; len(st.Active) != 0 {
			t.Errorf("active %v", st.Active)
		}
		if got, want := a.takeEvents(), []string{"MissingJob: Active job went missing: gone"}; !slices.Equal(got, want) {
			t.Errorf("events %q, want %q", got, want)
		}
	})
}

// TestJobAlreadyExists: the Job of a schedule time that exists already
// is taken into status.active if the CronJob controls it (an earlier sync
// made it and its status write was lost), and left alone otherwise.
func TestJobAlreadyExists(t *testing.T) {
	for _, tc := range []struct {
		name       string
		controlled bool
	}{{"controlled", true}, {"someone else's", false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cj := newCronJob("*/1 * * * *")
				m1 := time.Now().Truncate(time.Minute).Add(time.Minute)
				existing := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: nameAt(m1), UID: "uid-existing"}}
				if tc.controlled {
					existing.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(cj, controllerKind)}
				}
				a, stop := run(t, cj, existing)
				defer stop()
				sleep(61 * time.Second)
				if got := a.jobNames(); !slices.Equal(got, []string{nameAt(m1)}) {
					t.Fatalf("jobs %v", got)
				}
				st := a.cronJob(t).Status
				events := a.takeEvents()
				if slices.ContainsFunc(events, func(e string) bool { return len(e) > 16 && e[:16] == "SuccessfulCreate" }) {
					t.Errorf("events %q: no Job was created", events)
				}
				if !tc.controlled {
					if len(st.Active) != 0 || st.LastScheduleTime != nil {
						t.Errorf("status %+v, want none", st)
					}
					return
				}
				if len(st.Active) != 1 || st.Active[0].UID != "uid-existing" || st.LastScheduleTime == nil || !st.LastScheduleTime.Time.Equal(m1) {
					t.Errorf("status %+v", st)
				}
				// Until then, kube's warning that the Job is not listed.
				if want := "UnexpectedJob: Saw a job that the controller did not create or forgot: " + nameAt(m1); len(events) == 0 || events[0] != want {
					t.Errorf("events %q, want %q first", events, want)
				}
			})
		})
	}
}
