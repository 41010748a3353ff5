package kube

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"k8s.io/kubernetes/pkg/printers"
	printersinternal "k8s.io/kubernetes/pkg/printers/internalversion"
)

// tables are kube-apiserver's printers (the columns of `kubectl get`),
// which print internal objects.
var tables = printers.NewTableGenerator().With(printersinternal.AddHandlers)

// Printer is the Table form of a resource as kube-apiserver prints it:
// its printer's columns and cells, or, for a resource without one, the
// default Name and Created At.
type Printer struct {
	rules    *Rules
	fallback rest.TableConvertor
	// table is the resource's own Table of internal objects, if any.
	table   rest.TableConvertor
	columns []metav1.TableColumnDefinition
}

// Printer returns the resource's Table form.
func (k *Rules) Printer() (*Printer, error) {
	in, err := scheme.New(k.gvk.GroupKind().WithVersion(runtime.APIVersionInternal))
	if err != nil {
		return nil, fmt.Errorf("no internal type for %v: %w", k.gvk, err)
	}
	p := &Printer{rules: k}
	t, err := tables.GenerateTable(in, printers.GenerateOptions{Wide: true})
	if k.entry.table != nil {
		p.table = k.entry.table
		t, err = p.table.ConvertToTable(context.Background(), in, nil)
	}
	if err != nil {
		// No printer for the type: the generic store's default.
		p.fallback = rest.NewDefaultTableConvertor(k.gvr.GroupResource())
		t, err = p.fallback.ConvertToTable(context.Background(), &unstructured.Unstructured{Object: map[string]any{}}, nil)
		if err != nil {
			return nil, fmt.Errorf("table of %v: %w", k.gvr, err)
		}
	}
	p.columns = t.ColumnDefinitions
	return p, nil
}

// Columns are the Table's columns, those of priority 1 for `-o wide` only.
func (p *Printer) Columns() []metav1.TableColumnDefinition { return p.columns }

// Row returns u's cells and conditions; the caller sets the row's object.
func (p *Printer) Row(u *unstructured.Unstructured) (metav1.TableRow, error) {
	var t *metav1.Table
	var err error
	if p.fallback != nil {
		t, err = p.fallback.ConvertToTable(context.Background(), u, &metav1.TableOptions{NoHeaders: true})
	} else {
		var in runtime.Object
		if in, err = p.rules.internal(u); err != nil {
			return metav1.TableRow{}, err
		}
		if p.table != nil {
			t, err = p.table.ConvertToTable(context.Background(), in, &metav1.TableOptions{NoHeaders: true})
		} else {
			t, err = tables.GenerateTable(in, printers.GenerateOptions{Wide: true, NoHeaders: true})
		}
	}
	if err != nil {
		return metav1.TableRow{}, fmt.Errorf("table row of %s: %w", u.GetName(), err)
	}
	if len(t.Rows) != 1 {
		return metav1.TableRow{}, fmt.Errorf("table row of %s: the printer gave %d rows", u.GetName(), len(t.Rows))
	}
	return metav1.TableRow{Cells: t.Rows[0].Cells, Conditions: t.Rows[0].Conditions}, nil
}
