package podlifecycle

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What the simulated kubelets write of a pod, as a kubelet does: its
// phase, its conditions (in a kubelet's order and with its reasons) and
// its containers' statuses, and the events of its containers.

// containerRef names container of pod, as the events about a container
// do.
func containerRef(pod *corev1.Pod, container string) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion, FieldPath: "spec.containers{" + container + "}",
	}
}

// recordStarted records the events of a kubelet starting pod's
// containers: the image pulled (or found present), the container
// created, the container started.
func (c *Controller) recordStarted(pod *corev1.Pod) {
	r := c.recorder("kubelet", pod.Spec.NodeName)
	if r == nil {
		return
	}
	for _, ctr := range pod.Spec.Containers {
		ref := containerRef(pod, ctr.Name)
		if ctr.ImagePullPolicy == corev1.PullAlways {
			r.Eventf(ref, corev1.EventTypeNormal, "Pulling", "Pulling image %q", ctr.Image)
			r.Eventf(ref, corev1.EventTypeNormal, "Pulled", "Successfully pulled image %q in %v (%v including waiting). Image size: %v bytes.", ctr.Image, time.Duration(0), time.Duration(0), 0)
		} else {
			r.Eventf(ref, corev1.EventTypeNormal, "Pulled", "Container image %q already present on machine and can be accessed by the pod", ctr.Image)
		}
		r.Eventf(ref, corev1.EventTypeNormal, "Created", "Container created")
		r.Eventf(ref, corev1.EventTypeNormal, "Started", "Container started")
	}
}

// recordKilling records, once per pod, a kubelet's events of stopping
// the containers of a deleted pod that still run.
func (c *Controller) recordKilling(pod *corev1.Pod) {
	c.mu.Lock()
	done := c.killed[pod.UID]
	c.killed[pod.UID] = true
	c.mu.Unlock()
	r := c.recorder("kubelet", pod.Spec.NodeName)
	if done || r == nil {
		return
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running != nil {
			r.Eventf(containerRef(pod, cs.Name), corev1.EventTypeNormal, "Killing", "Stopping container %s", cs.Name)
		}
	}
}

func setRunning(p *corev1.Pod, now time.Time) {
	setStarted(p, now, true, func(ctr corev1.Container, cs *corev1.ContainerStatus) {
		cs.Ready = true
		cs.Started = new(true)
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now)}}
	})
}

// setCrashLooping makes p a pod whose containers exit with code and are
// restarted with a back-off: Running, not Ready, each container waiting
// in CrashLoopBackOff after its first failure.
func setCrashLooping(p *corev1.Pod, now time.Time, code int32) {
	setStarted(p, now, false, func(ctr corev1.Container, cs *corev1.ContainerStatus) {
		cs.RestartCount = 1
		cs.Started = new(false)
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason:  "CrashLoopBackOff",
			Message: "back-off 10s restarting failed container=" + ctr.Name + " pod=" + p.Name + "_" + p.Namespace + "(" + string(p.UID) + ")",
		}}
		cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: "Error", StartedAt: metav1.NewTime(now), FinishedAt: metav1.NewTime(now), ContainerID: cs.ContainerID,
		}}
	})
}

// setStarted makes p Running on its node since now, Ready or not, with a
// status per container that container fills in.
func setStarted(p *corev1.Pod, now time.Time, ready bool, container func(ctr corev1.Container, cs *corev1.ContainerStatus)) {
	t := metav1.NewTime(now)
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &t
	p.Status.HostIP = hostIP(p.Spec.NodeName)
	p.Status.HostIPs = []corev1.HostIP{{IP: p.Status.HostIP}}
	p.Status.PodIP = podIP(p.UID)
	p.Status.PodIPs = []corev1.PodIP{{IP: p.Status.PodIP}}
	readiness := corev1.ConditionFalse
	if ready {
		readiness = corev1.ConditionTrue
	}
	p.Status.Conditions = kubeletConditions(p, t, corev1.ConditionTrue, readiness, "")
	p.Status.ContainerStatuses = p.Status.ContainerStatuses[:0]
	for i, ctr := range p.Spec.Containers {
		cs := corev1.ContainerStatus{
			Name:        ctr.Name,
			Image:       ctr.Image,
			ImageID:     "sim://" + ctr.Image,
			ContainerID: containerID(p, i),
		}
		container(ctr, &cs)
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, cs)
	}
}

func containerID(p *corev1.Pod, i int) string {
	return "sim://" + string(p.UID) + "/" + strconv.Itoa(i)
}

// setTerminated ends a running pod whose containers exited with code at
// now: Succeeded for 0 (each container terminated, reason Completed),
// Failed otherwise (reason Error), as a kubelet reports a pod whose
// containers are not restarted.
func setTerminated(p *corev1.Pod, now time.Time, code int32) {
	t := metav1.NewTime(now)
	phase, reason, condReason := corev1.PodSucceeded, "Completed", "PodCompleted"
	if code != 0 {
		phase, reason, condReason = corev1.PodFailed, "Error", "PodFailed"
	}
	started := t
	if p.Status.StartTime != nil {
		started = *p.Status.StartTime
	}
	p.Status.Phase = phase
	p.Status.Conditions = kubeletConditions(p, t, corev1.ConditionFalse, corev1.ConditionFalse, condReason)
	for i := range p.Status.ContainerStatuses {
		cs := &p.Status.ContainerStatuses[i]
		if cs.State.Running != nil {
			started = cs.State.Running.StartedAt
		}
		cs.Ready = false
		cs.Started = new(false)
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: reason, StartedAt: started, FinishedAt: t, ContainerID: cs.ContainerID,
		}}
	}
}

// kubeletConditions are the conditions a kubelet reports, in its order:
// PodReadyToStartContainers (sandbox), Initialized, Ready,
// ContainersReady, PodScheduled. A condition keeps its transition time
// while its status holds. reason, for a pod that ended, is PodCompleted
// or PodFailed.
func kubeletConditions(p *corev1.Pod, t metav1.Time, sandbox, ready corev1.ConditionStatus, reason string) []corev1.PodCondition {
	prev := map[corev1.PodConditionType]corev1.PodCondition{}
	for _, c := range p.Status.Conditions {
		prev[c.Type] = c
	}
	cond := func(typ corev1.PodConditionType, status corev1.ConditionStatus, reason string) corev1.PodCondition {
		c := corev1.PodCondition{Type: typ, Status: status, Reason: reason, LastTransitionTime: t}
		if old, ok := prev[typ]; ok && old.Status == status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		return c
	}
	initReason := ""
	if reason == "PodCompleted" {
		initReason = reason
	}
	return []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, sandbox, ""),
		cond(corev1.PodInitialized, corev1.ConditionTrue, initReason),
		cond(corev1.PodReady, ready, reason),
		cond(corev1.ContainersReady, ready, reason),
		cond(corev1.PodScheduled, corev1.ConditionTrue, ""),
	}
}
