package client

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client/internal/jsondecode"
	"github.com/listwatch/listwatch/client/internal/protodecode"
)

// protoUnmarshaler is what the generated code of every built-in type
// provides, and what reading protobuf needs.
type protoUnmarshaler interface {
	Unmarshal(data []byte) error
}

// codec makes and decodes the objects of one resource as T.
type codec[T cache.Object] struct {
	elem reflect.Type // what T points to
	// apiVersion and kind are those every object must have; kind is empty
	// for unstructured objects, which may be of any kind.
	apiVersion, kind string
	proto            bool // T can be read from protobuf
	unstructured     bool // T is *unstructured.Unstructured
	// metadata: the objects are *metav1.PartialObjectMetadata, read from
	// objects of any kind.
	metadata bool
	// dropManaged leaves metadata.managedFields out of decoded objects.
	dropManaged bool
	// share makes decoded objects share the strings and small maps they
	// repeat of objects decoded before (see intern.go): only for objects
	// bound for an informer's read-only cache.
	share bool
	// shareDecodedOnly limits share to what costs nothing after decoding
	// (the values spelled alike in the bytes): for watch events, whose
	// rate matters more than the strings of the objects they replace.
	// Their protobuf is read by protodecode, whose objects hold their
	// strings in one block each: a quarter of the generated code's
	// allocations, and no walk of the fields ahead of it.
	shareDecodedOnly bool
}

// decoder returns a JSON decoder for one stream or response.
func (c *codec[T]) decoder() *jsondecode.Decoder {
	return &jsondecode.Decoder{SkipManagedFields: c.dropManaged, Share: c.share}
}

func newCodec[T cache.Object](gv schema.GroupVersion) (*codec[T], error) {
	return newCodecOf[T](gv, reflect.TypeFor[T]())
}

// Go types the codec gives a meaning of their own.
var (
	unstructuredType = reflect.TypeFor[*unstructured.Unstructured]()
	metadataType     = reflect.TypeFor[*metav1.PartialObjectMetadata]()
)

// metadataGVK is the kind of the objects a metadata-only read returns.
var metadataGVK = metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata")

// newCodecOf returns the codec that makes objects of Go type t, handed out
// as T: t itself, or an interface t implements (cache.Object, when the
// type is known only at run time, from the resource registry).
func newCodecOf[T cache.Object](gv schema.GroupVersion, t reflect.Type) (*codec[T], error) {
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("client: object type %v is not a pointer to a struct", t)
	}
	if held := reflect.TypeFor[T](); !t.AssignableTo(held) {
		return nil, fmt.Errorf("client: object type %s is not a %s", t, held)
	}
	c := &codec[T]{elem: t.Elem(), apiVersion: gv.String()}
	switch t {
	case unstructuredType:
		c.unstructured = true
		return c, nil
	case metadataType:
		// Any kind, read as JSON only: the server's partial form when it
		// has one, the whole object otherwise, of which only the metadata
		// is kept.
		c.metadata = true
		return c, nil
	}
	c.kind = t.Elem().Name()
	_, c.proto = reflect.New(c.elem).Interface().(protoUnmarshaler)
	return c, nil
}

// new returns a new, empty object.
func (c *codec[T]) new() T {
	return reflect.New(c.elem).Interface().(T)
}

// errWrongKind is an object that is not of the resource's kind.
var errWrongKind = errors.New("object of the wrong kind")

// setKind checks the kind an object says it has, and gives one that says
// nothing (list items, protobuf objects) that of its resource, so that
// objects read from JSON and protobuf are alike.
func (c *codec[T]) setKind(obj T, apiVersion, kind string) error {
	if c.unstructured {
		return nil
	}
	if c.metadata {
		if tm, ok := obj.GetObjectKind().(*metav1.TypeMeta); ok {
			tm.APIVersion, tm.Kind = metadataGVK.GroupVersion().String(), metadataGVK.Kind
		}
		return nil
	}
	if kind != "" && kind != c.kind || apiVersion != "" && apiVersion != c.apiVersion {
		return fmt.Errorf("%w: %s %s, expected %s %s", errWrongKind, apiVersion, kind, c.apiVersion, c.kind)
	}
	if tm, ok := obj.GetObjectKind().(*metav1.TypeMeta); ok {
		tm.APIVersion, tm.Kind = c.apiVersion, c.kind
	}
	return nil
}

