package client

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Finalize replaces the spec.finalizers of the namespace obj names, through
// its finalize subresource (PUT /api/v1/namespaces/{name}/finalize), and
// returns the namespace as the server answers it. This is how the
// namespace controller gives up its "kubernetes" finalizer once it has
// emptied a namespace being deleted: obj carries spec.finalizers without
// it, and the server removes the namespace when no finalizer of either
// kind is left. Only namespaces have the subresource; on any other
// resource the server answers 404.
func (r *Resource[T]) Finalize(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	return r.update(ctx, obj, opts, "finalize")
}
