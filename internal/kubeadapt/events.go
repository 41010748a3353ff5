package kubeadapt

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/listwatch/listwatch/controller"
)

// Events is kube's record.EventRecorder over a controller.EventRecorder.
type Events struct{ Recorder controller.EventRecorder }

var _ record.EventRecorder = Events{}

// Event records the event with message as it is.
func (e Events) Event(object runtime.Object, eventType, reason, message string) {
	e.Recorder.Eventf(object, eventType, reason, "%s", message)
}

// Eventf records the event.
func (e Events) Eventf(object runtime.Object, eventType, reason, messageFmt string, args ...any) {
	e.Recorder.Eventf(object, eventType, reason, messageFmt, args...)
}

// AnnotatedEventf records the event without its annotations, which
// controller.EventRecorder does not carry (the kube controllers called
// here record none).
func (e Events) AnnotatedEventf(object runtime.Object, _ map[string]string, eventType, reason, messageFmt string, args ...any) {
	e.Recorder.Eventf(object, eventType, reason, messageFmt, args...)
}