// decodeJSON decodes the JSON object b, with d for typed objects.
func (c *codec[T]) decodeJSON(d *jsondecode.Decoder, b []byte) (T, error) {
	var zero T
	if isNull(b) {
		return zero, errors.New("null object")
	}
	if c.unstructured {
		// Unstructured objects hold integers as int64, as the API
		// machinery's decoder makes them.
		var m map[string]any
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(b, &m); err != nil {
			return zero, err
		}
		if c.dropManaged {
			unstructured.RemoveNestedField(m, "metadata", "managedFields")
		}
		return any(&unstructured.Unstructured{Object: m}).(T), nil
	}
	obj := c.new()
	if err := d.Unmarshal(b, obj); err != nil {
		return zero, err
	}
	if err := c.checkKind(obj); err != nil {
		return zero, err
	}
	if c.share && !c.shareDecodedOnly {
		internObject(obj, false)
	}
	return obj, nil
}

// checkKind checks the kind a typed object read from JSON says it has, and
// sets it when it says none.
func (c *codec[T]) checkKind(obj T) error {
	var av, k string
	if tm, ok := obj.GetObjectKind().(*metav1.TypeMeta); ok {
		av, k = tm.APIVersion, tm.Kind
	} else {
		av, k = obj.GetObjectKind().GroupVersionKind().ToAPIVersionAndKind()
	}
	return c.setKind(obj, av, k)
}

func isNull(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) == 0 || b[0] == 'n'
}

// decodeProto decodes an object in the Kubernetes protobuf envelope.
func (c *codec[T]) decodeProto(b []byte) (T, error) {
	var zero T
	raw, tm, err := unwrapEnvelope(b)
	if err != nil {
		return zero, err
	}
	return c.decodeProtoRaw(raw, tm)
}

// protoScratch holds the buffers objects are rewritten into without their
// managedFields; the generated code copies what it keeps out of them.
var protoScratch = sync.Pool{New: func() any { return new([]byte) }}

// decodeProtoRaw decodes an object's message, of the type tm.
func (c *codec[T]) decodeProtoRaw(raw []byte, tm typeMeta) (T, error) {
	obj, err := c.decodeProtoUninterned(raw, tm)
	if err == nil && c.share && !c.shareDecodedOnly {
		internObject(obj, true)
	}
	return obj, err
}

// decodeProtoUninterned is decodeProtoRaw but for the sharing of strings
// and maps with other objects (internObject), which is left to the caller.
func (c *codec[T]) decodeProtoUninterned(raw []byte, tm typeMeta) (T, error) {
	var pd protodecode.Decoder
	return c.decodeProtoWith(&pd, raw, tm)
}

// decodeProtoWith is decodeProtoUninterned with pd for the objects bound
// for an informer's cache, which protodecode reads: a goroutine decoding
// many objects keeps one, which lets them share a little memory.
func (c *codec[T]) decodeProtoWith(pd *protodecode.Decoder, raw []byte, tm typeMeta) (T, error) {
	var zero T
	if !c.proto {
		return zero, fmt.Errorf("client: %s cannot be read from protobuf", c.elem)
	}
	if tm.Kind == "" {
		return zero, fmt.Errorf("%w: the envelope names no kind", errWrongKind)
	}
	obj := c.new()
	if err := c.setKind(obj, tm.APIVersion, tm.Kind); err != nil {
		return zero, err
	}
	if c.share {
		// The containers' resources shared as they are decoded; the
		// strings of the items of lists each of their own, since
		// internObject replaces most of them afterwards, while the
		// objects of watch events keep theirs in one block.
		pd.SkipManagedFields, pd.Memo, pd.OwnStrings = c.dropManaged, resourcesMemo, !c.shareDecodedOnly
		if err := pd.Unmarshal(raw, obj); err != nil {
			return zero, fmt.Errorf("decoding %s: %w", c.kind, err)
		}
		return obj, nil
	}
	unmarshal := any(obj).(protoUnmarshaler).Unmarshal
	decoded := false
	if c.dropManaged {
		bp := protoScratch.Get().(*[]byte)
		defer protoScratch.Put(bp)
		before, meta, after, found, err := leanParts(raw, *bp)
		if err != nil {
			return zero, fmt.Errorf("decoding %s: %w", c.kind, err)
		}
		if found {
			if cap(meta) <= 1<<20 {
				*bp = meta[:0] // grown: keep it for the next object
			}
			for _, part := range [3][]byte{before, meta, after} {
				if len(part) == 0 {
					continue
				}
				if err := unmarshal(part); err != nil {
					return zero, fmt.Errorf("decoding %s: %w", c.kind, err)
				}
			}
			decoded = true
		}
	}
	if !decoded {
		if err := unmarshal(raw); err != nil {
			return zero, fmt.Errorf("decoding %s: %w", c.kind, err)
		}
	}
	if c.dropManaged {
		obj.SetManagedFields(nil)
	}
	return obj, nil
}
