package apiserver

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/listwatch/listwatch/apiserver/internal/decode"
)

// nestJSON is a JSON object nested depth levels deep around leaf.
func nestJSON(depth int, leaf string) string {
	return strings.Repeat(`{"a":`, depth) + leaf + strings.Repeat(`}`, depth)
}

// TestDeepPatchRefused: a patch nested deeper than decode.MaxDepth is
// refused with a 400 that says why, for every patch type, before it is
// applied (kube-apiserver spends seconds and a gigabyte on a 10,000-level
// merge patch); one at the bound is applied.
func TestDeepPatchRefused(t *testing.T) {
	nest := func(depth int) string { return nestJSON(depth, `"v"`) }
	forEachBackend(t, func(t *testing.T, c *client) {
		c.mustDo(http.MethodPost, "/api/v1/namespaces/default/configmaps", "", `{"metadata":{"name":"deep"}}`, http.StatusCreated)
		for _, tc := range []struct {
			name, contentType string
			body              func(depth int) string
		}{
			{"merge", "application/merge-patch+json", func(d int) string { return `{"data":{"x":"y"},"metadata":{"annotations":` + nest(d-3) + `}}` }},
			{"strategic", "application/strategic-merge-patch+json", func(d int) string { return `{"metadata":{"annotations":` + nest(d-2) + `}}` }},
			{"json", "application/json-patch+json", func(d int) string {
				return `[{"op":"add","path":"/metadata/labels","value":` + nest(d-2) + `}]`
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := c.do(http.MethodPatch, "/api/v1/namespaces/default/configmaps/deep", tc.contentType, tc.body(10000))
				if r.code != http.StatusBadRequest || !strings.Contains(r.status(t).Message, "levels deep, more than the 100") {
					t.Errorf("10,000 levels: %d %s, want 400 naming the depth", r.code, r.body)
				}
				// At the bound the patch is applied (and refused by
				// validation: annotations are strings).
				if r := c.do(http.MethodPatch, "/api/v1/namespaces/default/configmaps/deep", tc.contentType, tc.body(decode.MaxDepth)); r.code == http.StatusBadRequest && strings.Contains(string(r.body), "levels deep") {
					t.Errorf("%d levels refused: %s", decode.MaxDepth, r.body)
				}
			})
		}
	})
}

// TestObjectTooLarge: an object over the storage limit is refused alike on
// both backends, created or grown by an update, with a 413 that names the
// limit and nothing of the storage (no key, no etcd or gRPC text).
func TestObjectTooLarge(t *testing.T) {
	big := strings.Repeat("x", 2<<20)
	forEachBackend(t, func(t *testing.T, c *client) {
		check := func(what string, r response) {
			t.Helper()
			st := r.status(t)
			if r.code != http.StatusRequestEntityTooLarge || st.Reason != "RequestEntityTooLarge" {
				t.Errorf("%s: %d %s, want 413 RequestEntityTooLarge", what, r.code, r.body)
			}
			for _, leak := range []string{"/registry", "configmaps/", "rpc error", "etcdserver", "grpc"} {
				if strings.Contains(st.Message, leak) {
					t.Errorf("%s: message %q shows storage internals (%q)", what, st.Message, leak)
				}
			}
		}
		// Pod templates: no rule of their validation bounds a
		// container's arguments (config maps and secrets stop at 1 MiB).
		template := func(name, arg string) string {
			return `{"metadata":{"name":"` + name + `"},"template":{"spec":{"containers":[{"name":"c","image":"i","args":["` + arg + `"]}]}}}`
		}
		check("create", c.do(http.MethodPost, "/api/v1/namespaces/default/podtemplates", "", template("big", big)))
		c.mustDo(http.MethodPost, "/api/v1/namespaces/default/podtemplates", "", template("small", "a"), http.StatusCreated)
		check("merge patch", c.do(http.MethodPatch, "/api/v1/namespaces/default/podtemplates/small", "application/merge-patch+json",
			`{"template":{"spec":{"containers":[{"name":"c","image":"i","args":["`+big+`"]}]}}}`))
	})
}

// fooWith is a Foo called name whose spec is spec (JSON).
func fooWith(name, spec string) string {
	return `{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"` + name + `"},"spec":` + spec + `}`
}

// cost is what a piece of work took: wall time, and the bytes allocated
// meanwhile in the whole process (server and client), which bounds how
// much the heap can have grown.
type cost struct {
	elapsed time.Duration
	alloc   uint64
}

func measure(work func()) cost {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	work()
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	return cost{elapsed, after.TotalAlloc - before.TotalAlloc}
}

