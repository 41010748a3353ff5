package main

import (
	"maps"
	"strings"
	"testing"
)

func TestParseCounters(t *testing.T) {
	const exposition = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 1000
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""} 2
apiserver_request_total_other{code="200"} 7
apiserver_request_total 3
rest_client_requests_total{code="201",host="127.0.0.1:6443",method="POST"} 1.5e+03
`
	tests := []struct {
		name string
		want map[string]float64
	}{
		{"apiserver_request_total", map[string]float64{
			`code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"`: 1000,
			`code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""`:        2,
			``: 3,
		}},
		{"rest_client_requests_total", map[string]float64{`code="201",host="127.0.0.1:6443",method="POST"`: 1500}},
		{"absent_total", map[string]float64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCounters(strings.NewReader(exposition), tt.name)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseCountersErrors(t *testing.T) {
	for _, in := range []string{
		`x_total{code="200" 1`,
		`x_total{code="200"}`,
		`x_total{code="200"} one`,
	} {
		if _, err := parseCounters(strings.NewReader(in), "x_total"); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

func TestParseLabels(t *testing.T) {
	tests := []struct {
		in      string
		want    map[string]string
		wantErr bool
	}{
		{in: ``, want: map[string]string{}},
		{in: `a="x",b=""`, want: map[string]string{"a": "x", "b": ""}},
		{in: `a="x,y=\"z\"",b="\\n\n"`, want: map[string]string{"a": `x,y="z"`, "b": "\\n\n"}},
		{in: `a=x`, wantErr: true},
		{in: `a="x`, wantErr: true},
		{in: `a`, wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseLabels(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("%q: error %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if !tt.wantErr && !maps.Equal(got, tt.want) {
			t.Errorf("%q: got %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestControllersRequests(t *testing.T) {
	label := func(verb, resource, subresource, code string) string {
		return `code="` + code + `",component="apiserver",dry_run="",group="",resource="` + resource +
			`",scope="resource",subresource="` + subresource + `",verb="` + verb + `",version="v1"`
	}
	before := map[string]float64{
		label("POST", "pods", "", "201"):       10,
		label("GET", "deployments", "", "200"): 100,
	}
	after := map[string]float64{
		label("POST", "pods", "", "201"):             1010,
		label("POST", "pods", "binding", "201"):      1000,
		label("PUT", "pods", "status", "200"):        1000,
		label("PUT", "replicasets", "status", "409"): 3,
		label("GET", "deployments", "", "200"):       400,
		label("WATCH", "pods", "", "200"):            1,
		label("LIST", "", "", "200"):                 5,
	}
	ours := map[string]int64{
		"create pods/binding": 1000,
		"update pods/status":  1000,
		"get deployments":     300,
		"watch pods":          2,
	}
	want := map[string]int64{
		"create pods":                     1000,
		"update replicasets/status (409)": 3,
	}
	if got := controllersRequests(before, after, ours); !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
