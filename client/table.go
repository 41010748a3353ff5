package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
)

// acceptTable asks for the server's printed form of a resource, as kubectl
// get does: a meta.k8s.io Table, v1 or v1beta1.
const acceptTable = "application/json;as=Table;v=v1;g=meta.k8s.io, application/json;as=Table;v=v1beta1;g=meta.k8s.io"

// ErrNoTable is a server that answered a Table request with something
// other than a Table: it does not print the resource.
var ErrNoTable = errors.New("the server did not answer with a Table")

// Tables reads one resource in one namespace (every namespace, or a
// cluster-scoped resource, when ""), as the server prints it for people:
// meta.k8s.io/v1 Tables, whose columns the server chooses, as kubectl get
// shows them. Columns of priority 0 are the default view; the others are
// those of -o wide. Each row carries the object's metadata (a
// PartialObjectMetadata in Row.Object), or the whole object with
// IncludeObject. Cells keep their JSON numbers as json.Number.
type Tables struct {
	c         *Client
	gvr       schema.GroupVersionResource
	namespace string
	// IncludeObject is what each row carries: Metadata (the default),
	// Object or None.
	IncludeObject metav1.IncludeObjectPolicy
}

// NewTables returns the Table reader of resource gvr in namespace. A
// cluster-scoped built-in resource ignores namespace.
func NewTables(c *Client, gvr schema.GroupVersionResource, namespace string) *Tables {
	_, namespace, _ = builtin(gvr, namespace)
	return &Tables{c: c, gvr: gvr, namespace: namespace, IncludeObject: metav1.IncludeMetadata}
}

func (t *Tables) path(name string) string {
	r := Resource[cache.Object]{gvr: t.gvr, namespace: t.namespace}
	return r.path(name)
}

func (t *Tables) query(q url.Values) url.Values {
	if q == nil {
		q = url.Values{}
	}
	if t.IncludeObject != "" {
		q.Set("includeObject", string(t.IncludeObject))
	}
	return q
}

// List reads one page of the collection as a Table.
func (t *Tables) List(ctx context.Context, opts metav1.ListOptions) (*metav1.Table, error) {
	opts.Watch = false
	return t.read(ctx, &request{verb: http.MethodGet, path: t.path(""), query: t.query(listQuery(opts)), accept: acceptTable, list: true})
}

// Get reads the object called name as a Table of one row.
func (t *Tables) Get(ctx context.Context, name string) (*metav1.Table, error) {
	if err := nameRequired("get", name); err != nil {
		return nil, err
	}
	return t.read(ctx, &request{verb: http.MethodGet, path: t.path(name), query: t.query(nil), accept: acceptTable})
}

func (t *Tables) read(ctx context.Context, req *request) (*metav1.Table, error) {
	resp, err := t.c.send(ctx, req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, int64(t.c.maxEvent)+1))
	if err == nil && len(b) > t.c.maxEvent {
		err = ErrEventTooLarge
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading response: %w", req.verb, req.path, err)
	}
	tbl, err := decodeTable(b)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.verb, req.path, err)
	}
	return tbl, nil
}

// decodeTable decodes a Table, its cells' numbers as json.Number so that
// an integer prints as one.
func decodeTable(b []byte) (*metav1.Table, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var tbl metav1.Table
	if err := d.Decode(&tbl); err != nil {
		return nil, fmt.Errorf("decoding Table: %w", err)
	}
	if tbl.Kind != "Table" {
		return nil, fmt.Errorf("%w: got %s %q", ErrNoTable, tbl.APIVersion, tbl.Kind)
	}
	return &tbl, nil
}

// TableEvent is one event of a Table watch: the changed objects' rows in a
// Table (the first event's carries the column definitions, the later ones'
// usually none), or the Status of an ERROR event.
type TableEvent struct {
	Type   cache.EventType
	Table  *metav1.Table
	Status *metav1.Status
}

// TableWatcher reads a Table watch's events.
type TableWatcher struct {
	body   io.ReadCloser
	dec    *json.Decoder
	cancel context.CancelFunc
}

// Watch opens a watch of the collection whose events carry Tables. It
// lasts until ctx is done, Stop is called, or the server ends it.
func (t *Tables) Watch(ctx context.Context, opts metav1.ListOptions) (*TableWatcher, error) {
	opts.Watch = true
	ctx, cancel := context.WithCancel(ctx)
	resp, err := t.c.send(ctx, &request{verb: http.MethodGet, path: t.path(""), query: t.query(listQuery(opts)), accept: acceptTable})
	if err != nil {
		cancel()
		return nil, err
	}
	if ct := resp.Header.Get("Content-Type"); !isJSON(ct) {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("watch %s: unexpected content type %q", t.gvr, ct)
	}
	d := json.NewDecoder(resp.Body)
	d.UseNumber()
	return &TableWatcher{body: resp.Body, dec: d, cancel: cancel}, nil
}

// Next returns the next event, io.EOF when the server ended the stream
// cleanly.
func (w *TableWatcher) Next() (TableEvent, error) {
	var raw struct {
		Type   string          `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	if err := w.dec.Decode(&raw); err != nil {
		if err == io.EOF || errors.Is(err, context.Canceled) {
			return TableEvent{}, io.EOF
		}
		return TableEvent{}, fmt.Errorf("reading watch event: %w", err)
	}
	typ, err := eventType(raw.Type)
	if err != nil {
		return TableEvent{}, err
	}
	ev := TableEvent{Type: typ}
	if typ == cache.EventError {
		var s metav1.Status
		if err := json.Unmarshal(raw.Object, &s); err != nil {
			return ev, fmt.Errorf("ERROR event: %w", err)
		}
		ev.Status = &s
		return ev, nil
	}
	if typ == cache.EventBookmark {
		return ev, nil
	}
	if ev.Table, err = decodeTable(raw.Object); err != nil {
		return ev, fmt.Errorf("%s event: %w", typ, err)
	}
	return ev, nil
}

// Stop ends the watch.
func (w *TableWatcher) Stop() {
	w.cancel()
	_ = w.body.Close()
}

// RowMetadata returns the object metadata a row carries (IncludeObject
// Metadata or Object), or nil when it carries none.
func RowMetadata(row metav1.TableRow) *metav1.ObjectMeta {
	raw := row.Object.Raw
	if len(raw) == 0 {
		return nil
	}
	var obj struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || strings.TrimSpace(string(raw)) == "null" {
		return nil
	}
	return &obj.Metadata
}
