package podlifecycle

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/listwatch/listwatch/controller"
)

// events records the events of every component as
// "component/host reason object: message".
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) recorder(component, host string) controller.EventRecorder {
	return recorderFunc(func(obj runtime.Object, typ, reason, format string, args ...any) {
		name := ""
		switch o := obj.(type) {
		case *corev1.Pod:
			name = o.Name
		case *corev1.ObjectReference:
			name = o.Name + "/" + o.FieldPath
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		e.log = append(e.log, fmt.Sprintf("%s/%s %s %s %s: %s", component, host, typ, reason, name, fmt.Sprintf(format, args...)))
	})
}

func (e *events) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.log)
}

type recorderFunc func(obj runtime.Object, typ, reason, format string, args ...any)

func (f recorderFunc) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	f(obj, typ, reason, format, args...)
}

func condition(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func TestNodes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Options{})
		defer h.stop()
		synctest.Wait()
		for _, name := range []string{"node-1", "node-2", "node-3"} {
			n, ok := h.api.nodes.Get("", name)
			if !ok {
				t.Fatalf("node %s not registered", name)
			}
			ready := n.Status.Conditions[len(n.Status.Conditions)-1]
			if ready.Type != corev1.NodeReady || ready.Status != corev1.ConditionTrue || ready.Reason != "KubeletReady" {
				t.Errorf("node %s Ready condition %+v", name, ready)
			}
			if n.Status.Allocatable.Cpu().Value() != 32 || n.Status.Allocatable.Pods().Value() != 110 || n.Status.NodeInfo.KubeletVersion != KubeletVersion {
				t.Errorf("node %s status %+v", name, n.Status)
			}
			if len(n.Spec.Taints) != 0 {
				t.Errorf("node %s keeps taints %v; the not-ready taint of its registration goes once it is Ready", name, n.Spec.Taints)
			}
			if n.Labels[corev1.LabelHostname] != name || len(n.Status.Addresses) != 2 {
				t.Errorf("node %s labels %v addresses %v", name, n.Labels, n.Status.Addresses)
			}
			l, ok := h.api.leases.Get(corev1.NamespaceNodeLease, name)
			if !ok || *l.Spec.HolderIdentity != name || *l.Spec.LeaseDurationSeconds != 40 || l.OwnerReferences[0].Kind != "Node" {
				t.Fatalf("lease of %s: %+v", name, l)
			}
		}
		lease := func() time.Time {
			l, _ := h.api.leases.Get(corev1.NamespaceNodeLease, "node-1")
			return l.Spec.RenewTime.Time
		}
		heartbeat := func() time.Time {
			n, _ := h.api.nodes.Get("", "node-1")
			return n.Status.Conditions[3].LastHeartbeatTime.Time
		}
		renewed, beat := lease(), heartbeat()
		time.Sleep(DefaultLeaseRenewInterval + time.Millisecond)
		synctest.Wait()
		if got := lease(); got.Sub(renewed) != DefaultLeaseRenewInterval {
			t.Errorf("lease renewed %v after the last, want %v", got.Sub(renewed), DefaultLeaseRenewInterval)
		}
		if !heartbeat().Equal(beat) {
			t.Error("node status posted again before NodeStatusInterval")
		}
		time.Sleep(DefaultNodeStatusInterval)
		synctest.Wait()
		if got := heartbeat(); !got.After(beat) {
			t.Errorf("Ready heartbeat %v not renewed after a minute", got)
		}
	})
}

