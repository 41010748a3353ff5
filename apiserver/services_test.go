package apiserver

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/listwatch/listwatch/internal/runtest"
	"github.com/listwatch/listwatch/storage"
)

const servicesPath = "/api/v1/namespaces/default/services"

// serviceServer is a server on st with the service ranges of cfg (its
// Storage is set here), and a client of it; stop closes both (it is also
// done at the end of the test).
func serviceServer(t *testing.T, st storage.Interface, cfg Config) (c *client, stop func()) {
	t.Helper()
	cfg.Storage = st
	cfg.WatchCache = WatchCacheConfig{BookmarkInterval: 100 * time.Millisecond}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopRun := runtest.Start(t, srv)
	hs := httptest.NewServer(srv.Handler())
	stop = sync.OnceFunc(func() {
		hs.CloseClientConnections()
		hs.Close()
		stopRun()
	})
	t.Cleanup(stop)
	c = &client{t: t, base: hs.URL, srv: srv, st: st}
	if r := c.do("POST", "/api/v1/namespaces", "", `{"metadata":{"name":"default"}}`); r.code != http.StatusCreated && r.code != http.StatusConflict {
		t.Fatalf("create namespace default: %d %s", r.code, r.body)
	}
	return c, stop
}

// forEachServiceBackend runs test on a fresh server with the service ranges
// of cfg on every backend.
func forEachServiceBackend(t *testing.T, cfg Config, test func(t *testing.T, c *client)) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			c, _ := serviceServer(t, b.New(t), cfg)
			test(t, c)
		})
	}
}

// svcBody is service name with spec members spec (`"type":"NodePort"`)
// and the ports ports (a JSON list), or one TCP port 80 when ports is "".
func svcBody(name, spec, ports string) string {
	if ports == "" {
		ports = `[{"port":80}]`
	}
	if spec != "" {
		spec += ","
	}
	return fmt.Sprintf(`{"metadata":{"name":%q},"spec":{%s"selector":{"app":"x"},"ports":%s}}`, name, spec, ports)
}

