package apiserver

import (
	"testing"

	"github.com/listwatch/listwatch/apiserver/internal/decode"
	"github.com/listwatch/listwatch/apiserver/internal/registry"
)

// builtinResource is the built-in resource of plural name, as the server
// registers it.
func builtinResource(tb testing.TB, plural string) *resource {
	tb.Helper()
	for _, r := range registry.Builtins() {
		if r.Plural == plural {
			return r
		}
	}
	tb.Fatalf("no built-in resource %q", plural)
	return nil
}

// BenchmarkManageCreatePod is the field manager's part of
// BenchmarkCreatePod: the managedFields of a typical pod's create
// (manageCreate), on a pod decoded as a create decodes it.
func BenchmarkManageCreatePod(b *testing.B) {
	res := builtinResource(b, "pods")
	req := request{res: res, namespace: "default", manage: &fieldManagement{manager: "bench"}}
	if _, err := res.FieldManager(""); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		_, obj, _, err := decode.Typed(res, []byte(benchPod(i)), true)
		if err != nil {
			b.Fatal(err)
		}
		o, err := registry.AsObject(obj)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if got := manageCreate(req, o); len(got.GetManagedFields()) != 1 {
			b.Fatalf("managedFields %v, want one entry", got.GetManagedFields())
		}
	}
}
