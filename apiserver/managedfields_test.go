package apiserver

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/listwatch/listwatch/apiserver/internal/decode"
	"github.com/listwatch/listwatch/apiserver/internal/registry"
)

// goldenBodies are the objects the golden cases send to built-in
// resources (POST and PUT bodies naming their kind), by resource: what
// clients write, valid or not.
func goldenBodies(t *testing.T) map[*resource][][]byte {
	t.Helper()
	files, err := filepath.Glob("../test/golden/testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden data: %v", err)
	}
	byGVK := map[string]*resource{}
	for _, r := range registry.Builtins() {
		byGVK[r.APIVersion()+"/"+r.GVK.Kind] = r
	}
	out := map[*resource][][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var golden struct {
			Steps []struct {
				Request struct {
					Method string          `json:"method"`
					Body   json.RawMessage `json:"body"`
				} `json:"request"`
			} `json:"steps"`
		}
		if err := json.Unmarshal(data, &golden); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, s := range golden.Steps {
			if s.Request.Method != "POST" && s.Request.Method != "PUT" {
				continue
			}
			var tm metav1.TypeMeta
			if json.Unmarshal(s.Request.Body, &tm) != nil {
				continue
			}
			if r := byGVK[tm.APIVersion+"/"+tm.Kind]; r != nil {
				out[r] = append(out[r], s.Request.Body)
			}
		}
	}
	return out
}

// goTypeConverter records the same managedFields as kube's own
// TypeConverter, and fails where it fails, on every object the golden
// cases write to a built-in resource: created (over the empty object) and
// updated (over the object as stored, unstructured, with a label added).
func TestGoTypeConverterAsKube(t *testing.T) {
	models, err := registry.BuiltinModels()
	if err != nil {
		t.Fatal(err)
	}
	kubeTC, err := managedfields.NewTypeConverter(models, false)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := registry.BuiltinTypeConverter()
	if err != nil {
		t.Fatal(err)
	}
	bodies := goldenBodies(t)
	if len(bodies) < 40 {
		t.Fatalf("golden bodies of %d resources, want the built-ins'", len(bodies))
	}
	checked := 0
	for res, objs := range bodies {
		kubeFM, err := registry.NewBuiltinFieldManager(res, "", kubeTC)
		if err != nil {
			t.Fatal(err)
		}
		ourFM, err := registry.NewBuiltinFieldManager(res, "", ours)
		if err != nil {
			t.Fatal(err)
		}
		for _, body := range objs {
			_, obj, _, err := decode.Typed(res, body, true)
			if err != nil {
				continue // refused before the field manager
			}
			res.Default(obj)
			seen, err := res.Kube.ThroughHub(obj)
			if err != nil {
				continue
			}
			live := res.NewEmpty()
			want, wantErr := managedUpdate(kubeFM, live, seen.DeepCopyObject())
			got, gotErr := managedUpdate(ourFM, live, seen.DeepCopyObject())
			if (wantErr != nil) != (gotErr != nil) || !reflect.DeepEqual(got, want) {
				t.Errorf("%s create of %s:\n got %v (%v)\nwant %v (%v)", res.GVR(), body, got, gotErr, want, wantErr)
			}
			checked++

			// An update: the stored object (unstructured) to the same
			// with a label more.
			stored, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(seen)
			if err != nil {
				t.Fatal(err)
			}
			cur := &unstructured.Unstructured{Object: stored}
			cur.SetManagedFields(want)
			next := seen.DeepCopyObject()
			acc, err := meta.Accessor(next)
			if err != nil {
				t.Fatal(err)
			}
			labels := acc.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			labels["changed"] = "yes"
			acc.SetLabels(labels)
			want, wantErr = managedUpdate(kubeFM, cur.DeepCopy(), next.DeepCopyObject())
			got, gotErr = managedUpdate(ourFM, cur.DeepCopy(), next.DeepCopyObject())
			if (wantErr != nil) != (gotErr != nil) || !reflect.DeepEqual(got, want) {
				t.Errorf("%s update of %s:\n got %v (%v)\nwant %v (%v)", res.GVR(), body, got, gotErr, want, wantErr)
			}
		}
	}
	if checked < 300 {
		t.Errorf("%d objects checked, want the golden cases' (over 300)", checked)
	}
}

// managedUpdate is the managedFields fm records for newObj written over
// live by manager "m", without their times.
func managedUpdate(fm *managedfields.FieldManager, live, newObj k8sruntime.Object) ([]metav1.ManagedFieldsEntry, error) {
	out, err := fm.Update(live, newObj, "m")
	if err != nil {
		return nil, err
	}
	acc, err := meta.Accessor(out)
	if err != nil {
		return nil, err
	}
	entries := acc.GetManagedFields()
	for i := range entries {
		entries[i].Time = nil
	}
	return entries, nil
}
