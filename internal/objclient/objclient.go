// Package objclient is the REST side of the controllers' small Client
// interfaces: objects of one type created, updated and deleted, each in the
// namespace it names, through the REST client.
package objclient

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
)

// Client writes objects of type T; its errors are the REST client's, which
// k8s.io/apimachinery/pkg/api/errors recognises.
type Client[T cache.Object] struct {
	objs *client.Resource[T]
}

// For returns the Client that writes objects of type T through c.
func For[T cache.Object](c *client.Client) Client[T] {
	return Client[T]{objs: client.For[T](c, "")}
}

// Create creates obj in its namespace and returns the object stored.
func (c Client[T]) Create(ctx context.Context, obj T) (T, error) {
	return c.objs.Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{})
}

// Update replaces obj, with its resourceVersion as precondition unless it
// is empty, and returns the object stored.
func (c Client[T]) Update(ctx context.Context, obj T) (T, error) {
	return c.objs.Namespace(obj.GetNamespace()).Update(ctx, obj, metav1.UpdateOptions{})
}

// Delete deletes the object namespace/name.
func (c Client[T]) Delete(ctx context.Context, namespace, name string) error {
	return c.objs.Namespace(namespace).Delete(ctx, name, metav1.DeleteOptions{})
}
