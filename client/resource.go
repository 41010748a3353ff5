package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/resources"
)

// Resource is the client of one resource in one namespace (every namespace,
// or a cluster-scoped resource, when the namespace is ""), reading and
// writing objects of type T: the resource's Go type (*corev1.Pod), or
// *unstructured.Unstructured for any resource. It is a cache.ListerWatcher
// and is safe for concurrent use.
type Resource[T cache.Object] struct {
	c         *Client
	gvr       schema.GroupVersionResource
	namespace string
	codec     *codec[T]
	err       error // T cannot be decoded: every call fails with it
	// jsonOnly is set, for every copy made by Namespace, once the server
	// refused protobuf.
	jsonOnly *atomic.Bool
}

// A Resource is what a Reflector reads from.
var _ cache.ListerWatcher[*unstructured.Unstructured] = (*Resource[*unstructured.Unstructured])(nil)

// NewResource returns the client of resource gvr in namespace, for objects
// of type T. Built-in types are read as protobuf unless the configuration
// prefers JSON; unstructured objects as JSON.
//
// For a built-in resource, For finds gvr from T alone.
// *metav1.PartialObjectMetadata reads the objects' metadata alone, as
// NewMetadata does.
func NewResource[T cache.Object](c *Client, gvr schema.GroupVersionResource, namespace string) *Resource[T] {
	return newResourceOf[T](c, gvr, namespace, reflect.TypeFor[T]())
}

// newResourceOf is NewResource for objects of Go type t handed out as T,
// which t implements: the erased form of a built-in resource is a
// Resource[cache.Object] whose objects are of the registry's Go type.
func newResourceOf[T cache.Object](c *Client, gvr schema.GroupVersionResource, namespace string, t reflect.Type) *Resource[T] {
	codec, err := newCodecOf[T](gvr.GroupVersion(), t)
	r := &Resource[T]{c: c, gvr: gvr, namespace: namespace, codec: codec, err: err, jsonOnly: new(atomic.Bool)}
	if err == nil && (!codec.proto || c.preferJSON) {
		r.jsonOnly.Store(true)
	}
	return r
}

// ErrNotBuiltin is the error of a For whose Go type is not that of a
// built-in resource in the registry (package resources).
var ErrNotBuiltin = errors.New("not the Go type of a built-in resource")

// For returns the client of the built-in resource whose objects have Go
// type T (For[*corev1.ConfigMap] is core/v1 configmaps), in namespace (all
// when ""; ignored for a cluster-scoped resource), its resource found in
// the registry from T alone. As with NewResource, a client that cannot
// work fails every call, and Err tells it at once: for a type the registry
// does not know, with ErrNotBuiltin. Custom resources and unstructured
// objects take NewResource, or NewUnstructured, with their
// GroupVersionResource.
func For[T cache.Object](c *Client, namespace string) *Resource[T] {
	res, ok := resources.For[T]()
	if !ok {
		err := fmt.Errorf("client: %s: %w; name its resource with NewResource", reflect.TypeFor[T](), ErrNotBuiltin)
		return &Resource[T]{c: c, namespace: namespace, err: err, jsonOnly: new(atomic.Bool)}
	}
	if !res.Namespaced {
		namespace = ""
	}
	return NewResource[T](c, res.GVR(), namespace)
}

// Err returns the error every call of the client fails with, if any: T
// cannot be decoded, or (For) is not the type of a built-in resource.
func (r *Resource[T]) Err() error { return r.err }

// NewUnstructured returns the client of resource gvr in namespace, for any
// resource, custom ones included.
func NewUnstructured(c *Client, gvr schema.GroupVersionResource, namespace string) *Resource[*unstructured.Unstructured] {
	return NewResource[*unstructured.Unstructured](c, gvr, namespace)
}

