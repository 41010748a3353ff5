package cachetest

import (
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
)

// Option configures a Source built by New.
type Option[T cache.Object] func(*config[T])

type config[T cache.Object] struct {
	newObject         func() T
	fields            map[string]func(T) string
	resource          schema.GroupResource
	returnWatchErrors bool
	unpagedRV0        bool
}

// WithNewObject sets the constructor of the empty objects that carry
// BOOKMARK events. Without it, a pointer type T gets a new zero value of its
// element type; any other T has no bookmarks (see Source.Bookmark).
func WithNewObject[T cache.Object](newObject func() T) Option[T] {
	return func(c *config[T]) { c.newObject = newObject }
}

// WithField makes field selectors accept name (for example "spec.nodeName"),
// matched against what extract returns. metadata.name and metadata.namespace
// are always supported; registering either replaces the built-in extractor.
func WithField[T cache.Object](name string, extract func(T) string) Option[T] {
	return func(c *config[T]) {
		if extract != nil {
			c.fields[name] = extract
		}
	}
}

// WithResource names the resource in the errors the Source returns (NotFound,
// AlreadyExists, Conflict). The default is the lowercased type name plus "s",
// for example "pods".
func WithResource[T cache.Object](gr schema.GroupResource) Option[T] {
	return func(c *config[T]) { c.resource = gr }
}

// ReturnWatchErrors makes Watch return the 410 Expired (and "too large
// resource version") errors directly. By default Watch succeeds and the
// stream's first and only event is an ERROR event carrying the Status, which
// is what a real API server does once the HTTP response has started.
func ReturnWatchErrors[T cache.Object]() Option[T] {
	return func(c *config[T]) { c.returnWatchErrors = true }
}

// UnpagedRV0 makes lists with resourceVersion "0" ignore limit and return
// every item in one page, as an API server serving from its watch cache did
// before it supported paging there. Clients must cope with both behaviours.
func UnpagedRV0[T cache.Object]() Option[T] {
	return func(c *config[T]) { c.unpagedRV0 = true }
}

func defaultConfig[T cache.Object]() config[T] {
	c := config[T]{
		fields: map[string]func(T) string{
			"metadata.name":      func(o T) string { return o.GetName() },
			"metadata.namespace": func(o T) string { return o.GetNamespace() },
		},
	}
	typ := reflect.TypeFor[T]()
	if typ.Kind() == reflect.Pointer {
		elem := typ.Elem()
		c.newObject = func() T {
			obj, _ := reflect.New(elem).Interface().(T)
			return obj
		}
		c.resource = schema.GroupResource{Resource: strings.ToLower(elem.Name()) + "s"}
	} else {
		c.resource = schema.GroupResource{Resource: strings.ToLower(typ.Name()) + "s"}
	}
	return c
}
