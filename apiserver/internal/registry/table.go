package registry

import (
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
)

// TablePrinter is the meta.k8s.io Table form of one resource's objects:
// its columns and the row of one object.
type TablePrinter struct {
	Columns []metav1.TableColumnDefinition
	// Row returns the cells (one per column) and conditions of an
	// object's row; it may fail on an object the typed form cannot hold.
	Row func(u *unstructured.Unstructured) (metav1.TableRow, error)
}

// defaultColumns are Name and Age, the columns of a custom resource
// without additionalPrinterColumns.
var defaultColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name must be unique within a namespace. Cannot be updated."},
	{Name: "Age", Type: "string", Description: "CreationTimestamp is the time the object was created, shown as the time since then."},
}

// TablePrinter returns the Table form of r: kube-apiserver's own printer
// for a built-in resource, the CustomResourceDefinition's
// additionalPrinterColumns by apiextensions-apiserver's Table convertor for
// a custom resource, and Name and Age for one with neither.
func (r *Resource) TablePrinter() (TablePrinter, error) {
	switch {
	case r.CR != nil:
		columns, err := r.CR.Columns()
		if err != nil {
			return TablePrinter{}, apierrors.NewInternalError(err)
		}
		return TablePrinter{Columns: columns, Row: r.CR.Row}, nil
	case r.Kube != nil:
		p, err := r.Printer()
		if err != nil {
			return TablePrinter{}, apierrors.NewInternalError(err)
		}
		return TablePrinter{Columns: p.Columns(), Row: p.Row}, nil
	}
	return TablePrinter{Columns: defaultColumns, Row: func(u *unstructured.Unstructured) (metav1.TableRow, error) {
		return metav1.TableRow{Cells: []any{u.GetName(), since(u.GetCreationTimestamp().Time)}}, nil
	}}, nil
}

// since is a duration as kubectl prints ages.
func since(t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t))
}
