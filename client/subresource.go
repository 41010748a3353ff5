package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// CreateSubresource posts body, an object of the subresource's own type
// (a Binding for pods/binding, an Eviction for pods/eviction), to the
// subresource of the object called name. The answer, a Status or the
// object, is not read: these subresources only act.
func (r *Resource[T]) CreateSubresource(ctx context.Context, name, subresource string, body runtime.Object, opts metav1.CreateOptions) error {
	if err := nameRequired("create "+subresource, name); err != nil {
		return err
	}
	if r.err != nil {
		return r.err
	}
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("client: encoding %s: %w", subresource, err)
	}
	req := &request{verb: http.MethodPost, path: r.path(name, subresource), query: createQuery(opts),
		body: b, contentType: contentJSON, accept: acceptJSON}
	resp, err := r.c.send(ctx, req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, int64(r.c.maxEvent)))
	return resp.Body.Close()
}

// GetSubresource reads the subresource of the object called name (the
// Scale of scale) as JSON into out.
func (r *Resource[T]) GetSubresource(ctx context.Context, name, subresource string, out any) error {
	if err := nameRequired("get "+subresource, name); err != nil {
		return err
	}
	if r.err != nil {
		return r.err
	}
	return r.c.getJSON(ctx, r.path(name, subresource), out)
}