// Bounds of one deep write, or of eight at once: the probe took
// 11.6 s and 2.3 GB for one re-apply of a 9,990-level Foo, and 38 s and
// 8.5 GB for eight. The memory bound is the property tested: bytes
// allocated bound the heap's growth whatever the machine's load. The time
// bound is five times the second asked for, so that a loaded machine
// running the race detector does not fail it; the times are logged.
const (
	deepWriteAlloc = 100 << 20
	deepWriteTime  = 5 * time.Second
)

// TestDeepBodiesBounded: documents nested past decode.MaxDepth (an
// apply configuration, a custom resource created, updated or left by a
// patch, a patch) are refused with a 400 naming the depth and the bound,
// one at a time or eight at once, within deepWriteTime and deepWriteAlloc;
// those at the bound are applied, and re-applied eight at once, within
// the same bounds.
func TestDeepBodiesBounded(t *testing.T) {
	const probeDepth = 9990 // the probe
	foos := "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos"
	deepSpec := nestJSON(probeDepth-1, `"v"`)
	forEachBackend(t, func(t *testing.T, c *client) {
		check := func(what string, c cost) {
			t.Helper()
			t.Logf("%s: %v, %.1f MB allocated", what, c.elapsed.Round(time.Millisecond), float64(c.alloc)/(1<<20))
			if c.alloc > deepWriteAlloc || c.elapsed > deepWriteTime {
				t.Errorf("%s took %v and %d MB, want under %v and %d MB", what, c.elapsed, c.alloc>>20, deepWriteTime, deepWriteAlloc>>20)
			}
		}
		refused := func(what string, r response, depth int) {
			t.Helper()
			want := fmt.Sprintf("is nested %d levels deep, more than the %d this server accepts", depth, decode.MaxDepth)
			if r.code != http.StatusBadRequest || !strings.Contains(r.status(t).Message, want) {
				t.Errorf("%s: %d %.300s, want 400 %q", what, r.code, r.body, want)
			}
		}
		c.mustDo("POST", foos, "", fooWith("shallow", `{"a":"b"}`), http.StatusCreated)
		cur := c.mustDo("GET", foos+"/shallow", "", "", http.StatusOK)
		rv := cur["metadata"].(map[string]any)["resourceVersion"].(string)

		// The writes of a 9,990-level Foo, each refused.
		for _, tc := range []struct {
			name, method, path, contentType, body string
		}{
			{"apply", "PATCH", foos + "/shallow?fieldManager=probe", "application/apply-patch+yaml", fooWith("shallow", deepSpec)},
			{"apply-create", "PATCH", foos + "/new?fieldManager=probe", "application/apply-patch+yaml", fooWith("new", deepSpec)},
			{"create", "POST", foos, "", fooWith("deep", deepSpec)},
			{"update", "PUT", foos + "/shallow", "", strings.Replace(fooWith("shallow", deepSpec), `"name":"shallow"`, `"name":"shallow","resourceVersion":"`+rv+`"`, 1)},
			{"merge-patch", "PATCH", foos + "/shallow", "application/merge-patch+json", `{"spec":` + deepSpec + `}`},
		} {
			var r response
			check(tc.name, measure(func() { r = c.do(tc.method, tc.path, tc.contentType, tc.body) }))
			refused(tc.name, r, probeDepth)
		}
		var wg sync.WaitGroup
		check("eight applies at once", measure(func() {
			for i := range 8 {
				wg.Go(func() {
					name := fmt.Sprintf("shallow-%d", i)
					refused("parallel apply", c.do("PATCH", foos+"/"+name+"?fieldManager=probe", "application/apply-patch+yaml", fooWith(name, deepSpec)), probeDepth)
				})
			}
			wg.Wait()
		}))

		// A JSON patch, itself shallow, that would leave the object
		// deeper than the bound: 60 levels added at level 51.
		c.mustDo("PATCH", foos+"/shallow", "application/merge-patch+json", `{"spec":`+nestJSON(50, `"v"`)+`}`, http.StatusOK)
		refused("json-patch", c.do("PATCH", foos+"/shallow", "application/json-patch+json",
			`[{"op":"add","path":"/spec`+strings.Repeat("/a", 50)+`","value":`+nestJSON(60, `"v"`)+`}]`), 51+60)

		// At the bound: applied, and re-applied eight at once.
		atBound := func(name, leaf string) string { return fooWith(name, nestJSON(decode.MaxDepth-1, leaf)) }
		check("apply at the bound", measure(func() {
			c.mustDo("PATCH", foos+"/bound?fieldManager=probe", "application/apply-patch+yaml", atBound("bound", `"v"`), http.StatusCreated)
		}))
		check("re-apply at the bound", measure(func() {
			c.mustDo("PATCH", foos+"/bound?fieldManager=probe", "application/apply-patch+yaml", atBound("bound", `"w"`), http.StatusOK)
		}))
		for i := range 8 {
			name := fmt.Sprintf("bound-%d", i)
			c.mustDo("PATCH", foos+"/"+name+"?fieldManager=probe", "application/apply-patch+yaml", atBound(name, `"v"`), http.StatusCreated)
		}
		check("eight re-applies at the bound at once", measure(func() {
			for i := range 8 {
				wg.Go(func() {
					name := fmt.Sprintf("bound-%d", i)
					if r := c.do("PATCH", foos+"/"+name+"?fieldManager=probe", "application/apply-patch+yaml", atBound(name, `"w"`)); r.code != http.StatusOK {
						t.Errorf("re-apply %s: %d %.300s", name, r.code, r.body)
					}
				})
			}
			wg.Wait()
		}))
		// What the server returned of an object at the bound, its
		// managedFields deeper than the bound, can be written back.
		got := c.do("GET", foos+"/bound", "", "")
		if r := c.do("PUT", foos+"/bound", "", string(got.body)); r.code != http.StatusOK {
			t.Errorf("PUT of the object as read: %d %.300s", r.code, r.body)
		}
	})
}