func TestScheduling(t *testing.T) {
	tainted := func(name string, taints ...corev1.Taint) *corev1.Node {
		n := newNode(name)
		n.Spec.Taints = taints
		return n
	}
	noSchedule := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name  string
		nodes []*corev1.Node
		pod   func(p *corev1.Pod)
		// want is the node the pod is bound to, or "" with unschedulable
		// the message of its PodScheduled condition.
		want, unschedulable string
	}{
		{name: "nodeSelector", pod: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "node-2"} }, want: "node-2"},
		{name: "required node affinity", pod: func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"node-3"}}}}},
			}}}
		}, want: "node-3"},
		{name: "taints keep pods off but those that tolerate them",
			nodes: []*corev1.Node{tainted("node-1", noSchedule), tainted("node-3", noSchedule)},
			pod:   func(*corev1.Pod) {}, want: "node-2"},
		{name: "a cordoned node takes no pod",
			nodes: []*corev1.Node{func() *corev1.Node { n := newNode("node-1"); n.Spec.Unschedulable = true; return n }(), tainted("node-2", noSchedule), tainted("node-3", noSchedule)},
			pod: func(p *corev1.Pod) {
				p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
			}, want: "node-2"},
		{name: "no node fits", nodes: []*corev1.Node{tainted("node-1", noSchedule)},
			pod: func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
			}, unschedulable: "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."},
		{name: "requests beyond allocatable", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("33")}
		}, unschedulable: "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pod := newPod("p", "", "")
				tt.pod(pod)
				var ev events
				h := startWithNodes(t, Options{Events: ev.recorder}, tt.nodes, pod)
				defer h.stop()
				time.Sleep(time.Second)
				synctest.Wait()
				p := h.pod(t, "p")
				if p.Spec.NodeName != tt.want {
					t.Fatalf("bound to %q, want %q", p.Spec.NodeName, tt.want)
				}
				if tt.want != "" {
					return
				}
				c := condition(p, corev1.PodScheduled)
				if c == nil || c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable || c.Message != tt.unschedulable {
					t.Fatalf("PodScheduled %+v, want False, Unschedulable: %s", c, tt.unschedulable)
				}
				if got := ev.all(); len(got) != 1 || got[0] != "default-scheduler/ Warning FailedScheduling p: "+tt.unschedulable {
					t.Errorf("events %q", got)
				}
			})
		})
	}
}

func TestUnschedulablePodIsScheduledWhenANodeFrees(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		big := newPod("big", "", "")
		big.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("30")}
		first := big.DeepCopy()
		first.Name, first.UID = "first", "uid-first"
		first.Spec.RestartPolicy = corev1.RestartPolicyNever
		h := start(t, Options{Nodes: []string{"node-1"}, RunDuration: time.Minute}, first)
		defer h.stop()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if _, err := h.api.src.Create(big); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if p := h.pod(t, "big"); p.Spec.NodeName != "" || condition(p, corev1.PodScheduled) == nil {
			t.Fatalf("big pod bound to %q beside the first; want unschedulable", p.Spec.NodeName)
		}
		// The first ends a minute after it started, and frees its CPUs.
		time.Sleep(time.Minute)
		synctest.Wait()
		if p := h.pod(t, "first"); p.Status.Phase != corev1.PodSucceeded {
			t.Fatalf("first pod %s", p.Status.Phase)
		}
		if p := h.pod(t, "big"); p.Spec.NodeName != "node-1" {
			t.Fatalf("big pod not bound once the node had room")
		}
	})
}

