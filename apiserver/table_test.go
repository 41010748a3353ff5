package apiserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubectl get's Accept header.
const kubectlTableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

func (c *client) table(path, accept string) (metav1.Table, response) {
	c.t.Helper()
	r := c.do("GET", path, "", "", "Accept", accept)
	var tbl metav1.Table
	if r.code != http.StatusOK {
		c.t.Fatalf("GET %s as Table: %d %s", path, r.code, r.body)
	}
	if err := json.Unmarshal(r.body, &tbl); err != nil {
		c.t.Fatalf("GET %s: not a Table: %v\n%s", path, err, r.body)
	}
	return tbl, r
}

func columnNames(tbl metav1.Table) string {
	names := make([]string, len(tbl.ColumnDefinitions))
	for i, c := range tbl.ColumnDefinitions {
		names[i] = c.Name
		if c.Priority > 0 {
			names[i] += "*"
		}
	}
	return strings.Join(names, ",")
}

// cellsOf renders a row's cells, leaving out the age columns (time
// dependent) marked by skip.
func cellsOf(row metav1.TableRow, skip map[int]bool) string {
	out := make([]string, 0, len(row.Cells))
	for i, c := range row.Cells {
		if skip[i] {
			continue
		}
		out = append(out, fmt.Sprint(c))
	}
	return strings.Join(out, "|")
}

