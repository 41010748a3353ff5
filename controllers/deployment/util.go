package deployment

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Annotations the controller keeps on Deployments and their ReplicaSets,
// as kube's does: kubectl rollout history and undo read them.
const (
	// RevisionAnnotation is the revision of a ReplicaSet's template in
	// its Deployment's history, and on the Deployment that of its
	// current ReplicaSet.
	RevisionAnnotation = "deployment.kubernetes.io/revision"
	// RevisionHistoryAnnotation lists, comma-separated, the revisions a
	// ReplicaSet had before a rollback made it current again.
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	// DesiredReplicasAnnotation is the Deployment's spec.replicas when
	// the ReplicaSet was last scaled by it.
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	// MaxReplicasAnnotation is the Deployment's spec.replicas plus its
	// maxSurge then: the base of proportional scaling.
	MaxReplicasAnnotation = "deployment.kubernetes.io/max-replicas"
)

// maxRevisionHistoryChars bounds the revision-history annotation: the
// oldest revisions are dropped to keep it within.
const maxRevisionHistoryChars = 2000

// Condition reasons, as kube's controller writes them.
const (
	ReasonReplicaSetUpdated          = "ReplicaSetUpdated"
	ReasonReplicaSetCreateError      = "ReplicaSetCreateError"
	ReasonNewReplicaSetCreated       = "NewReplicaSetCreated"
	ReasonFoundNewReplicaSet         = "FoundNewReplicaSet"
	ReasonNewReplicaSetAvailable     = "NewReplicaSetAvailable"
	ReasonProgressDeadlineExceeded   = "ProgressDeadlineExceeded"
	ReasonDeploymentPaused           = "DeploymentPaused"
	ReasonDeploymentResumed          = "DeploymentResumed"
	ReasonMinimumReplicasAvailable   = "MinimumReplicasAvailable"
	ReasonMinimumReplicasUnavailable = "MinimumReplicasUnavailable"
)

// Event reasons for rollbacks through the deprecated rollback annotation.
const (
	reasonRollbackRevisionNotFound  = "DeploymentRollbackRevisionNotFound"
	reasonRollbackTemplateUnchanged = "DeploymentRollbackTemplateUnchanged"
	reasonRollbackDone              = "DeploymentRollback"
)

// notCopied are the Deployment annotations that are not copied onto its
// ReplicaSets: the controller's own, and kubectl apply's record of the
// Deployment.
var notCopied = map[string]bool{
	corev1.LastAppliedConfigAnnotation: true,
	RevisionAnnotation:                 true,
	RevisionHistoryAnnotation:          true,
	DesiredReplicasAnnotation:          true,
	MaxReplicasAnnotation:              true,
	appsv1.DeprecatedRollbackTo:        true,
}

// replicasOf is the Deployment's spec.replicas, 1 (the API's default)
// when unset.
func replicasOf(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// rsReplicas is the ReplicaSet's spec.replicas, 1 (the API's default)
// when unset.
func rsReplicas(rs *appsv1.ReplicaSet) int32 {
	if rs == nil {
		return 0
	}
	if rs.Spec.Replicas == nil {
		return 1
	}
	return *rs.Spec.Replicas
}

func isRollingUpdate(d *appsv1.Deployment) bool {
	return d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType
}

// fenceposts resolves maxSurge and maxUnavailable against desired
// replicas: a percentage of surge rounds up, one of unavailability rounds
// down, and when both come to zero one pod may be unavailable, so that a
// rollout can always move.
func fenceposts(maxSurge, maxUnavailable *intstr.IntOrString, desired int32) (surge, unavailable int32, err error) {
	zero := intstr.FromInt32(0)
	s, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(maxSurge, zero), int(desired), true)
	if err != nil {
		return 0, 0, err
	}
	u, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(maxUnavailable, zero), int(desired), false)
	if err != nil {
		return 0, 0, err
	}
	if s == 0 && u == 0 {
		u = 1
	}
	return int32(s), int32(u), nil
}

