// Package objclient is the REST side of the controllers' small Client
// interfaces: objects of one type created, updated and deleted, each in the
// namespace it names, through the REST client.
package objclient

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

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

// Apply makes fields the fields manager applies to the object name of r,
// of kind gvk, by a forced server-side apply of subresource (none for the
// object itself): the apply configuration is the object's identity and
// fields alone, so that manager gives up any field it applied before and
// left out now.
func Apply[T cache.Object](ctx context.Context, r *client.Resource[T], gvk schema.GroupVersionKind, name, manager string, fields map[string]any, subresource ...string) error {
	cfg := map[string]any{
		"apiVersion": gvk.GroupVersion().String(),
		"kind":       gvk.Kind,
		"metadata":   map[string]any{"name": name},
	}
	maps.Copy(cfg, fields)
	body, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode the apply configuration of %s %s: %w", gvk.Kind, name, err)
	}
	force := true
	_, err = r.Patch(ctx, name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: manager, Force: &force}, subresource...)
	return err
}