func TestTable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		const ns = "/api/v1/namespaces/default"
		setup := []struct{ method, path, body string }{
			{"POST", ns + "/pods", `{"metadata":{"name":"pending"},"spec":{"containers":[{"name":"a","image":"i"},{"name":"b","image":"i"}]}}`},
			{"POST", ns + "/pods", `{"metadata":{"name":"running"},"spec":{"nodeName":"n1","containers":[{"name":"a","image":"i"}]}}`},
			{"PUT", ns + "/pods/running/status", `{"metadata":{"name":"running"},"status":{"phase":"Running","podIP":"10.0.0.7","containerStatuses":[{"name":"a","ready":true,"restartCount":2,"image":"i","imageID":"","state":{"running":{}}}]}}`},
			{"POST", ns + "/pods", `{"metadata":{"name":"crash"},"spec":{"containers":[{"name":"a","image":"i"}]}}`},
			{"PUT", ns + "/pods/crash/status", `{"metadata":{"name":"crash"},"status":{"phase":"Running","containerStatuses":[{"name":"a","ready":false,"restartCount":0,"image":"i","imageID":"","state":{"waiting":{"reason":"CrashLoopBackOff"}}}]}}`},
			{"POST", ns + "/replicationcontrollers", `{"metadata":{"name":"rc"},"spec":{"replicas":3,"selector":{"app":"x"},"template":{"metadata":{"labels":{"app":"x"}},"spec":{"containers":[{"name":"web","image":"nginx"}]}}}}`},
			{"PUT", ns + "/replicationcontrollers/rc/status", `{"metadata":{"name":"rc"},"status":{"replicas":2,"readyReplicas":1}}`},
			{"POST", "/apis/apps/v1/namespaces/default/deployments", `{"metadata":{"name":"d"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"d"}},"template":{"metadata":{"labels":{"app":"d"}},"spec":{"containers":[{"name":"c","image":"img"}]}}}}`},
			{"POST", ns + "/services", `{"metadata":{"name":"svc"},"spec":{"clusterIP":"10.96.0.10","selector":{"app":"x"},"ports":[{"name":"http","port":80},{"name":"dns","port":53,"protocol":"UDP"}]}}`},
			{"POST", ns + "/endpoints", `{"metadata":{"name":"svc"},"subsets":[{"addresses":[{"ip":"10.0.0.1"},{"ip":"10.0.0.2"}],"ports":[{"port":80}]}]}`},
			{"POST", ns + "/events", `{"metadata":{"name":"ev1"},"involvedObject":{"kind":"Pod","name":"crash"},"reason":"BackOff","message":"Back-off restarting","type":"Warning","count":4,"source":{"component":"kubelet","host":"n1"}}`},
			{"POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", `{"metadata":{"name":"leader"},"spec":{"holderIdentity":"me"}}`},
			{"POST", "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos", `{"metadata":{"name":"foo1"},"spec":{"x":1}}`},
		}
		for _, s := range setup {
			r := c.do(s.method, s.path, "", s.body)
			if r.code != 200 && r.code != 201 {
				t.Fatalf("%s %s: %d %s", s.method, s.path, r.code, r.body)
			}
		}
		tests := []struct {
			path, columns string
			// rows maps a row's cell in column key (the name) to its cells
			// without the columns in skip (the ages, time dependent).
			key  int
			skip map[int]bool
			rows map[string]string
		}{
			{"/api/v1/namespaces", "Name,Status,Age", 0, map[int]bool{2: true}, map[string]string{"default": "default|Active"}},
			{ns + "/pods", "Name,Ready,Status,Restarts,Age,IP*,Node*,Nominated Node*,Readiness Gates*", 0, map[int]bool{4: true}, map[string]string{
				"pending": "pending|0/2|Pending|0|<none>|<none>|<none>|<none>",
				"running": "running|1/1|Running|2|10.0.0.7|n1|<none>|<none>",
				"crash":   "crash|0/1|CrashLoopBackOff|0|<none>|<none>|<none>|<none>",
			}},
			{ns + "/replicationcontrollers", "Name,Desired,Current,Ready,Age,Containers*,Images*,Selector*", 0, map[int]bool{4: true}, map[string]string{
				"rc": "rc|3|2|1|web|nginx|app=x",
			}},
			{"/apis/apps/v1/namespaces/default/deployments", "Name,Ready,Up-to-date,Available,Age,Containers*,Images*,Selector*", 0, map[int]bool{4: true}, map[string]string{
				"d": "d|0/2|0|0|c|img|app=d",
			}},
			{ns + "/services", "Name,Type,Cluster-IP,External-IP,Port(s),Age,Selector*", 0, map[int]bool{5: true}, map[string]string{
				"svc": "svc|ClusterIP|10.96.0.10|<none>|80/TCP,53/UDP|app=x",
			}},
			{ns + "/endpoints", "Name,Endpoints,Age", 0, map[int]bool{2: true}, map[string]string{"svc": "svc|10.0.0.1:80,10.0.0.2:80"}},
			{ns + "/events", "Last Seen,Type,Reason,Object,Subobject*,Source*,Message,First Seen*,Count*,Name*", 9, map[int]bool{0: true, 7: true}, map[string]string{
				"ev1": "Warning|BackOff|pod/crash||kubelet, n1|Back-off restarting|4|ev1",
			}},
			{"/apis/coordination.k8s.io/v1/namespaces/default/leases", "Name,Holder,Age", 0, map[int]bool{2: true}, map[string]string{"leader": "leader|me"}},
			{"/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos", "Name,Age", 0, map[int]bool{1: true}, map[string]string{"foo1": "foo1"}},
		}
		for _, tt := range tests {
			tbl, r := c.table(tt.path, kubectlTableAccept)
			if tbl.Kind != "Table" || tbl.APIVersion != "meta.k8s.io/v1" || tbl.ResourceVersion == "" || r.hdr.Get("Content-Type") != "application/json" {
				t.Errorf("%s: %s %s rv %q", tt.path, tbl.Kind, tbl.APIVersion, tbl.ResourceVersion)
			}
			if got := columnNames(tbl); got != tt.columns {
				t.Errorf("%s: columns %s, want %s", tt.path, got, tt.columns)
			}
			if tbl.ColumnDefinitions[0].Name == "Name" && tbl.ColumnDefinitions[0].Format != "name" {
				t.Errorf("%s: Name column format %q", tt.path, tbl.ColumnDefinitions[0].Format)
			}
			got := map[string]string{}
			for _, row := range tbl.Rows {
				if len(row.Cells) != len(tbl.ColumnDefinitions) {
					t.Errorf("%s: row %v has %d cells for %d columns", tt.path, row.Cells, len(row.Cells), len(tbl.ColumnDefinitions))
				}
				got[fmt.Sprint(row.Cells[tt.key])] = cellsOf(row, tt.skip)
			}
			for key, want := range tt.rows {
				if got[key] != want {
					t.Errorf("%s: row %s = %q, want %q", tt.path, key, got[key], want)
				}
			}
		}

		// includeObject, the v1beta1 form and one object.
		incl := []struct {
			query, accept, wantAPIVersion, wantKind string
		}{
			{"", kubectlTableAccept, "meta.k8s.io/v1", "PartialObjectMetadata"},
			{"?includeObject=Metadata", "application/json;as=Table;v=v1beta1;g=meta.k8s.io", "meta.k8s.io/v1beta1", "PartialObjectMetadata"},
			{"?includeObject=Object", kubectlTableAccept, "v1", "Pod"},
			{"?includeObject=None", kubectlTableAccept, "", ""},
		}
		for _, tt := range incl {
			tbl, _ := c.table(ns+"/pods/running"+tt.query, tt.accept)
			if len(tbl.Rows) != 1 {
				t.Fatalf("%s: %d rows", tt.query, len(tbl.Rows))
			}
			raw := tbl.Rows[0].Object.Raw
			if tt.wantKind == "" {
				if len(raw) != 0 {
					t.Errorf("%s: object %s, want none", tt.query, raw)
				}
				continue
			}
			var obj map[string]any
			if err := json.Unmarshal(raw, &obj); err != nil {
				t.Fatalf("%s: %v", tt.query, err)
			}
			if str(obj, "apiVersion") != tt.wantAPIVersion || str(obj, "kind") != tt.wantKind || str(obj, "metadata.name") != "running" || str(obj, "metadata.uid") == "" {
				t.Errorf("%s: embedded %v", tt.query, obj)
			}
			if tt.wantKind == "Pod" && str(obj, "spec.nodeName") != "n1" {
				t.Errorf("%s: full object lacks spec: %v", tt.query, obj)
			}
		}
		if r := c.do("GET", ns+"/pods?includeObject=All", "", "", "Accept", kubectlTableAccept); r.code != 400 {
			t.Errorf("bad includeObject: %d", r.code)
		}
		// A Table is only what the client asks for.
		if got := c.mustDo("GET", ns+"/pods/running", "", "", 200); str(got, "kind") != "Pod" {
			t.Errorf("plain get: %v", got["kind"])
		}
	})
}

func TestTableWatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		rc := c.mustDo("POST", rcPath, "", rcBody("rc", 1), 201)
		req, err := http.NewRequestWithContext(t.Context(), "GET", c.base+rcPath+"?watch=true&resourceVersion="+str(rc, "metadata.resourceVersion")+"&includeObject=Object", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", kubectlTableAccept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("watch: %d %s", resp.StatusCode, b)
		}
		dec := json.NewDecoder(resp.Body)
		next := func() (string, metav1.Table) {
			t.Helper()
			var ev struct {
				Type   string       `json:"type"`
				Object metav1.Table `json:"object"`
			}
			if err := dec.Decode(&ev); err != nil {
				t.Fatalf("watch ended: %v", err)
			}
			return ev.Type, ev.Object
		}
		for i, replicas := range []int{2, 3} {
			c.mustDo("PATCH", rcPath+"/rc", "application/merge-patch+json", fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas), 200)
			typ, tbl := next()
			if typ != "MODIFIED" || tbl.Kind != "Table" || len(tbl.Rows) != 1 {
				t.Fatalf("event %d: %s %+v", i, typ, tbl)
			}
			// Columns come with the first event only.
			if (i == 0) != (len(tbl.ColumnDefinitions) > 0) {
				t.Errorf("event %d: %d column definitions", i, len(tbl.ColumnDefinitions))
			}
			if cells := tbl.Rows[0].Cells; cells[0] != "rc" || cells[1] != float64(replicas) {
				t.Errorf("event %d: cells %v, want rc with %d desired", i, cells, replicas)
			}
			var obj map[string]any
			if err := json.Unmarshal(tbl.Rows[0].Object.Raw, &obj); err != nil || str(obj, "kind") != "ReplicationController" || str(obj, "metadata.resourceVersion") != tbl.ResourceVersion {
				t.Errorf("event %d: object %s (%v), table rv %s", i, tbl.Rows[0].Object.Raw, err, tbl.ResourceVersion)
			}
		}
		c.mustDo("DELETE", rcPath+"/rc", "", `{"propagationPolicy":"Background"}`, 200)
		if typ, tbl := next(); typ != "DELETED" || len(tbl.Rows) != 1 || tbl.Rows[0].Cells[0] != "rc" {
			t.Errorf("delete event: %s %+v", typ, tbl)
		}
	})
}