func mustCIDR(t *testing.T, s string) *net.IPNet {
	t.Helper()
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// clusterIP checks that svc has one cluster IP, in cidr, with the single
// stack fields kube sets, and returns it.
func clusterIP(t *testing.T, svc map[string]any, cidr string) string {
	t.Helper()
	ip := str(svc, "spec.clusterIP")
	if parsed := net.ParseIP(ip); parsed == nil || !mustCIDR(t, cidr).Contains(parsed) {
		t.Fatalf("clusterIP %q not in %s: %v", ip, cidr, svc["spec"])
	}
	if got := fmt.Sprint(nested(svc, "spec.clusterIPs")); got != "["+ip+"]" {
		t.Errorf("clusterIPs %s, want [%s]", got, ip)
	}
	if got := fmt.Sprint(nested(svc, "spec.ipFamilies")); got != "[IPv4]" {
		t.Errorf("ipFamilies %s, want [IPv4]", got)
	}
	if got := str(svc, "spec.ipFamilyPolicy"); got != "SingleStack" {
		t.Errorf("ipFamilyPolicy %q, want SingleStack", got)
	}
	return ip
}

// nodePorts returns the node ports of svc's ports, checking each is in
// [lo, hi].
func nodePorts(t *testing.T, svc map[string]any, lo, hi int) []int {
	t.Helper()
	ports, _ := nested(svc, "spec.ports").([]any)
	var out []int
	for _, p := range ports {
		n, _ := p.(map[string]any)["nodePort"].(float64)
		if int(n) < lo || int(n) > hi {
			t.Fatalf("nodePort %v not in %d-%d: %v", n, lo, hi, ports)
		}
		out = append(out, int(n))
	}
	return out
}

// invalid checks that r is kube's 422 for a service with the one cause
// field: msg.
func invalid(t *testing.T, r response, name, field, msg string) {
	t.Helper()
	if r.code != http.StatusUnprocessableEntity {
		t.Fatalf("got %d %s, want 422", r.code, r.body)
	}
	st := r.status(t)
	if st.Reason != "Invalid" || st.Details == nil || st.Details.Kind != "Service" || st.Details.Name != name ||
		len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != field {
		t.Fatalf("status %+v, want Invalid Service %q with one cause on %s", st, name, field)
	}
	if want := fmt.Sprintf("Service %q is invalid: %s: %s", name, field, msg); st.Message != want {
		t.Fatalf("message\n  %s\nwant\n  %s", st.Message, want)
	}
}

func TestServiceCreateAllocates(t *testing.T) {
	const rng = "10.96.0.0/12"
	tests := []struct {
		name, body string
		code       int
		// check looks at the created service (201) or the error (422).
		check func(t *testing.T, r response)
	}{
		{"ClusterIP gets an IP of the range", svcBody("auto", "", ""), 201, func(t *testing.T, r response) {
			clusterIP(t, r.obj(t), rng)
		}},
		{"a requested IP is honoured", svcBody("asked", `"clusterIP":"10.96.5.5"`, ""), 201, func(t *testing.T, r response) {
			if ip := clusterIP(t, r.obj(t), rng); ip != "10.96.5.5" {
				t.Fatalf("clusterIP %s, want 10.96.5.5", ip)
			}
		}},
		{"clusterIPs without clusterIP is refused", svcBody("plural", `"clusterIPs":["10.96.5.6"]`, ""), 422, func(t *testing.T, r response) {
			invalid(t, r, "plural", "spec.clusterIPs", "Invalid value: [\"10.96.5.6\"]: must be empty when `clusterIP` is not specified")
		}},
		{"a taken IP is refused", svcBody("taken", `"clusterIP":"10.96.5.5"`, ""), 422, func(t *testing.T, r response) {
			invalid(t, r, "taken", "spec.clusterIPs", `Invalid value: ["10.96.5.5"]: failed to allocate IP 10.96.5.5: provided IP is already allocated`)
		}},
		{"an IP out of the range is refused", svcBody("outside", `"clusterIP":"192.168.0.10"`, ""), 422, func(t *testing.T, r response) {
			invalid(t, r, "outside", "spec.clusterIPs", `Invalid value: ["192.168.0.10"]: failed to allocate IP 192.168.0.10: the provided network does not match the current range`)
		}},
		{"the range's network address is refused", svcBody("network", `"clusterIP":"10.96.0.0"`, ""), 422, func(t *testing.T, r response) {
			invalid(t, r, "network", "spec.clusterIPs", `Invalid value: ["10.96.0.0"]: failed to allocate IP 10.96.0.0: the provided IP (10.96.0.0) is not in the valid range. The range of valid IPs is 10.96.0.0/12`)
		}},
		{"an IPv6 IP on an IPv4 cluster is refused", svcBody("v6", `"clusterIP":"fd00::10"`, ""), 422, func(t *testing.T, r response) {
			invalid(t, r, "v6", "spec.clusterIPs[0]", `Invalid value: ["fd00::10"]: IPv6 is not configured on this cluster`)
		}},
		{"dual stack is refused on a single stack cluster", svcBody("dual", `"ipFamilyPolicy":"RequireDualStack"`, ""), 422, func(t *testing.T, r response) {
			invalid(t, r, "dual", "spec.ipFamilyPolicy", `Invalid value: "RequireDualStack": this cluster is not configured for dual-stack services`)
		}},
		{"PreferDualStack gets one IP", svcBody("prefer", `"ipFamilyPolicy":"PreferDualStack"`, ""), 201, func(t *testing.T, r response) {
			svc := r.obj(t)
			if got := fmt.Sprint(nested(svc, "spec.clusterIPs")); strings.Count(got, ".") != 3 {
				t.Fatalf("clusterIPs %s, want one IPv4", got)
			}
			if got := str(svc, "spec.ipFamilyPolicy"); got != "PreferDualStack" {
				t.Fatalf("ipFamilyPolicy %s", got)
			}
		}},
		{"headless", svcBody("headless", `"clusterIP":"None"`, ""), 201, func(t *testing.T, r response) {
			svc := r.obj(t)
			if got := fmt.Sprintf("%v %v %v %v", str(svc, "spec.clusterIP"), nested(svc, "spec.clusterIPs"), nested(svc, "spec.ipFamilies"), str(svc, "spec.ipFamilyPolicy")); got != "None [None] [IPv4] SingleStack" {
				t.Fatalf("headless: %s", got)
			}
		}},
		{"headless without selector", `{"metadata":{"name":"headless2"},"spec":{"clusterIP":"None","ports":[{"port":80}]}}`, 201, func(t *testing.T, r response) {
			svc := r.obj(t)
			if got := fmt.Sprintf("%v %v %v", nested(svc, "spec.clusterIPs"), nested(svc, "spec.ipFamilies"), str(svc, "spec.ipFamilyPolicy")); got != "[None] [IPv4 IPv6] RequireDualStack" {
				t.Fatalf("headless without selector: %s", got)
			}
		}},
		{"ExternalName gets no IP", `{"metadata":{"name":"ext"},"spec":{"type":"ExternalName","externalName":"example.com"}}`, 201, func(t *testing.T, r response) {
			svc := r.obj(t)
			for _, f := range []string{"spec.clusterIP", "spec.clusterIPs", "spec.ipFamilies", "spec.ipFamilyPolicy"} {
				if v := nested(svc, f); v != nil {
					t.Errorf("%s = %v, want none", f, v)
				}
			}
		}},
		{"NodePort gets node ports of the range", svcBody("np", `"type":"NodePort"`, `[{"name":"a","port":80},{"name":"b","port":81}]`), 201, func(t *testing.T, r response) {
			svc := r.obj(t)
			clusterIP(t, svc, rng)
			if ps := nodePorts(t, svc, 30000, 32767); len(ps) != 2 || ps[0] == ps[1] {
				t.Fatalf("node ports %v", ps)
			}
		}},
		{"a requested node port is honoured", svcBody("np-asked", `"type":"NodePort"`, `[{"port":80,"nodePort":30080}]`), 201, func(t *testing.T, r response) {
			if ps := nodePorts(t, r.obj(t), 30000, 32767); ps[0] != 30080 {
				t.Fatalf("node ports %v, want [30080]", ps)
			}
		}},
		{"a taken node port is refused", svcBody("np-taken", `"type":"NodePort"`, `[{"port":80,"nodePort":30080}]`), 422, func(t *testing.T, r response) {
			invalid(t, r, "np-taken", "spec.ports[0].nodePort", `Invalid value: 30080: provided port is already allocated`)
		}},
		{"a node port out of the range is refused", svcBody("np-outside", `"type":"NodePort"`, `[{"port":80,"nodePort":8080}]`), 422, func(t *testing.T, r response) {
			invalid(t, r, "np-outside", "spec.ports[0].nodePort", `Invalid value: 8080: provided port is not in the valid range. The range of valid ports is 30000-32767`)
		}},
		{"ClusterIP gets no node port", svcBody("no-np", "", ""), 201, func(t *testing.T, r response) {
			if n := nested(r.obj(t), "spec.ports.0.nodePort"); n != nil {
				t.Fatalf("nodePort %v", n)
			}
		}},
		{"LoadBalancer with local traffic gets a health check node port", svcBody("lb", `"type":"LoadBalancer","externalTrafficPolicy":"Local"`, ""), 201, func(t *testing.T, r response) {
			svc := r.obj(t)
			ps := nodePorts(t, svc, 30000, 32767)
			hc, _ := nested(svc, "spec.healthCheckNodePort").(float64)
			if hc < 30000 || hc > 32767 || int(hc) == ps[0] {
				t.Fatalf("healthCheckNodePort %v, node ports %v", hc, ps)
			}
		}},
		{"LoadBalancer without node ports", svcBody("lb-none", `"type":"LoadBalancer","allocateLoadBalancerNodePorts":false`, ""), 201, func(t *testing.T, r response) {
			svc := r.obj(t)
			clusterIP(t, svc, rng)
			if n := nested(svc, "spec.ports"); strings.Contains(fmt.Sprint(n), "nodePort") {
				t.Fatalf("ports %v", n)
			}
		}},
	}
	forEachServiceBackend(t, Config{}, func(t *testing.T, c *client) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				r := c.do("POST", servicesPath, "", tc.body)
				if r.code != tc.code {
					t.Fatalf("got %d %s, want %d", r.code, r.body, tc.code)
				}
				tc.check(t, r)
				if r.code == http.StatusCreated {
					// As stored, not only as answered.
					name := str(r.obj(t), "metadata.name")
					got := c.do("GET", servicesPath+"/"+name, "", "")
					if fmt.Sprint(nested(got.obj(t), "spec")) != fmt.Sprint(nested(r.obj(t), "spec")) {
						t.Fatalf("stored spec %v, answered %v", nested(got.obj(t), "spec"), nested(r.obj(t), "spec"))
					}
				}
			})
		}
	})
}

