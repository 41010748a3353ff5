package client

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// WriteRecorder is told of every write a client makes under a context
// that carries it (WithWriteRecorder): the resource written and the
// resourceVersion the server answered with. The controller package puts
// one in each sync's context, so that the next sync of the same key can
// wait for its informers to show what this one wrote.
type WriteRecorder interface {
	RecordWrite(resource schema.GroupResource, resourceVersion string)
}

type writeRecorderKey struct{}

// WithWriteRecorder returns ctx carrying r: the creates, updates and
// patches made with it that succeed are recorded in r. Deletes are not:
// what they answer is not the state the deletion leaves.
func WithWriteRecorder(ctx context.Context, r WriteRecorder) context.Context {
	return context.WithValue(ctx, writeRecorderKey{}, r)
}

// RecordWrite tells ctx's WriteRecorder, if it carries one, that a write
// of resource was answered at resourceVersion. This package's clients call
// it on every write; a controller writing by other means (another client
// library, a test's fake) calls it to be protected alike.
func RecordWrite(ctx context.Context, resource schema.GroupResource, resourceVersion string) {
	if r, ok := ctx.Value(writeRecorderKey{}).(WriteRecorder); ok && resourceVersion != "" {
		r.RecordWrite(resource, resourceVersion)
	}
}
