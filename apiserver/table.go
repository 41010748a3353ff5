package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/apiserver/internal/respond"
)

// Server-side printing: a client that accepts
// application/json;as=Table;g=meta.k8s.io;v=v1 (kubectl get) receives a
// meta.k8s.io Table whose columns are those kube-apiserver prints for the
// resource, so that kubectl shows the same output against this server.
// Columns of priority 1 are the extra ones of `-o wide`.

// tableVersion is the meta.k8s.io version a client asked the Table in.
type tableVersion string

type includeObject string

const (
	includeNone     includeObject = "None"
	includeMetadata includeObject = "Metadata"
	includeObjectIt includeObject = "Object"
)

func parseIncludeObject(r *http.Request) (includeObject, error) {
	switch v := includeObject(r.URL.Query().Get("includeObject")); v {
	case "":
		return includeMetadata, nil
	case includeNone, includeMetadata, includeObjectIt:
		return v, nil
	default:
		return "", respond.BadRequest("includeObject must be one of None, Metadata or Object, not %q", v)
	}
}

// tabler builds Tables for one request.
type tabler struct {
	p       registry.TablePrinter
	version tableVersion
	include includeObject
}

func newTabler(r *http.Request, res *resource, v tableVersion) (*tabler, error) {
	inc, err := parseIncludeObject(r)
	if err != nil {
		return nil, err
	}
	p, err := res.TablePrinter()
	if err != nil {
		return nil, err
	}
	return &tabler{p: p, version: v, include: inc}, nil
}

// row is the table row of one object with the object embedded as asked.
func (t *tabler) row(u *unstructured.Unstructured) (metav1.TableRow, error) {
	row, err := t.p.Row(u)
	if err != nil {
		return metav1.TableRow{}, apierrors.NewInternalError(fmt.Errorf("printing %s %s: %w", u.GetKind(), u.GetName(), err))
	}
	var embed any
	switch t.include {
	case includeObjectIt:
		embed = u.Object
	case includeMetadata:
		embed = map[string]any{
			"kind":       "PartialObjectMetadata",
			"apiVersion": "meta.k8s.io/" + string(t.version),
			"metadata":   u.Object["metadata"],
		}
	}
	if embed != nil {
		raw, err := json.Marshal(embed)
		if err != nil {
			return row, apierrors.NewInternalError(err)
		}
		row.Object = runtime.RawExtension{Raw: raw}
	}
	return row, nil
}

// table renders objects; withColumns false leaves out the column
// definitions (watch events after the first, as kube-apiserver sends).
func (t *tabler) table(items []*unstructured.Unstructured, md metav1.ListMeta, withColumns bool) (*metav1.Table, error) {
	tbl := &metav1.Table{
		TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/" + string(t.version)},
		ListMeta: md,
		Rows:     []metav1.TableRow{},
	}
	if withColumns {
		tbl.ColumnDefinitions = t.p.Columns
	}
	for _, u := range items {
		row, err := t.row(u)
		if err != nil {
			return nil, err
		}
		tbl.Rows = append(tbl.Rows, row)
	}
	return tbl, nil
}

// listMeta reads the list metadata of a <Kind>List built by listObject.
func listMeta(u *unstructured.Unstructured) metav1.ListMeta {
	md := metav1.ListMeta{ResourceVersion: u.GetResourceVersion(), Continue: u.GetContinue()}
	md.RemainingItemCount = u.GetRemainingItemCount()
	return md
}

// listItems returns the items of a list built by listObject, or the
// object itself.
func listItems(u *unstructured.Unstructured) []*unstructured.Unstructured {
	items, ok := u.Object["items"].([]any)
	if !ok {
		return []*unstructured.Unstructured{u}
	}
	out := make([]*unstructured.Unstructured, 0, len(items))
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out
}

// writeTable answers a get or list with its Table.
func writeTable(w http.ResponseWriter, r *http.Request, res *resource, v tableVersion, code int, u *unstructured.Unstructured) error {
	t, err := newTabler(r, res, v)
	if err != nil {
		return err
	}
	md := metav1.ListMeta{ResourceVersion: u.GetResourceVersion()}
	if _, isList := u.Object["items"]; isList {
		md = listMeta(u)
	}
	tbl, err := t.table(listItems(u), md, true)
	if err != nil {
		return err
	}
	body, err := json.Marshal(tbl)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	w.Header().Set("Content-Type", respond.MediaJSON)
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
	return nil
}