func TestServiceAllocationsReleased(t *testing.T) {
	tests := []struct {
		name string
		// take holds 10.96.7.7 and node port 30777 (or not), and leaves
		// them free; each step is method, path, body, code.
		steps [][4]string
	}{
		{"delete releases", [][4]string{
			{"POST", servicesPath, svcBody("a", `"type":"NodePort","clusterIP":"10.96.7.7"`, `[{"port":80,"nodePort":30777}]`), "201"},
			{"DELETE", servicesPath + "/a", "", "200"},
		}},
		{"a create refused by validation takes nothing", [][4]string{
			{"POST", servicesPath, svcBody("a", `"type":"NodePort","clusterIP":"10.96.7.7","sessionAffinity":"bogus"`, `[{"port":80,"nodePort":30777}]`), "422"},
		}},
		{"a create of a name that exists takes nothing", [][4]string{
			{"POST", servicesPath, svcBody("a", "", ""), "201"},
			{"POST", servicesPath, svcBody("a", `"type":"NodePort","clusterIP":"10.96.7.7"`, `[{"port":80,"nodePort":30777}]`), "409"},
		}},
		{"a dry run takes nothing", [][4]string{
			{"POST", servicesPath + "?dryRun=All", svcBody("a", `"type":"NodePort","clusterIP":"10.96.7.7"`, `[{"port":80,"nodePort":30777}]`), "201"},
		}},
		{"a dry run delete releases nothing", [][4]string{
			{"POST", servicesPath, svcBody("a", `"type":"NodePort","clusterIP":"10.96.7.7"`, `[{"port":80,"nodePort":30777}]`), "201"},
			{"DELETE", servicesPath + "/a?dryRun=All", "", "200"},
			{"POST", servicesPath, svcBody("b", `"clusterIP":"10.96.7.7"`, ""), "422"},
			{"POST", servicesPath, svcBody("b", `"type":"NodePort"`, `[{"port":80,"nodePort":30777}]`), "422"},
			{"DELETE", servicesPath + "/a", "", "200"},
		}},
		{"NodePort to ClusterIP releases the node port", [][4]string{
			{"POST", servicesPath, svcBody("a", `"type":"NodePort"`, `[{"port":80,"nodePort":30777}]`), "201"},
			{"PATCH", servicesPath + "/a", `{"spec":{"type":"ClusterIP"}}`, "200"},
		}},
		{"a PUT from NodePort to ClusterIP releases the node port", [][4]string{
			{"POST", servicesPath, svcBody("a", `"type":"NodePort"`, `[{"port":80,"nodePort":30777}]`), "201"},
			{"PUT", servicesPath + "/a", svcBody("a", `"type":"ClusterIP"`, `[{"port":80}]`), "200"},
		}},
		{"a PUT refused by validation takes nothing", [][4]string{
			{"POST", servicesPath, svcBody("a", "", ""), "201"},
			{"PUT", servicesPath + "/a", svcBody("a", `"type":"NodePort","sessionAffinity":"bogus"`, `[{"port":80,"nodePort":30777}]`), "422"},
		}},
		{"ClusterIP to ExternalName releases the IP", [][4]string{
			{"POST", servicesPath, svcBody("a", `"clusterIP":"10.96.7.7"`, ""), "201"},
			{"PATCH", servicesPath + "/a", `{"spec":{"type":"ExternalName","externalName":"example.com","clusterIP":"","clusterIPs":null}}`, "200"},
		}},
		{"an update refused by validation takes nothing", [][4]string{
			{"POST", servicesPath, svcBody("a", "", ""), "201"},
			{"PATCH", servicesPath + "/a", `{"spec":{"type":"NodePort","ports":[{"port":80,"nodePort":30777}],"sessionAffinity":"bogus"}}`, "422"},
		}},
		{"a dry run update takes nothing", [][4]string{
			{"POST", servicesPath, svcBody("a", "", ""), "201"},
			{"PATCH", servicesPath + "/a?dryRun=All", `{"spec":{"type":"NodePort","ports":[{"port":80,"nodePort":30777}]}}`, "200"},
		}},
		{"removing the last finalizer releases", [][4]string{
			{"POST", servicesPath, `{"metadata":{"name":"a","finalizers":["example.com/x"]},"spec":{"type":"NodePort","clusterIP":"10.96.7.7","ports":[{"port":80,"nodePort":30777}]}}`, "201"},
			{"DELETE", servicesPath + "/a", "", "200"},
			{"POST", servicesPath, svcBody("b", `"clusterIP":"10.96.7.7"`, ""), "422"},
			{"PATCH", servicesPath + "/a", `{"metadata":{"finalizers":null}}`, "200"},
		}},
	}
	forEachServiceBackend(t, Config{}, func(t *testing.T, c *client) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				for _, st := range tc.steps {
					ct := ""
					if st[0] == "PATCH" {
						ct = "application/merge-patch+json"
					}
					if r := c.do(st[0], st[1], ct, st[2]); fmt.Sprint(r.code) != st[3] {
						t.Fatalf("%s %s: got %d %s, want %s", st[0], st[1], r.code, r.body, st[3])
					}
				}
				// Both are free: another service gets them.
				c.mustDo("POST", servicesPath, "", svcBody("check", `"type":"NodePort","clusterIP":"10.96.7.7"`, `[{"port":80,"nodePort":30777}]`), 201)
				for _, name := range []string{"a", "b", "check"} {
					c.do("DELETE", servicesPath+"/"+name, "", "")
				}
			})
		}
	})
}