// NewMetadata returns the client of the metadata of resource gvr's objects
// in namespace, for any resource: objects are *metav1.PartialObjectMetadata.
// It asks for the partial form kube-apiserver serves (a list of
// PartialObjectMetadata), and takes the metadata out of whole objects from
// a server that sends those instead. Writes send and answer whole objects,
// of which the metadata is kept: use it to read.
func NewMetadata(c *Client, gvr schema.GroupVersionResource, namespace string) *Resource[*metav1.PartialObjectMetadata] {
	return NewResource[*metav1.PartialObjectMetadata](c, gvr, namespace)
}

// Namespace returns the client of the same resource in namespace ns.
func (r *Resource[T]) Namespace(ns string) *Resource[T] {
	cp := *r
	cp.namespace = ns
	return &cp
}

// WithoutManagedFields returns a client of the same resource whose reads
// leave metadata.managedFields out of the objects, for callers that never
// look at them (informers, which strip them by default): they are often the
// largest part of an object.
func (r *Resource[T]) WithoutManagedFields() *Resource[T] {
	cp := *r
	if r.codec != nil {
		c := *r.codec
		c.dropManaged = true
		cp.codec = &c
	}
	return &cp
}

// sharing returns a client of the same resource whose reads make objects
// share the strings and small maps they repeat (see intern.go), for an
// informer's read-only cache: never for objects handed to callers who may
// change them.
func (r *Resource[T]) sharing() *Resource[T] {
	cp := *r
	if r.codec != nil && !r.codec.unstructured {
		c := *r.codec
		c.share = true
		cp.codec = &c
	}
	return &cp
}

// GroupVersionResource returns the resource.
func (r *Resource[T]) GroupVersionResource() schema.GroupVersionResource { return r.gvr }

// path is the escaped path of the collection, or of an object and its
// subresource.
func (r *Resource[T]) path(name string, subresource ...string) string {
	var b strings.Builder
	if r.gvr.Group == "" {
		b.WriteString("/api/")
	} else {
		b.WriteString("/apis/")
		b.WriteString(url.PathEscape(r.gvr.Group))
		b.WriteByte('/')
	}
	b.WriteString(url.PathEscape(r.gvr.Version))
	if r.namespace != "" {
		b.WriteString("/namespaces/")
		b.WriteString(url.PathEscape(r.namespace))
	}
	b.WriteByte('/')
	b.WriteString(url.PathEscape(r.gvr.Resource))
	if name != "" {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(name))
	}
	for _, s := range subresource {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

const (
	acceptJSON  = "application/json"
	acceptProto = mediaTypeProtobuf + ", application/json"
	contentJSON = "application/json"
	// The partial forms of metadata-only reads, plain JSON the fallback
	// of a server without them.
	acceptMetadata     = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json"
	acceptMetadataList = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json"
)

// jsonAccept is the Accept header of req asking for JSON.
func (r *Resource[T]) jsonAccept(req *request) string {
	switch {
	case !r.codec.metadata:
		return acceptJSON
	case req.list:
		return acceptMetadataList
	}
	return acceptMetadata
}

// do sends req asking for protobuf when the type allows it, and asks again
// for JSON when the server refuses protobuf: 406, or 415 to a request
// without a body. A 415 to a request with one refuses the body's format
// (a patch type the server does not know), not the answer's.
func (r *Resource[T]) do(ctx context.Context, req *request) (*http.Response, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.jsonOnly.Load() {
		req.accept = r.jsonAccept(req)
		return r.c.send(ctx, req)
	}
	req.accept = acceptProto
	resp, err := r.c.send(ctx, req)
	var se *StatusError
	if errors.As(err, &se) && (se.ErrStatus.Code == http.StatusNotAcceptable || (se.ErrStatus.Code == http.StatusUnsupportedMediaType && len(req.body) == 0)) {
		r.jsonOnly.Store(true)
		req.accept = r.jsonAccept(req)
		return r.c.send(ctx, req)
	}
	return resp, err
}

// object reads a response holding one object.
func (r *Resource[T]) object(req *request, resp *http.Response) (T, error) {
	defer resp.Body.Close()
	var zero T
	ct := resp.Header.Get("Content-Type")
	proto := isProtobuf(ct)
	if !proto && !isJSON(ct) {
		return zero, fmt.Errorf("%s %s: unexpected content type %q", req.verb, req.path, ct)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, int64(r.c.maxEvent)+1))
	if err == nil && len(b) > r.c.maxEvent {
		err = ErrEventTooLarge
	}
	if err != nil {
		return zero, fmt.Errorf("%s %s: reading response: %w", req.verb, req.path, err)
	}
	var obj T
	if proto {
		obj, err = r.codec.decodeProto(b)
	} else {
		obj, err = r.codec.decodeJSON(r.codec.decoder(), b)
	}
	if err != nil {
		return zero, fmt.Errorf("%s %s: decoding response: %w", req.verb, req.path, err)
	}
	return obj, nil
}

