package client

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
)

// WriteRecorder is told of every write a client makes under a context
// that carries it (WithWriteRecorder): the resource written and the object
// the server answered with, whose resourceVersion is the state the write
// made. The controller package puts one in each sync's context, so that
// the next sync of the same key can wait for its informers to show what
// this one wrote.
type WriteRecorder interface {
	RecordWrite(resource schema.GroupResource, obj cache.Object)
}

type writeRecorderKey struct{}

// WithWriteRecorder returns ctx carrying r: the creates, updates and
// patches made with it that succeed are recorded in r, and so are the
// deletes the server answers with the object (a graceful deletion's, with
// its deletionTimestamp, or the object as it was deleted), whose
// resourceVersion the informer reaches once it shows the deletion; a
// delete answered with a Status is not.
func WithWriteRecorder(ctx context.Context, r WriteRecorder) context.Context {
	return context.WithValue(ctx, writeRecorderKey{}, r)
}

// RecordWrite tells ctx's WriteRecorder, if it carries one, that a write
// of resource was answered with obj. This package's clients call it on
// every write; a controller writing by other means (another client
// library, a test's fake) calls it to be protected alike. An object with
// no resourceVersion is not recorded.
func RecordWrite(ctx context.Context, resource schema.GroupResource, obj cache.Object) {
	if obj == nil || isNilPointer(obj) || obj.GetResourceVersion() == "" {
		return
	}
	if r, ok := ctx.Value(writeRecorderKey{}).(WriteRecorder); ok {
		r.RecordWrite(resource, obj)
	}
}

// isNilPointer reports whether obj is a nil pointer dressed as an object,
// whose methods would panic.
func isNilPointer(obj cache.Object) bool {
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