func TestServiceTypeChange(t *testing.T) {
	forEachServiceBackend(t, Config{}, func(t *testing.T, c *client) {
		const merge = "application/merge-patch+json"
		svc := c.mustDo("POST", servicesPath, "", svcBody("web", "", `[{"name":"http","port":80}]`), 201)
		ip := clusterIP(t, svc, "10.96.0.0/12")

		// ClusterIP to NodePort: a node port is allocated, the IP kept.
		svc = c.mustDo("PATCH", servicesPath+"/web", merge, `{"spec":{"type":"NodePort"}}`, 200)
		if got := clusterIP(t, svc, "10.96.0.0/12"); got != ip {
			t.Fatalf("clusterIP %s became %s", ip, got)
		}
		port := nodePorts(t, svc, 30000, 32767)[0]
		r := c.do("POST", servicesPath, "", svcBody("other", `"type":"NodePort"`, fmt.Sprintf(`[{"port":80,"nodePort":%d}]`, port)))
		invalid(t, r, "other", "spec.ports[0].nodePort", fmt.Sprintf("Invalid value: %d: provided port is already allocated", port))

		// A PUT that leaves out what was allocated keeps it (kube's
		// patchAllocatedValues).
		put := fmt.Sprintf(`{"metadata":{"name":"web","resourceVersion":%q},"spec":{"type":"NodePort","selector":{"app":"y"},"ports":[{"name":"http","port":80}]}}`, str(svc, "metadata.resourceVersion"))
		svc = c.mustDo("PUT", servicesPath+"/web", "", put, 200)
		if got := clusterIP(t, svc, "10.96.0.0/12"); got != ip {
			t.Fatalf("PUT: clusterIP %s became %s", ip, got)
		}
		if got := nodePorts(t, svc, 30000, 32767)[0]; got != port {
			t.Fatalf("PUT: node port %d became %d", port, got)
		}

		// NodePort to ClusterIP: the node port goes, and is free again.
		svc = c.mustDo("PATCH", servicesPath+"/web", merge, `{"spec":{"type":"ClusterIP"}}`, 200)
		if n := nested(svc, "spec.ports.0.nodePort"); strings.Contains(fmt.Sprint(nested(svc, "spec.ports")), "nodePort") {
			t.Fatalf("nodePort %v kept", n)
		}
		c.mustDo("POST", servicesPath, "", svcBody("other", `"type":"NodePort"`, fmt.Sprintf(`[{"port":80,"nodePort":%d}]`, port)), 201)

		// Changing the IP of a service is refused (immutable), and takes
		// nothing.
		r = c.do("PATCH", servicesPath+"/web", merge, `{"spec":{"clusterIP":"10.96.8.8","clusterIPs":["10.96.8.8"]}}`)
		if r.code != http.StatusUnprocessableEntity {
			t.Fatalf("changed clusterIP: %d %s", r.code, r.body)
		}
		c.mustDo("POST", servicesPath, "", svcBody("third", `"clusterIP":"10.96.8.8"`, ""), 201)

		// A node port asked for in an update is honoured, and refused when
		// taken.
		r = c.do("PATCH", servicesPath+"/web", merge, fmt.Sprintf(`{"spec":{"type":"NodePort","ports":[{"name":"http","port":80,"nodePort":%d}]}}`, port))
		invalid(t, r, "web", "spec.ports[0].nodePort", fmt.Sprintf("Invalid value: %d: provided port is already allocated", port))
		svc = c.mustDo("PATCH", servicesPath+"/web", merge, `{"spec":{"type":"NodePort","ports":[{"name":"http","port":80,"nodePort":30555}]}}`, 200)
		if got := nodePorts(t, svc, 30000, 32767)[0]; got != 30555 {
			t.Fatalf("node port %d, want 30555", got)
		}

		// To ExternalName: the IP and node port go, and the service reads
		// as kube's storage returns it (no internalTrafficPolicy).
		svc = c.mustDo("PATCH", servicesPath+"/web", merge, `{"spec":{"type":"ExternalName","externalName":"example.com"}}`, 200)
		got := c.mustDo("GET", servicesPath+"/web", "", "", 200)
		for _, f := range []string{"spec.clusterIP", "spec.clusterIPs", "spec.internalTrafficPolicy", "spec.ports.0.nodePort"} {
			if v, w := nested(svc, f), nested(got, f); v != nil || w != nil {
				t.Errorf("ExternalName: %s = %v (answer), %v (stored)", f, v, w)
			}
		}
		c.mustDo("POST", servicesPath, "", svcBody("fourth", `"type":"NodePort","clusterIP":"`+ip+`"`, `[{"port":80,"nodePort":30555}]`), 201)

		// A PUT of a missing service creates it, allocating as a POST does.
		svc = c.mustDo("PUT", servicesPath+"/put", "", svcBody("put", `"type":"NodePort"`, ""), 201)
		clusterIP(t, svc, "10.96.0.0/12")
		nodePorts(t, svc, 30000, 32767)
	})
}