// rollingParams returns the RollingUpdate parameters of d, nil ones when
// it has none (validation makes every RollingUpdate Deployment have them).
func rollingParams(d *appsv1.Deployment) (maxSurge, maxUnavailable *intstr.IntOrString) {
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		return ru.MaxSurge, ru.MaxUnavailable
	}
	return nil, nil
}

// maxSurge is how many pods beyond spec.replicas a rolling Deployment may
// run; 0 for other strategies. A value validation would have refused
// counts as 0.
func maxSurge(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) {
		return 0
	}
	s, u := rollingParams(d)
	surge, _, _ := fenceposts(s, u, replicasOf(d))
	return surge
}

// maxUnavailable is how many of spec.replicas a rolling Deployment may
// have unavailable, never more than spec.replicas; 0 for other
// strategies and for zero replicas.
func maxUnavailable(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) || replicasOf(d) == 0 {
		return 0
	}
	s, u := rollingParams(d)
	_, unavailable, _ := fenceposts(s, u, replicasOf(d))
	return min(unavailable, replicasOf(d))
}

func hasProgressDeadline(d *appsv1.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != math.MaxInt32
}

func hasRevisionHistoryLimit(d *appsv1.Deployment) bool {
	return d.Spec.RevisionHistoryLimit != nil && *d.Spec.RevisionHistoryLimit != math.MaxInt32
}

// equalIgnoringHash reports whether two pod templates are the same but
// for the pod-template-hash label, which the Deployment's own template
// never has.
func equalIgnoringHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return equality.Semantic.DeepEqual(a, b)
}

// byCreation orders ReplicaSets oldest first, by name among those created
// in the same second.
func byCreation(a, b *appsv1.ReplicaSet) int {
	if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return strings.Compare(a.Name, b.Name)
	}
	if a.CreationTimestamp.Before(&b.CreationTimestamp) {
		return -1
	}
	return 1
}

// bySizeOlder orders ReplicaSets largest first, older first among equals:
// the order in which a scale-down takes replicas away.
func bySizeOlder(a, b *appsv1.ReplicaSet) int {
	if c := cmp.Compare(rsReplicas(b), rsReplicas(a)); c != 0 {
		return c
	}
	return byCreation(a, b)
}

// bySizeNewer orders ReplicaSets largest first, newer first among equals:
// the order in which a scale-up hands replicas out.
func bySizeNewer(a, b *appsv1.ReplicaSet) int {
	if c := cmp.Compare(rsReplicas(b), rsReplicas(a)); c != 0 {
		return c
	}
	return byCreation(b, a)
}

// byRevision orders ReplicaSets by revision, oldest first, by creation
// where revisions tie or cannot be read.
func byRevision(a, b *appsv1.ReplicaSet) int {
	ra, errA := revisionOf(a)
	rb, errB := revisionOf(b)
	if errA != nil || errB != nil || ra == rb {
		return byCreation(a, b)
	}
	return cmp.Compare(ra, rb)
}

// newReplicaSetOf returns the oldest of rsList whose template is d's, nil
// when there is none. It sorts rsList by creation.
func newReplicaSetOf(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	slices.SortFunc(rsList, byCreation)
	for _, rs := range rsList {
		if equalIgnoringHash(&rs.Spec.Template, &d.Spec.Template) {
			return rs
		}
	}
	return nil
}

// oldReplicaSetsOf returns every ReplicaSet of rsList but newRS.
func oldReplicaSetsOf(rsList []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var old []*appsv1.ReplicaSet
	for _, rs := range rsList {
		if newRS != nil && rs.UID == newRS.UID {
			continue
		}
		old = append(old, rs)
	}
	return old
}

// active returns the non-nil ReplicaSets of rss that want pods.
func active(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if rs != nil && rsReplicas(rs) > 0 {
			out = append(out, rs)
		}
	}
	return out
}

