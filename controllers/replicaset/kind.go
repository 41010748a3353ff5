package replicaset

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
)

// Kind is what the controller needs to know of the objects it serves, of
// Go type T: their kind, and how to read their spec and read and write
// their status. ReplicaSets and ReplicationControllers are the two kinds
// it serves; their status is handled in the ReplicaSet's form, which is
// the RC's plus what an RC cannot carry (terminatingReplicas).
//
// Implementations must not modify the objects they are given: they come
// from the informer's cache.
type Kind[T cache.Object] interface {
	// GroupVersionKind is written in the owner references of the pods
	// the controller creates or adopts, and recognised in theirs.
	GroupVersionKind() schema.GroupVersionKind
	// Resource names the objects in errors.
	Resource() schema.GroupResource
	// ControllerName names the controller in logs and queue metrics.
	ControllerName() string
	// Selector is obj's pod selector; labels.Nothing() for a missing or
	// invalid one, never everything.
	Selector(obj T) labels.Selector
	// Replicas is obj's desired number of pods, as defaulted by the API
	// server, never negative.
	Replicas(obj T) int32
	// Template is obj's pod template, or nil when it has none.
	Template(obj T) *corev1.PodTemplateSpec
	// MinReadySeconds is how long a ready pod of obj takes to count as
	// available.
	MinReadySeconds(obj T) int32
	// Status is obj's status in a ReplicaSet's form; it may share memory
	// with obj.
	Status(obj T) appsv1.ReplicaSetStatus
	// WithStatus returns a copy of obj with status; status holds only
	// what the kind can carry.
	WithStatus(obj T, status appsv1.ReplicaSetStatus) T
	// CountsTerminating tells whether the kind's status carries
	// terminatingReplicas, the controlled pods being deleted.
	CountsTerminating() bool
}

// ReplicaSets is the Kind of apps/v1 ReplicaSets.
type ReplicaSets struct{}

var _ Kind[*appsv1.ReplicaSet] = ReplicaSets{}

// GroupVersionKind is apps/v1 ReplicaSet.
func (ReplicaSets) GroupVersionKind() schema.GroupVersionKind {
	return appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
}

// Resource is apps replicasets.
func (ReplicaSets) Resource() schema.GroupResource { return appsv1.Resource("replicasets") }

// ControllerName is "replicaset", as kube-controller-manager's.
func (ReplicaSets) ControllerName() string { return "replicaset" }

// Selector converts spec.selector. The API server requires a non-empty
// one; an empty or invalid one selects nothing here rather than every pod
// of the namespace.
func (ReplicaSets) Selector(rs *appsv1.ReplicaSet) labels.Selector {
	if rs.Spec.Selector == nil || (len(rs.Spec.Selector.MatchLabels) == 0 && len(rs.Spec.Selector.MatchExpressions) == 0) {
		return labels.Nothing()
	}
	sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		return labels.Nothing()
	}
	return sel
}

// Replicas is spec.replicas, which the API server defaults to 1.
func (ReplicaSets) Replicas(rs *appsv1.ReplicaSet) int32 { return defaulted(rs.Spec.Replicas) }

// Template is spec.template, which a ReplicaSet always has.
func (ReplicaSets) Template(rs *appsv1.ReplicaSet) *corev1.PodTemplateSpec { return &rs.Spec.Template }

// MinReadySeconds is spec.minReadySeconds.
func (ReplicaSets) MinReadySeconds(rs *appsv1.ReplicaSet) int32 { return rs.Spec.MinReadySeconds }

// Status is rs.Status.
func (ReplicaSets) Status(rs *appsv1.ReplicaSet) appsv1.ReplicaSetStatus { return rs.Status }

// WithStatus copies rs with status.
func (ReplicaSets) WithStatus(rs *appsv1.ReplicaSet, status appsv1.ReplicaSetStatus) *appsv1.ReplicaSet {
	out := rs.DeepCopy()
	out.Status = status
	return out
}

// CountsTerminating is true: kube-apiserver v1.37 serves
// status.terminatingReplicas (DeploymentReplicaSetTerminatingReplicas, on
// by default).
func (ReplicaSets) CountsTerminating() bool { return true }