func TestServiceParallelCreates(t *testing.T) {
	const n = 200
	forEachServiceBackend(t, Config{}, func(t *testing.T, c *client) {
		ips := make([]string, n)
		ports := make([]int, n)
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				r := c.do("POST", servicesPath, "", svcBody(fmt.Sprintf("s%d", i), `"type":"NodePort"`, ""))
				if r.code != http.StatusCreated {
					errs <- fmt.Errorf("create s%d: %d %s", i, r.code, r.body)
					return
				}
				svc := r.obj(t)
				ips[i] = str(svc, "spec.clusterIP")
				n, _ := nested(svc, "spec.ports").([]any)[0].(map[string]any)["nodePort"].(float64)
				ports[i] = int(n)
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		seenIP, seenPort := map[string]int{}, map[int]int{}
		for i := range n {
			if j, dup := seenIP[ips[i]]; dup || ips[i] == "" {
				t.Fatalf("s%d and s%d got IP %q", j, i, ips[i])
			}
			if j, dup := seenPort[ports[i]]; dup || ports[i] == 0 {
				t.Fatalf("s%d and s%d got node port %d", j, i, ports[i])
			}
			seenIP[ips[i]], seenPort[ports[i]] = i, i
		}
	})
}

func TestServiceAllocationsSurviveRestart(t *testing.T) {
	// Six usable IPs (10.0.0.1-6) and ten node ports.
	cfg := Config{ServiceClusterIPRange: "10.0.0.0/29", ServiceNodePortRange: "31000-31009"}
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			st := b.New(t)
			c, stop := serviceServer(t, st, cfg)
			ipHolder, portHolder := map[string]string{}, map[int]string{}
			create := func(c *client, name, spec, ports string) {
				t.Helper()
				svc := c.mustDo("POST", servicesPath, "", svcBody(name, `"type":"NodePort"`+spec, ports), 201)
				ip := clusterIP(t, svc, "10.0.0.0/29")
				if other, taken := ipHolder[ip]; taken {
					t.Fatalf("%s got IP %s, which %s holds", name, ip, other)
				}
				ipHolder[ip] = name
				for _, p := range nodePorts(t, svc, 31000, 31009) {
					if other, taken := portHolder[p]; taken {
						t.Fatalf("%s got node port %d, which %s holds", name, p, other)
					}
					portHolder[p] = name
				}
			}
			create(c, "asked", `,"clusterIP":"10.0.0.6"`, `[{"port":80,"nodePort":31009}]`)
			for i := range 3 {
				create(c, fmt.Sprintf("before%d", i), "", "")
			}
			stop()

			// A new server on the same storage: what is stored stays taken.
			c, _ = serviceServer(t, st, cfg)
			invalid(t, c.do("POST", servicesPath, "", svcBody("again", `"clusterIP":"10.0.0.6"`, "")),
				"again", "spec.clusterIPs", `Invalid value: ["10.0.0.6"]: failed to allocate IP 10.0.0.6: provided IP is already allocated`)
			invalid(t, c.do("POST", servicesPath, "", svcBody("again", `"type":"NodePort"`, `[{"port":80,"nodePort":31009}]`)),
				"again", "spec.ports[0].nodePort", `Invalid value: 31009: provided port is already allocated`)
			create(c, "after0", "", "")
			create(c, "after1", "", "")
			// The range is full.
			r := c.do("POST", servicesPath, "", svcBody("full", "", ""))
			if r.code != http.StatusInternalServerError || !strings.Contains(string(r.body), "range is full") {
				t.Fatalf("create in a full range: %d %s", r.code, r.body)
			}
			// Deleting a service the first server made frees its IP.
			c.mustDo("DELETE", servicesPath+"/asked", "", "", 200)
			c.mustDo("POST", servicesPath, "", svcBody("reuse", `"clusterIP":"10.0.0.6"`, ""), 201)
		})
	}
}