// sumOf adds f over the non-nil ReplicaSets of rss.
func sumOf(rss []*appsv1.ReplicaSet, f func(*appsv1.ReplicaSet) int32) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += f(rs)
		}
	}
	return n
}

func specTotal(rss []*appsv1.ReplicaSet) int32 { return sumOf(rss, rsReplicas) }

func statusTotal(rss []*appsv1.ReplicaSet) int32 {
	return sumOf(rss, func(rs *appsv1.ReplicaSet) int32 { return rs.Status.Replicas })
}

func readyTotal(rss []*appsv1.ReplicaSet) int32 {
	return sumOf(rss, func(rs *appsv1.ReplicaSet) int32 { return rs.Status.ReadyReplicas })
}

func availableTotal(rss []*appsv1.ReplicaSet) int32 {
	return sumOf(rss, func(rs *appsv1.ReplicaSet) int32 { return rs.Status.AvailableReplicas })
}

// terminatingTotal sums the ReplicaSets' status.terminatingReplicas, nil
// when one that the ReplicaSet controller has synced does not report it
// (the sum would be wrong). ReplicaSets never synced count as none.
func terminatingTotal(rss []*appsv1.ReplicaSet) *int32 {
	var n int32
	for _, rs := range rss {
		switch {
		case rs == nil:
		case rs.Status.TerminatingReplicas == nil && rs.Status.ObservedGeneration == 0:
		case rs.Status.TerminatingReplicas == nil:
			return nil
		default:
			n += *rs.Status.TerminatingReplicas
		}
	}
	return &n
}

// revisionOf parses the ReplicaSet's revision annotation; a missing one
// is an error, as an unreadable one, and such a ReplicaSet is left out of
// the reckoning of revisions.
func revisionOf(rs *appsv1.ReplicaSet) (int64, error) {
	return strconv.ParseInt(rs.Annotations[RevisionAnnotation], 10, 64)
}

// maxRevision is the highest revision among rss.
func maxRevision(rss []*appsv1.ReplicaSet) int64 {
	var m int64
	for _, rs := range rss {
		if v, err := revisionOf(rs); err == nil && v > m {
			m = v
		}
	}
	return m
}

// previousRevision is the second highest revision among rss: the one a
// rollback with no revision goes back to.
func previousRevision(rss []*appsv1.ReplicaSet) int64 {
	var first, second int64
	for _, rs := range rss {
		v, err := revisionOf(rs)
		if err != nil {
			continue
		}
		switch {
		case v >= first:
			second, first = first, v
		case v > second:
			second = v
		}
	}
	return second
}

// annotationInt32 reads a non-negative int32 annotation of rs.
func annotationInt32(rs *appsv1.ReplicaSet, key string) (int32, bool) {
	v, ok := rs.Annotations[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n > math.MaxInt32 {
		return 0, false
	}
	return int32(n), true
}

// replicasAnnotationsStale reports whether rs's desired- and
// max-replicas annotations differ from desired and maxReplicas.
func replicasAnnotationsStale(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	for k, v := range replicasAnnotations(desired, maxReplicas) {
		if rs.Annotations[k] != v {
			return true
		}
	}
	return false
}

// replicasAnnotations are the annotations that tell a ReplicaSet's
// Deployment's desired replicas and the most it may run.
func replicasAnnotations(desired, maxReplicas int32) map[string]string {
	return map[string]string{DesiredReplicasAnnotation: strconv.Itoa(int(desired)), MaxReplicasAnnotation: strconv.Itoa(int(maxReplicas))}
}

// setReplicasAnnotations writes desired and maxReplicas into rs's
// annotations, reporting whether anything changed.
func setReplicasAnnotations(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	changed := false
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	for k, v := range replicasAnnotations(desired, maxReplicas) {
		if rs.Annotations[k] != v {
			rs.Annotations[k] = v
			changed = true
		}
	}
	return changed
}

// copyAnnotations copies d's annotations, but those in notCopied, onto
// rs, reporting whether any changed.
func copyAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	changed := false
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	for k, v := range d.Annotations {
		if notCopied[k] {
			continue
		}
		if cur, ok := rs.Annotations[k]; ok && cur == v {
			continue
		}
		rs.Annotations[k] = v
		changed = true
	}
	return changed
}