func isJSON(contentType string) bool {
	return strings.HasPrefix(strings.TrimSpace(contentType), "application/json")
}

func nameRequired(verb, name string) error {
	if name == "" {
		return fmt.Errorf("client: %s: %w", verb, apierrors.NewBadRequest("object name is empty"))
	}
	return nil
}

// Get reads the object called name.
func (r *Resource[T]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	if err := nameRequired("get", name); err != nil {
		var zero T
		return zero, err
	}
	return r.send(ctx, &request{verb: http.MethodGet, path: r.path(name), query: getQuery(opts)})
}

// List reads one page of the collection: opts.Limit objects at most, from
// opts.Continue on.
func (r *Resource[T]) List(ctx context.Context, opts metav1.ListOptions) (*cache.List[T], error) {
	opts.Watch = false
	req := &request{verb: http.MethodGet, path: r.path(""), query: listQuery(opts), list: true}
	resp, err := r.do(ctx, req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var l *cache.List[T]
	switch ct := resp.Header.Get("Content-Type"); {
	case isProtobuf(ct):
		l, err = decodeProtoList(r.codec, resp.Body, r.c.maxEvent)
	case isJSON(ct):
		l, err = decodeJSONList(r.codec, resp.Body, r.c.maxEvent)
	default:
		err = fmt.Errorf("unexpected content type %q", ct)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.verb, r.c.url(req), err)
	}
	return l, nil
}

// ListAll reads every page of the collection, following the continue
// tokens, and returns the items of all of them with the resourceVersion of
// the first. opts.Limit is the page size.
func (r *Resource[T]) ListAll(ctx context.Context, opts metav1.ListOptions) (*cache.List[T], error) {
	all, err := r.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for page := 2; all.Continue != ""; page++ {
		next := metav1.ListOptions{LabelSelector: opts.LabelSelector, FieldSelector: opts.FieldSelector,
			ShardSelector: opts.ShardSelector, Limit: opts.Limit, Continue: all.Continue}
		l, err := r.List(ctx, next)
		if err != nil {
			return nil, fmt.Errorf("list page %d: %w", page, err)
		}
		all.Items = append(all.Items, l.Items...)
		all.Continue, all.RemainingItemCount = l.Continue, l.RemainingItemCount
	}
	return all, nil
}

// Watch opens a watch of the collection with opts (resourceVersion,
// selectors, bookmarks, sendInitialEvents for a streaming list). The
// stream lasts until ctx is done, Stop is called, or the server ends it.
func (r *Resource[T]) Watch(ctx context.Context, opts metav1.ListOptions) (cache.Watcher[T], error) {
	opts.Watch = true
	req := &request{verb: http.MethodGet, path: r.path(""), query: listQuery(opts)}
	ctx, cancel := context.WithCancel(ctx)
	resp, err := r.do(ctx, req)
	if err != nil {
		cancel()
		return nil, err
	}
	w := &watcher[T]{body: resp.Body, cancel: cancel}
	codec := r.codec
	if codec.share {
		// Events: the sharing decoding gives for free, not the interning
		// after it, which would cost a good part of the event rate.
		c := *codec
		c.shareDecodedOnly = true
		codec = &c
	}
	var dec eventDecoder[T]
	switch ct := resp.Header.Get("Content-Type"); {
	case isProtobuf(ct):
		dec = newProtoEvents(codec, resp.Body, r.c.maxEvent)
	case isJSON(ct):
		dec = newJSONEvents(codec, resp.Body, r.c.maxEvent)
	default:
		w.release()
		return nil, fmt.Errorf("%s %s: unexpected content type %q", req.verb, r.c.url(req), ct)
	}
	w.ahead = startReadAhead(dec)
	w.dec = w.ahead
	return w, nil
}

