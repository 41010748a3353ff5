package cronjob

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/util/parsers"
)

// nextScheduleDelta pads every wait for the next schedule, as kube's
// controller pads it, so that a clock a little behind the one that set the
// wait does not wake up just before the schedule and wait again.
const nextScheduleDelta = 100 * time.Millisecond

// manyMissed is the number of missed schedules past which a CronJob gets a
// TooManyMissedTimes warning: more than a long weekend of hourly runs.
const manyMissed = 100

// errScheduleTooDense is the error of a schedule whose two next times are
// less than a second apart, which a valid expression that names an
// impossible date (the 31st of February) gives.
var errScheduleTooDense = errors.New("time difference between two schedules is less than 1 second")

// formatSchedule is the expression the schedule is parsed from: the
// CronJob's schedule with its time zone as a TZ= prefix, as kube does,
// unless the schedule names a zone itself (then unsupported is called,
// for kube's UnsupportedSchedule warning) or the zone is unknown.
func formatSchedule(cj *batchv1.CronJob, unsupported func()) string {
	if strings.Contains(cj.Spec.Schedule, "TZ") {
		if unsupported != nil {
			unsupported()
		}
		return cj.Spec.Schedule
	}
	if cj.Spec.TimeZone != nil {
		if _, err := time.LoadLocation(*cj.Spec.TimeZone); err != nil {
			return cj.Spec.Schedule
		}
		return "TZ=" + *cj.Spec.TimeZone + " " + cj.Spec.Schedule
	}
	return cj.Spec.Schedule
}

// parseSchedule parses a schedule as kube-controller-manager does, with
// its parser (robfig/cron's standard one, a panic turned into an error).
func parseSchedule(s string) (cron.Schedule, error) {
	return parsers.ParseCronScheduleWithPanicRecovery(s)
}

// missed says how many schedules passed unmet: none, some, or more than
// manyMissed.
type missed int

const (
	missedNone missed = iota
	missedFew
	missedMany
)

// mostRecentSchedule returns the time the schedule is counted from (the
// last schedule time, else the CronJob's creation; with
// withStartingDeadline, no earlier than startingDeadlineSeconds before
// now), the latest schedule time not after now that follows it (nil when
// none), and how many were missed. It errs for a schedule whose times are
// less than a second apart.
func mostRecentSchedule(cj *batchv1.CronJob, now time.Time, sched cron.Schedule, withStartingDeadline bool) (time.Time, *time.Time, missed, error) {
	earliest := cj.CreationTimestamp.Time
	if cj.Status.LastScheduleTime != nil {
		earliest = cj.Status.LastScheduleTime.Time
	}
	if withStartingDeadline && cj.Spec.StartingDeadlineSeconds != nil {
		if deadline := now.Add(-time.Duration(*cj.Spec.StartingDeadlineSeconds) * time.Second); deadline.After(earliest) {
			earliest = deadline
		}
	}
	t1 := sched.Next(earliest)
	t2 := sched.Next(t1)
	switch {
	case now.Before(t1):
		return earliest, nil, missedNone, nil
	case now.Before(t2):
		return earliest, &t1, missedNone, nil
	}
	interval := int64(t2.Sub(t1).Round(time.Second).Seconds())
	if interval < 1 {
		return earliest, nil, missedNone, errScheduleTooDense
	}
	// The number of schedules missed is estimated from the first
	// interval; the most recent one is then found by stepping from one
	// interval before the estimate's start, which is exact for regular
	// schedules and @every, and close enough to step from for irregular
	// ones (30 6-16/4 * * 1-5).
	n := int64(now.Sub(t1).Seconds())/interval + 1
	var latest time.Time
	from := t1.Add(time.Duration((n-2)*interval) * time.Second)
	for t := sched.Next(from); !t.After(now); t = sched.Next(t) {
		latest = t
	}
	m := missedFew
	if n > manyMissed {
		m = missedMany
	}
	if latest.IsZero() {
		return earliest, nil, m, nil
	}
	return earliest, &latest, m, nil
}

// nextScheduleWait is how long to wait, from now, for the schedule after
// the most recent one (padded by nextScheduleDelta).
func nextScheduleWait(cj *batchv1.CronJob, now time.Time, sched cron.Schedule) time.Duration {
	earliest, latest, m, err := mostRecentSchedule(cj, now, sched, false)
	from := now
	switch {
	case err != nil:
	case latest != nil:
		from = *latest
	case m == missedNone:
		from = earliest
	}
	return sched.Next(from).Add(nextScheduleDelta).Sub(now)
}

// jobName is the name of the Job of a scheduled time: the CronJob's name
// and the minutes since the epoch, so that one time never makes two Jobs.
func jobName(cj *batchv1.CronJob, scheduled time.Time) string {
	return fmt.Sprintf("%s-%d", cj.Name, scheduled.Unix()/60)
}

// jobFor returns the Job to create for the scheduled time: the template's
// labels, annotations and spec, the scheduled time (in the CronJob's time
// zone) as the batch.kubernetes.io/cronjob-scheduled-timestamp annotation,
// and the CronJob as its controller.
func jobFor(cj *batchv1.CronJob, scheduled time.Time) (*batchv1.Job, error) {
	loc, err := time.LoadLocation(deref(cj.Spec.TimeZone))
	if err != nil {
		return nil, err
	}
	labels := make(map[string]string, len(cj.Spec.JobTemplate.Labels))
	for k, v := range cj.Spec.JobTemplate.Labels {
		labels[k] = v
	}
	annotations := make(map[string]string, len(cj.Spec.JobTemplate.Annotations)+1)
	for k, v := range cj.Spec.JobTemplate.Annotations {
		annotations[k] = v
	}
	annotations[batchv1.CronJobScheduledTimestampAnnotation] = scheduled.In(loc).Format(time.RFC3339)
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:              jobName(cj, scheduled),
			Labels:            labels,
			Annotations:       annotations,
			CreationTimestamp: metav1.Time{Time: scheduled},
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(cj, controllerKind)},
		},
	}
	cj.Spec.JobTemplate.Spec.DeepCopyInto(&j.Spec)
	return j, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