func TestServiceRangeConfig(t *testing.T) {
	st := backends[0].New(t)
	for _, cfg := range []Config{
		{ServiceClusterIPRange: "10.0.0.0/30"},
		{ServiceClusterIPRange: "not-a-cidr"},
		{ServiceClusterIPRange: "10.0.0.0/24,10.1.0.0/24"},
		{ServiceClusterIPRange: "10.0.0.0/24,fd00::/108,10.2.0.0/24"},
		{ServiceNodePortRange: "30000-"},
		{ServiceNodePortRange: "32000-31000"},
	} {
		cfg.Storage = st
		if _, err := New(cfg); err == nil {
			t.Errorf("New accepted %q %q", cfg.ServiceClusterIPRange, cfg.ServiceNodePortRange)
		}
	}

	// Dual stack: the first range is the primary family.
	cfg := Config{ServiceClusterIPRange: "fd00:10::/108,10.100.0.0/16", ServiceNodePortRange: "40000-40100"}
	forEachServiceBackend(t, cfg, func(t *testing.T, c *client) {
		svc := c.mustDo("POST", servicesPath, "", svcBody("one", `"type":"NodePort"`, ""), 201)
		if got := fmt.Sprintf("%v %v", nested(svc, "spec.ipFamilies"), str(svc, "spec.ipFamilyPolicy")); got != "[IPv6] SingleStack" {
			t.Fatalf("single stack service: %s", got)
		}
		if ip := net.ParseIP(str(svc, "spec.clusterIP")); !mustCIDR(t, "fd00:10::/108").Contains(ip) {
			t.Fatalf("clusterIP %v", ip)
		}
		nodePorts(t, svc, 40000, 40100)
		svc = c.mustDo("POST", servicesPath, "", svcBody("two", `"ipFamilyPolicy":"RequireDualStack"`, ""), 201)
		ips, _ := nested(svc, "spec.clusterIPs").([]any)
		if len(ips) != 2 || !mustCIDR(t, "fd00:10::/108").Contains(net.ParseIP(ips[0].(string))) || !mustCIDR(t, "10.100.0.0/16").Contains(net.ParseIP(ips[1].(string))) {
			t.Fatalf("dual stack clusterIPs %v", ips)
		}
		if got := fmt.Sprint(nested(svc, "spec.ipFamilies")); got != "[IPv6 IPv4]" {
			t.Fatalf("dual stack ipFamilies %s", got)
		}
	})
}