// TestJSONPatchCopiesBounded: a JSON patch whose copy operations would
// double the object again and again (to 100 GB in 30 operations) is
// refused with kube-apiserver's 422 once the copies have added 3 MiB,
// having allocated a few times that.
func TestJSONPatchCopiesBounded(t *testing.T) {
	c := newClient(t, backends[0].New(t))
	foos := "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos"
	c.mustDo("POST", foos, "", fooWith("copies", `{"a":"`+strings.Repeat("x", 100)+`"}`), http.StatusCreated)
	var ops []string
	for i := range 30 {
		ops = append(ops, fmt.Sprintf(`{"op":"copy","from":"/spec","path":"/spec/b%d"}`, i))
	}
	var r response
	cost := measure(func() {
		r = c.do("PATCH", foos+"/copies", "application/json-patch+json", "["+strings.Join(ops, ",")+"]")
	})
	t.Logf("%v, %.1f MB allocated", cost.elapsed.Round(time.Millisecond), float64(cost.alloc)/(1<<20))
	// kube-apiserver's answer: json-patch's error goes into a generic
	// 422 that keeps none of its words.
	if st := r.status(t); r.code != http.StatusUnprocessableEntity || st.Reason != "Invalid" {
		t.Errorf("%d %.300s, want 422 Invalid", r.code, r.body)
	}
	if cost.alloc > deepWriteAlloc {
		t.Errorf("the refused patch allocated %d MB, want under %d MB", cost.alloc>>20, deepWriteAlloc>>20)
	}
}

// TestOversizedCustomResourceRefused: a custom resource whose compact
// JSON is over the storage limit is refused with the storage's 413 before
// it is decoded, created, updated or applied, within deepWriteAlloc (a
// 3 MiB Foo of 300,000 fields held the server for a minute and 0.6 GB
// before the storage refused it); one under the limit but for its
// whitespace is stored.
func TestOversizedCustomResourceRefused(t *testing.T) {
	c := newClient(t, backends[0].New(t))
	foos := "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos"
	var fields strings.Builder
	for i := 0; fields.Len() < 2<<20; i++ {
		fmt.Fprintf(&fields, `"k%d":0,`, i)
	}
	big := "{" + strings.TrimSuffix(fields.String(), ",") + "}"
	c.mustDo("POST", foos, "", fooWith("small", `{}`), http.StatusCreated)
	for _, tc := range []struct{ name, method, path, contentType, body string }{
		{"create", "POST", foos, "", fooWith("big", big)},
		{"update", "PUT", foos + "/small", "", fooWith("small", big)},
		{"apply", "PATCH", foos + "/big?fieldManager=m", "application/apply-patch+yaml", fooWith("big", big)},
	} {
		var r response
		cost := measure(func() { r = c.do(tc.method, tc.path, tc.contentType, tc.body) })
		t.Logf("%s: %v, %.1f MB allocated", tc.name, cost.elapsed.Round(time.Millisecond), float64(cost.alloc)/(1<<20))
		if r.code != http.StatusRequestEntityTooLarge || r.status(t).Reason != "RequestEntityTooLarge" {
			t.Errorf("%s: %d %.300s, want 413", tc.name, r.code, r.body)
		}
		if cost.alloc > deepWriteAlloc {
			t.Errorf("%s: allocated %d MB, want under %d MB", tc.name, cost.alloc>>20, deepWriteAlloc>>20)
		}
	}
	// 1 MiB of content spread over 2 MiB by whitespace is stored.
	spaced := fooWith("spaced", `{"s":"`+strings.Repeat("x", 1<<20)+`"}`+strings.Repeat(" ", 1<<20))
	c.mustDo("POST", foos, "", spaced, http.StatusCreated)
}