// write sends obj, or data, as the body of a write and reads the object
// the server answers with.
func (r *Resource[T]) write(ctx context.Context, verb, path string, q url.Values, body []byte, contentType string) (T, error) {
	return r.send(ctx, &request{verb: verb, path: path, query: q, body: body, contentType: contentType})
}

// send makes req and reads the object the server answers with, which the
// controller's stale-read protection records (RecordWrite).
func (r *Resource[T]) send(ctx context.Context, req *request) (T, error) {
	resp, err := r.do(ctx, req)
	if err != nil {
		var zero T
		return zero, err
	}
	obj, err := r.object(req, resp)
	if err == nil {
		RecordWrite(ctx, r.gvr.GroupResource(), obj)
	}
	return obj, err
}

func (r *Resource[T]) encode(obj T) ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("client: encoding %s: %w", r.codec.elem, err)
	}
	return b, nil
}

// Create creates obj, in the resource's namespace, and returns it as the
// server stored it.
func (r *Resource[T]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	b, err := r.encode(obj)
	if err != nil {
		return *new(T), err
	}
	return r.write(ctx, http.MethodPost, r.path(""), createQuery(opts), b, contentJSON)
}

// Update replaces the object named by obj, which must carry the
// resourceVersion it was read at to be refused with a Conflict when it
// changed since.
func (r *Resource[T]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	return r.update(ctx, obj, opts)
}

// UpdateStatus replaces the status of the object named by obj.
func (r *Resource[T]) UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	return r.update(ctx, obj, opts, "status")
}

func (r *Resource[T]) update(ctx context.Context, obj T, opts metav1.UpdateOptions, sub ...string) (T, error) {
	if err := nameRequired("update", obj.GetName()); err != nil {
		return *new(T), err
	}
	b, err := r.encode(obj)
	if err != nil {
		return *new(T), err
	}
	return r.write(ctx, http.MethodPut, r.path(obj.GetName(), sub...), updateQuery(opts), b, contentJSON)
}

// Patch applies data, a patch of type pt (JSON, merge, strategic merge or
// apply), to the object called name, or to its subresource.
func (r *Resource[T]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresource ...string) (T, error) {
	if err := nameRequired("patch", name); err != nil {
		return *new(T), err
	}
	return r.write(ctx, http.MethodPatch, r.path(name, subresource...), patchQuery(opts), data, string(pt))
}

// Delete deletes the object called name, with opts' preconditions (uid,
// resourceVersion), propagation policy and grace period.
func (r *Resource[T]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	if err := nameRequired("delete", name); err != nil {
		return err
	}
	if r.err != nil {
		return r.err
	}
	opts.Kind, opts.APIVersion = "DeleteOptions", "v1"
	b, err := json.Marshal(opts)
	if err != nil {
		return fmt.Errorf("client: encoding delete options: %w", err)
	}
	req := &request{verb: http.MethodDelete, path: r.path(name), body: b, contentType: contentJSON}
	resp, err := r.do(ctx, req)
	if err != nil {
		return err
	}
	// The body is the object as deleted (a pod, or anything a grace
	// period or finalizers keep for a while), or a Status. The object is
	// recorded as the write it is (RecordWrite), so that a controller's
	// next sync waits until its informer shows the deletion rather than
	// delete again; a Status decodes to no object of that name.
	if obj, err := r.object(req, resp); err == nil && !isNilPointer(obj) && obj.GetName() == name {
		RecordWrite(ctx, r.gvr.GroupResource(), obj)
	}
	return nil
}
