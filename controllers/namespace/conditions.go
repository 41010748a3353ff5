package namespace

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The status conditions the controller keeps on a namespace being deleted,
// in the order kube-controller-manager adds them. Each is False, with the
// reason and message of okConditions, while nothing is wrong, and True,
// with what went wrong, otherwise.
var conditionTypes = []corev1.NamespaceConditionType{
	corev1.NamespaceDeletionDiscoveryFailure,
	corev1.NamespaceDeletionGVParsingFailure,
	corev1.NamespaceDeletionContentFailure,
	corev1.NamespaceContentRemaining,
	corev1.NamespaceFinalizersRemaining,
}

// okCondition is the reason and message of a condition that reports no
// trouble.
type okCondition struct{ reason, message string }

var okConditions = map[corev1.NamespaceConditionType]okCondition{
	corev1.NamespaceDeletionDiscoveryFailure: {"ResourcesDiscovered", "All resources successfully discovered"},
	corev1.NamespaceDeletionGVParsingFailure: {"ParsedGroupVersions", "All legacy kube types successfully parsed"},
	corev1.NamespaceDeletionContentFailure:   {"ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
	corev1.NamespaceContentRemaining:         {"ContentRemoved", "All content successfully removed"},
	corev1.NamespaceFinalizersRemaining:      {"ContentHasNoFinalizers", "All content-preserving finalizers finished"},
}

// conditions collects what one pass over a namespace's content found
// wrong, and turns it into the namespace's status conditions.
type conditions struct {
	now        time.Time
	failing    []corev1.NamespaceCondition
	deleteErrs []error
}

func newConditions(now time.Time) *conditions { return &conditions{now: now} }

func (c *conditions) add(t corev1.NamespaceConditionType, reason, message string) {
	c.failing = append(c.failing, corev1.NamespaceCondition{
		Type: t, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(c.now),
		Reason: reason, Message: message,
	})
}

// discoveryFailed records that the server's resources could not be
// discovered.
func (c *conditions) discoveryFailed(err error) {
	c.add(corev1.NamespaceDeletionDiscoveryFailure, "DiscoveryFailed", err.Error())
}

// groupVersionFailed records a group version that does not parse.
func (c *conditions) groupVersionFailed(err error) {
	c.add(corev1.NamespaceDeletionGVParsingFailure, "GroupVersionParsingFailed", err.Error())
}

// deleteFailed records a resource whose content could not be deleted.
func (c *conditions) deleteFailed(err error) { c.deleteErrs = append(c.deleteErrs, err) }

// contentTotals records what is left in the namespace: the number of
// objects per resource and of objects held per finalizer.
func (c *conditions) contentTotals(remaining map[schema.GroupVersionResource]int, byFinalizer map[string]int) {
	var res []string
	for gvr, n := range remaining {
		if n > 0 {
			res = append(res, fmt.Sprintf("%s.%s has %d resource instances", gvr.Resource, gvr.Group, n))
		}
	}
	if len(remaining) > 0 {
		slices.Sort(res)
		c.add(corev1.NamespaceContentRemaining, "SomeResourcesRemain", "Some resources are remaining: "+strings.Join(res, ", "))
	}
	var fins []string
	for f, n := range byFinalizer {
		if n > 0 {
			fins = append(fins, fmt.Sprintf("%s in %d resource instances", f, n))
		}
	}
	if len(byFinalizer) > 0 {
		slices.Sort(fins)
		c.add(corev1.NamespaceFinalizersRemaining, "SomeFinalizersRemain",
			"Some content in the namespace has finalizers remaining: "+strings.Join(fins, ", "))
	}
}

// apply writes the conditions into status and reports whether anything
// changed. A condition's lastTransitionTime moves only when its status
// does.
func (c *conditions) apply(status *corev1.NamespaceStatus) bool {
	want := slices.Clone(c.failing)
	if find(want, corev1.NamespaceDeletionContentFailure) == nil && len(c.deleteErrs) > 0 {
		msgs := make([]string, 0, len(c.deleteErrs))
		for _, err := range c.deleteErrs {
			msgs = append(msgs, err.Error())
		}
		slices.Sort(msgs)
		want = append(want, corev1.NamespaceCondition{
			Type: corev1.NamespaceDeletionContentFailure, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(c.now), Reason: "ContentDeletionFailed",
			Message: fmt.Sprintf("Failed to delete all resource types, %d remaining: %v", len(c.deleteErrs), strings.Join(msgs, ", ")),
		})
	}
	changed := false
	for _, t := range conditionTypes {
		next := find(want, t)
		if next == nil {
			ok := okConditions[t]
			next = &corev1.NamespaceCondition{Type: t, Status: corev1.ConditionFalse,
				LastTransitionTime: metav1.NewTime(c.now), Reason: ok.reason, Message: ok.message}
		}
		cur := find(status.Conditions, t)
		switch {
		case cur == nil:
			status.Conditions = append(status.Conditions, *next)
			changed = true
		case cur.Status != next.Status || cur.Reason != next.Reason || cur.Message != next.Message:
			if cur.Status != next.Status {
				cur.LastTransitionTime = metav1.NewTime(c.now)
			}
			cur.Status, cur.Reason, cur.Message = next.Status, next.Reason, next.Message
			changed = true
		}
	}
	return changed
}

func find(cs []corev1.NamespaceCondition, t corev1.NamespaceConditionType) *corev1.NamespaceCondition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}
