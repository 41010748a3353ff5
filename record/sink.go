package record

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/client"
)

// ClientSink returns the Sink that writes events through c, the REST
// client: what a Broadcaster of a controller run against an API server
// takes.
func ClientSink(c *client.Client) Sink {
	return clientSink{events: client.For[*corev1.Event](c, "")}
}

type clientSink struct {
	events *client.Resource[*corev1.Event]
}

func (s clientSink) Create(ctx context.Context, ev *corev1.Event) (*corev1.Event, error) {
	return s.events.Namespace(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
}

func (s clientSink) Patch(ctx context.Context, namespace, name string, pt types.PatchType, data []byte) (*corev1.Event, error) {
	return s.events.Namespace(namespace).Patch(ctx, name, pt, data, metav1.PatchOptions{})
}
