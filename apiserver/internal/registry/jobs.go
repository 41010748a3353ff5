package registry

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// JobRules are Jobs' rules: kube's strategies, and the warning of kube's
// Job storage (k8s.io/kubernetes/pkg/registry/batch/job/storage) on a
// delete that states no propagation policy at a version whose default,
// as the Job strategy decides it, orphans the Job's pods (batch/v1).
type JobRules struct {
	BuiltinRules
	r *Resource
}

// jobOrphanWarning is the text of kube's Job storage's warning.
const jobOrphanWarning = "child pods are preserved by default when jobs are deleted; " +
	"set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning"

// DeleteWarnings warns of a delete without a propagation policy (nor
// orphanDependents) that orphans the pods by default.
func (j JobRules) DeleteWarnings(opts *metav1.DeleteOptions) []string {
	//lint:ignore SA1019 still part of the API
	if opts.PropagationPolicy != nil || opts.OrphanDependents != nil || !j.r.OrphanByDefault {
		return nil
	}
	return []string{jobOrphanWarning}
}
