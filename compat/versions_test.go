package compat_test

import (
	"context"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
)

// TestResourceVersionsStoredOnce uses client-go on the resources kube
// serves at two versions over one storage: events written through
// events.k8s.io/v1 (client-go's tools/events recorder, as kube-scheduler
// writes them) are core/v1 events to a core informer, and the other way
// round; an autoscaling/v1 HPA is read as autoscaling/v2 with its CPU
// target as a metric. JSON and protobuf, both backends.
func TestResourceVersionsStoredOnce(t *testing.T) {
	for _, b := range backends {
		for _, ct := range []string{mediaJSON, mediaProtobuf} {
			t.Run(b.name+"/"+ct, func(t *testing.T) {
				s := startServer(t, b, serverOptions{})
				cs := s.clientset(ct)
				ctx := t.Context()

				factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
				coreEvents := factory.Core().V1().Events().Informer()
				newEvents := factory.Events().V1().Events().Informer()
				factory.Start(ctx.Done())
				t.Cleanup(factory.Shutdown)
				if !cache.WaitForCacheSync(ctx.Done(), coreEvents.HasSynced, newEvents.HasSynced) {
					t.Fatal("informers did not sync")
				}

				pod, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0"},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
				broadcaster.StartRecordingToSink(ctx.Done())
				t.Cleanup(broadcaster.Shutdown)
				recorder := broadcaster.NewRecorder(scheme.Scheme, "compat-scheduler")
				recorder.Eventf(pod, nil, corev1.EventTypeNormal, "Scheduled", "Binding", "assigned %s to node-a", pod.Name)

				var seen *corev1.Event
				if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
					for _, o := range coreEvents.GetStore().List() {
						if e := o.(*corev1.Event); e.Reason == "Scheduled" {
							seen = e
							return true, nil
						}
					}
					return false, nil
				}); err != nil {
					t.Fatal("the core/v1 informer never saw the events.k8s.io/v1 event")
				}
				if seen.InvolvedObject.Name != "web-0" || seen.Message != "assigned web-0 to node-a" || seen.ReportingController != "compat-scheduler" || seen.Action != "Binding" {
					t.Errorf("core view of the event: involvedObject %v message %q reportingComponent %q action %q", seen.InvolvedObject, seen.Message, seen.ReportingController, seen.Action)
				}

				// A core/v1 event, read through events.k8s.io/v1.
				if _, err := cs.CoreV1().Events("default").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "legacy"},
					InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-0"},
					Reason:         "Pulled",
					Message:        "image pulled",
					Type:           corev1.EventTypeNormal,
					Source:         corev1.EventSource{Component: "kubelet"},
				}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				var legacy *eventsv1.Event
				if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
					o, ok, _ := newEvents.GetStore().GetByKey("default/legacy")
					if ok {
						legacy = o.(*eventsv1.Event)
					}
					return ok, nil
				}); err != nil {
					t.Fatal("the events.k8s.io/v1 informer never saw the core/v1 event")
				}
				if legacy.Note != "image pulled" || legacy.Regarding.Name != "web-0" || legacy.DeprecatedSource.Component != "kubelet" {
					t.Errorf("events.k8s.io view: note %q regarding %v deprecatedSource %v", legacy.Note, legacy.Regarding, legacy.DeprecatedSource)
				}
				byField, err := cs.EventsV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=web-0,reason=Pulled"})
				if err != nil || len(byField.Items) != 1 || byField.Items[0].Name != "legacy" {
					t.Errorf("events.k8s.io/v1 list by regarding.name and reason: %v, %d items", err, len(byField.Items))
				}

				// autoscaling/v1 written, autoscaling/v2 read.
				if _, err := cs.AutoscalingV1().HorizontalPodAutoscalers("default").Create(ctx, &autoscalingv1.HorizontalPodAutoscaler{
					ObjectMeta: metav1.ObjectMeta{Name: "web"},
					Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
						ScaleTargetRef:                 autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
						MaxReplicas:                    5,
						TargetCPUUtilizationPercentage: new(int32(60)),
					},
				}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				v2, err := cs.AutoscalingV2().HorizontalPodAutoscalers("default").Get(ctx, "web", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if len(v2.Spec.Metrics) != 1 || v2.Spec.Metrics[0].Resource == nil || v2.Spec.Metrics[0].Resource.Target.AverageUtilization == nil ||
					*v2.Spec.Metrics[0].Resource.Target.AverageUtilization != 60 || *v2.Spec.MinReplicas != 1 {
					t.Errorf("v2 view of the v1 HPA: metrics %+v minReplicas %v", v2.Spec.Metrics, v2.Spec.MinReplicas)
				}
			})
		}
	}
}