// setNewReplicaSetAnnotations brings the annotations of d's new
// ReplicaSet up to date, reporting whether any changed: d's own are
// copied; the revision becomes newRevision unless it is already higher;
// a ReplicaSet that had a revision and gets a newer one (a rollback to
// it) records the old one in its revision history; and one about to be
// created gets the replicas annotations.
func setNewReplicaSetAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet, newRevision int64, exists bool) bool {
	changed := copyAnnotations(d, rs)
	old, had := rs.Annotations[RevisionAnnotation]
	var oldRevision int64
	if had && old != "" {
		v, err := strconv.ParseInt(old, 10, 64)
		if err != nil {
			// Not ours to fix: leave the ReplicaSet's revision alone.
			return false
		}
		oldRevision = v
	}
	if oldRevision < newRevision {
		rs.Annotations[RevisionAnnotation] = strconv.FormatInt(newRevision, 10)
		changed = true
		if had {
			rs.Annotations[RevisionHistoryAnnotation] = appendRevisionHistory(rs.Annotations[RevisionHistoryAnnotation], old)
		}
	}
	if !exists && setReplicasAnnotations(rs, replicasOf(d), replicasOf(d)+maxSurge(d)) {
		changed = true
	}
	return changed
}

// appendRevisionHistory appends revision to the comma-separated history,
// dropping the oldest entries to stay within maxRevisionHistoryChars; a
// revision that cannot fit even alone is not recorded.
func appendRevisionHistory(history, revision string) string {
	if history == "" {
		return revision
	}
	entries := strings.Split(history, ",")
	length := len(history) + 1 + len(revision)
	for length > maxRevisionHistoryChars && len(entries) > 0 {
		length -= len(entries[0]) + 1
		entries = entries[1:]
	}
	if length > maxRevisionHistoryChars {
		return history
	}
	return strings.Join(append(entries, revision), ",")
}

// setDeploymentRevision sets d's revision annotation, reporting whether
// it changed.
func setDeploymentRevision(d *appsv1.Deployment, revision string) bool {
	if d.Annotations[RevisionAnnotation] == revision {
		return false
	}
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[RevisionAnnotation] = revision
	return true
}

// replicaSetName is the name of d's ReplicaSet of hash: the Deployment's
// name, cut short so that the whole stays a valid object name, a dash and
// the hash.
func replicaSetName(deployment, hash string) string {
	if limit := validation.DNS1123SubdomainMaxLength - 1 - len(hash); limit > 0 && len(deployment) > limit {
		deployment = deployment[:limit]
	}
	return deployment + "-" + hash
}

// newReplicasFor is how many replicas d's new ReplicaSet should have now:
// for a rolling update as many more as the surge allows, never more than
// spec.replicas; for Recreate, spec.replicas.
func newReplicasFor(d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) int32 {
	if !isRollingUpdate(d) {
		return replicasOf(d)
	}
	limit := replicasOf(d) + maxSurge(d)
	current := specTotal(all)
	if current >= limit {
		return rsReplicas(newRS)
	}
	return rsReplicas(newRS) + min(limit-current, replicasOf(d)-rsReplicas(newRS))
}

// saturated reports whether rs holds all of d's replicas, available, and
// knows it (its desired-replicas annotation says so).
func saturated(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	desired, err := strconv.Atoi(rs.Annotations[DesiredReplicasAnnotation])
	if err != nil {
		return false
	}
	want := replicasOf(d)
	return rsReplicas(rs) == want && int32(desired) == want && rs.Status.AvailableReplicas == want
}