func TestContainersEnd(t *testing.T) {
	tests := []struct {
		name        string
		restart     corev1.RestartPolicy
		annotations map[string]string
		opts        Options
		// wantPhase after StartDelay + RunDuration, wantCode its
		// containers' exit code (terminated, or last terminated for a
		// pod restarted).
		wantPhase corev1.PodPhase
		wantCode  int32
		reason    string
	}{
		{name: "Never succeeds", restart: corev1.RestartPolicyNever, wantPhase: corev1.PodSucceeded, reason: "Completed"},
		{name: "OnFailure succeeds", restart: corev1.RestartPolicyOnFailure, wantPhase: corev1.PodSucceeded, reason: "Completed"},
		{name: "Always keeps running", restart: corev1.RestartPolicyAlways, wantPhase: corev1.PodRunning},
		{name: "exit-code annotation fails a Never pod", restart: corev1.RestartPolicyNever, annotations: map[string]string{ExitCodeAnnotation: "3"}, wantPhase: corev1.PodFailed, wantCode: 3, reason: "Error"},
		{name: "exit code 0 succeeds", restart: corev1.RestartPolicyNever, annotations: map[string]string{ExitCodeAnnotation: "0"}, opts: Options{FailImages: []string{"nginx:*"}}, wantPhase: corev1.PodSucceeded, reason: "Completed"},
		{name: "a failing image fails with exit code 1", restart: corev1.RestartPolicyNever, opts: Options{FailImages: []string{"nginx:*"}}, wantPhase: corev1.PodFailed, wantCode: 1, reason: "Error"},
		{name: "a failing OnFailure pod crash-loops", restart: corev1.RestartPolicyOnFailure, annotations: map[string]string{ExitCodeAnnotation: "7"}, wantPhase: corev1.PodRunning, wantCode: 7, reason: "Error"},
		{name: "run-duration annotation", restart: corev1.RestartPolicyNever, annotations: map[string]string{RunDurationAnnotation: "1h"}, wantPhase: corev1.PodRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pod := newPod("p", "", "")
				pod.Spec.RestartPolicy = tt.restart
				pod.Annotations = tt.annotations
				opts := tt.opts
				opts.StartDelay, opts.RunDuration = time.Second, 5*time.Second
				h := start(t, opts, pod)
				defer h.stop()
				time.Sleep(time.Second + 4*time.Second)
				synctest.Wait()
				if p := h.pod(t, "p"); p.Status.Phase != corev1.PodRunning {
					t.Fatalf("before RunDuration: %s, want Running", p.Status.Phase)
				}
				time.Sleep(2 * time.Second)
				synctest.Wait()
				p := h.pod(t, "p")
				if p.Status.Phase != tt.wantPhase {
					t.Fatalf("phase %s, want %s", p.Status.Phase, tt.wantPhase)
				}
				cs := p.Status.ContainerStatuses[0]
				term := cs.State.Terminated
				if term == nil {
					term = cs.LastTerminationState.Terminated
				}
				switch {
				case tt.reason == "" && term != nil:
					t.Errorf("container terminated %+v, want running", term)
				case tt.reason != "" && (term == nil || term.ExitCode != tt.wantCode || term.Reason != tt.reason):
					t.Errorf("container %+v, want terminated %d %s", cs, tt.wantCode, tt.reason)
				}
				if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
					ready := condition(p, corev1.PodReady)
					want := map[corev1.PodPhase]string{corev1.PodSucceeded: "PodCompleted", corev1.PodFailed: "PodFailed"}[p.Status.Phase]
					if ready.Status != corev1.ConditionFalse || ready.Reason != want {
						t.Errorf("Ready %+v, want False %s", ready, want)
					}
				}
			})
		})
	}
}

func TestKubeletEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ev events
		pod := newPod("p", "", "")
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "side", Image: "busybox", ImagePullPolicy: corev1.PullAlways})
		h := start(t, Options{Nodes: []string{"node-1"}, Events: ev.recorder}, pod)
		defer h.stop()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		h.api.gracefulDelete(t, "ns", "p", 30)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		got := strings.Join(ev.all(), "\n")
		want := strings.Join([]string{
			"default-scheduler/ Normal Scheduled p: Successfully assigned ns/p to node-1",
			`kubelet/node-1 Normal Pulled p/spec.containers{app}: Container image "nginx:1.27" already present on machine and can be accessed by the pod`,
			"kubelet/node-1 Normal Created p/spec.containers{app}: Container created",
			"kubelet/node-1 Normal Started p/spec.containers{app}: Container started",
			`kubelet/node-1 Normal Pulling p/spec.containers{side}: Pulling image "busybox"`,
			`kubelet/node-1 Normal Pulled p/spec.containers{side}: Successfully pulled image "busybox" in 0s (0s including waiting). Image size: 0 bytes.`,
			"kubelet/node-1 Normal Created p/spec.containers{side}: Container created",
			"kubelet/node-1 Normal Started p/spec.containers{side}: Container started",
			"kubelet/node-1 Normal Killing p/spec.containers{app}: Stopping container app",
			"kubelet/node-1 Normal Killing p/spec.containers{side}: Stopping container side",
		}, "\n")
		if got != want {
			t.Errorf("events\n%s\nwant\n%s", got, want)
		}
	})
}