// ReplicationControllers is the Kind of core/v1 ReplicationControllers:
// the controller over them is kube's ReplicationManager.
type ReplicationControllers struct{}

var _ Kind[*corev1.ReplicationController] = ReplicationControllers{}

// GroupVersionKind is v1 ReplicationController.
func (ReplicationControllers) GroupVersionKind() schema.GroupVersionKind {
	return corev1.SchemeGroupVersion.WithKind("ReplicationController")
}

// Resource is core replicationcontrollers.
func (ReplicationControllers) Resource() schema.GroupResource {
	return corev1.Resource("replicationcontrollers")
}

// ControllerName is "replication".
func (ReplicationControllers) ControllerName() string { return "replication" }

// Selector is spec.selector; an empty one means the template's labels, as
// the API server defaults it. With neither, or an invalid one, the RC
// selects nothing rather than everything.
func (ReplicationControllers) Selector(rc *corev1.ReplicationController) labels.Selector {
	set := rc.Spec.Selector
	if len(set) == 0 && rc.Spec.Template != nil {
		set = rc.Spec.Template.Labels
	}
	if len(set) == 0 {
		return labels.Nothing()
	}
	sel, err := labels.ValidatedSelectorFromSet(set)
	if err != nil {
		return labels.Nothing()
	}
	return sel
}

// Replicas is spec.replicas, which the API server defaults to 1.
func (ReplicationControllers) Replicas(rc *corev1.ReplicationController) int32 {
	return defaulted(rc.Spec.Replicas)
}

// Template is spec.template, which may be missing.
func (ReplicationControllers) Template(rc *corev1.ReplicationController) *corev1.PodTemplateSpec {
	return rc.Spec.Template
}

// MinReadySeconds is spec.minReadySeconds.
func (ReplicationControllers) MinReadySeconds(rc *corev1.ReplicationController) int32 {
	return rc.Spec.MinReadySeconds
}

// Status converts rc.Status; its conditions are copied, the rest is
// plain values.
func (ReplicationControllers) Status(rc *corev1.ReplicationController) appsv1.ReplicaSetStatus {
	s := rc.Status
	out := appsv1.ReplicaSetStatus{
		Replicas:             s.Replicas,
		FullyLabeledReplicas: s.FullyLabeledReplicas,
		ReadyReplicas:        s.ReadyReplicas,
		AvailableReplicas:    s.AvailableReplicas,
		ObservedGeneration:   s.ObservedGeneration,
	}
	if len(s.Conditions) > 0 {
		out.Conditions = make([]appsv1.ReplicaSetCondition, len(s.Conditions))
		for i, c := range s.Conditions {
			out.Conditions[i] = appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetConditionType(c.Type), Status: c.Status,
				LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message}
		}
	}
	return out
}

// CountsTerminating is false: an RC's status has no terminatingReplicas.
func (ReplicationControllers) CountsTerminating() bool { return false }

// WithStatus copies rc with status.
func (ReplicationControllers) WithStatus(rc *corev1.ReplicationController, status appsv1.ReplicaSetStatus) *corev1.ReplicationController {
	out := rc.DeepCopy()
	out.Status = corev1.ReplicationControllerStatus{
		Replicas:             status.Replicas,
		FullyLabeledReplicas: status.FullyLabeledReplicas,
		ReadyReplicas:        status.ReadyReplicas,
		AvailableReplicas:    status.AvailableReplicas,
		ObservedGeneration:   status.ObservedGeneration,
	}
	if len(status.Conditions) > 0 {
		out.Status.Conditions = make([]corev1.ReplicationControllerCondition, len(status.Conditions))
		for i, c := range status.Conditions {
			out.Status.Conditions[i] = corev1.ReplicationControllerCondition{Type: corev1.ReplicationControllerConditionType(c.Type),
				Status: c.Status, LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message}
		}
	}
	return out
}

func defaulted(replicas *int32) int32 {
	if replicas == nil {
		return 1
	}
	return max(*replicas, 0)
}
