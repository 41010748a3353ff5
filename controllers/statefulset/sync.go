package statefulset

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubecontroller "k8s.io/kubernetes/pkg/controller"
	kubests "k8s.io/kubernetes/pkg/controller/statefulset"
	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/internal/kubeadapt"
)

// sync brings the StatefulSet of key and its pods, claims and revisions
// in line, as kube's controller's sync does: orphan revisions and pods
// its selector matches are adopted (pods only if named after it), owned
// pods it no longer selects are released, and kube's control loop does
// the rest. A set with minReadySeconds whose ready pods are not all
// available yet is looked at again when the next one becomes available.
func (ssc *Controller) sync(ctx context.Context, key string) (controller.Result, error) {
	set, ok, err := ssc.inf.StatefulSets.GetIndexer().GetByKey(key)
	if err != nil {
		return controller.Result{}, err
	}
	if !ok {
		return controller.Result{}, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		// The API server validates selectors: retrying mends nothing.
		return controller.Result{}, controller.Terminal(fmt.Errorf("the selector of StatefulSet %s: %w", key, err))
	}
	objs := &syncObjects{ctx: ctx, ssc: ssc}
	control := kubests.NewDefaultStatefulSetControl(kubests.NewStatefulPodControlFromManager(objs, kubeadapt.Events{Recorder: ssc.recorder}), objs, objs)
	adopt := &controller.AdoptionCheck{Owner: set, Kind: controllerKind.Kind, Get: func(ctx context.Context) (metav1.Object, error) {
		return ssc.client.GetStatefulSet(ctx, set.Namespace, set.Name)
	}}
	if err := ssc.adoptOrphanRevisions(ctx, control, adopt, set); err != nil {
		return controller.Result{}, err
	}
	pods, err := ssc.claimPods(ctx, adopt, set, selector)
	if err != nil {
		return controller.Result{}, err
	}
	now := time.Now()
	status, err := control.UpdateStatefulSet(ctx, set, pods, now)
	if err != nil {
		return controller.Result{}, err
	}
	if set.Spec.MinReadySeconds > 0 && status != nil && status.ReadyReplicas != status.AvailableReplicas {
		next := time.Duration(set.Spec.MinReadySeconds) * time.Second
		if d := kubecontroller.FindMinNextPodAvailabilityCheck(pods, set.Spec.MinReadySeconds, now, clock.RealClock{}); d != nil {
			next = *d
		}
		// A check already due is made at once (zero would mean none).
		return controller.Result{RequeueAfter: max(next, time.Millisecond)}, nil
	}
	return controller.Result{}, nil
}

// adoptOrphanRevisions adopts the ControllerRevisions without a
// controller that the set's selector matches.
func (ssc *Controller) adoptOrphanRevisions(ctx context.Context, control kubests.StatefulSetControlInterface, adopt *controller.AdoptionCheck, set *appsv1.StatefulSet) error {
	revisions, err := control.ListRevisions(set)
	if err != nil {
		return err
	}
	var orphans []*appsv1.ControllerRevision
	for _, r := range revisions {
		if metav1.GetControllerOfNoCopy(r) == nil {
			orphans = append(orphans, r)
		}
	}
	if len(orphans) == 0 {
		return nil
	}
	if err := adopt.Check(ctx); err != nil {
		return fmt.Errorf("can't adopt ControllerRevisions: %w", err)
	}
	return control.AdoptOrphanRevisions(set, orphans)
}

// claimPods returns the pods the set manages: its own that its selector
// matches and that are named after it, and the orphans of its namespace
// that are, which it adopts; its own that no longer are, it releases.
func (ssc *Controller) claimPods(ctx context.Context, adopt *controller.AdoptionCheck, set *appsv1.StatefulSet, selector labels.Selector) ([]*corev1.Pod, error) {
	idx := ssc.inf.Pods.GetIndexer()
	owned, err := controller.ControlledPods(idx, set.Namespace, set.UID)
	if err != nil {
		return nil, err
	}
	orphans, err := controller.Orphans(idx, set.Namespace)
	if err != nil {
		return nil, err
	}
	m := &controller.PodControllerRefManager{
		Control:    &controller.RealPodControl{Client: ssc.client, Logger: ssc.log},
		Controller: set,
		Selector:   selector,
		Kind:       controllerKind,
		Filter:     func(pod *corev1.Pod) bool { return isMemberOf(set, pod) },
		Recheck:    adopt.Fresh,
	}
	return m.ClaimPods(ctx, append(owned[:len(owned):len(owned)], orphans...))
}

// isMemberOf reports whether pod is named as a pod of set is:
// "<set>-<ordinal>".
func isMemberOf(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	parent, _, ok := parentAndOrdinal(pod.Name)
	return ok && parent == set.Name
}

// parentAndOrdinal splits a StatefulSet pod's name at its last dash into
// the set's name and the ordinal; ok is false for a name that does not end
// in "-<digits>".
func parentAndOrdinal(name string) (parent string, ordinal int, ok bool) {
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	if i == len(name) || i == 0 || name[i-1] != '-' {
		return "", 0, false
	}
	n := 0
	for _, c := range name[i:] {
		n = n*10 + int(c-'0')
		if n > 1<<31-1 {
			// Out of an int32: kube takes the set's name and no ordinal.
			return name[:i-1], -1, true
		}
	}
	return name[:i-1], n, true
}