// activeOrLatest returns the one active ReplicaSet among newRS and old,
// or the newest when none is active; nil when several are active (they
// are scaled proportionally). It sorts old newest first.
func activeOrLatest(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	if newRS == nil && len(old) == 0 {
		return nil
	}
	slices.SortFunc(old, func(a, b *appsv1.ReplicaSet) int { return byCreation(b, a) })
	act := active(append(slices.Clip(old), newRS))
	switch len(act) {
	case 0:
		if newRS != nil {
			return newRS
		}
		return old[0]
	case 1:
		return act[0]
	}
	return nil
}

// proportion is how many replicas of toAdd (negative: to take away) rs
// gets in a proportional scaling, of which added were handed out already:
// its share of the Deployment's new maximum size against the one it was
// last scaled for, bounded by what is left to hand out.
func proportion(d *appsv1.Deployment, rs *appsv1.ReplicaSet, toAdd, added int32) int32 {
	if rs == nil || rsReplicas(rs) == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	share := fraction(d, rs)
	left := toAdd - added
	if toAdd > 0 {
		return min(share, left)
	}
	return max(share, left)
}

// fraction is the change of rs's size that keeps its share of the
// Deployment: scaled from the max-replicas it was last sized for (the
// Deployment's status.replicas when that annotation is missing) to the
// Deployment's new spec.replicas plus maxSurge, rounded half away from
// zero.
func fraction(d *appsv1.Deployment, rs *appsv1.ReplicaSet) int32 {
	if replicasOf(d) == 0 {
		return -rsReplicas(rs)
	}
	newMax := replicasOf(d) + maxSurge(d)
	oldMax, ok := annotationInt32(rs, MaxReplicasAnnotation)
	if !ok || oldMax == 0 {
		oldMax = d.Status.Replicas
		if oldMax == 0 {
			return 0
		}
	}
	size := float64(rsReplicas(rs)*newMax) / float64(oldMax)
	return int32(math.Round(size)) - rsReplicas(rs)
}

// Conditions.

func newCondition(t appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, message string) appsv1.DeploymentCondition {
	now := metav1.Now()
	return appsv1.DeploymentCondition{Type: t, Status: status, Reason: reason, Message: message, LastUpdateTime: now, LastTransitionTime: now}
}

func getCondition(s appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

// setCondition puts c in s unless a condition of its type with the same
// status and reason is there already; a change of reason alone keeps the
// old transition time.
func setCondition(s *appsv1.DeploymentStatus, c appsv1.DeploymentCondition) {
	if cur := getCondition(*s, c.Type); cur != nil {
		if cur.Status == c.Status && cur.Reason == c.Reason {
			return
		}
		if cur.Status == c.Status {
			c.LastTransitionTime = cur.LastTransitionTime
		}
	}
	removeCondition(s, c.Type)
	s.Conditions = append(s.Conditions, c)
}

func removeCondition(s *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) {
	var kept []appsv1.DeploymentCondition
	for _, c := range s.Conditions {
		if c.Type != t {
			kept = append(kept, c)
		}
	}
	s.Conditions = kept
}

// complete reports whether status shows d's rollout done: every replica
// updated and available, no old ones, the current generation observed.
func complete(d *appsv1.Deployment, s *appsv1.DeploymentStatus) bool {
	want := replicasOf(d)
	return s.UpdatedReplicas == want && s.Replicas == want && s.AvailableReplicas == want && s.ObservedGeneration >= d.Generation
}

// progressing reports whether s shows progress over d's current status:
// more updated, ready or available replicas, or fewer old ones.
func progressing(d *appsv1.Deployment, s *appsv1.DeploymentStatus) bool {
	was := d.Status
	return s.UpdatedReplicas > was.UpdatedReplicas ||
		s.Replicas-s.UpdatedReplicas < was.Replicas-was.UpdatedReplicas ||
		s.ReadyReplicas > was.ReadyReplicas ||
		s.AvailableReplicas > was.AvailableReplicas
}
