package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestServiceRangeFlags(t *testing.T) {
	cfg, err := parseServerFlags(t, "--service-cluster-ip-range=10.0.0.0/24", "--service-node-port-range=31000-31100")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ServiceClusterIPRange != "10.0.0.0/24" || cfg.ServiceNodePortRange != "31000-31100" {
		t.Fatalf("parsed %q %q", cfg.ServiceClusterIPRange, cfg.ServiceNodePortRange)
	}

	// A bad range stops the start before anything is opened.
	for _, args := range [][]string{
		{"--service-cluster-ip-range=10.0.0.0/33"},
		{"--service-node-port-range=32767-30000"},
	} {
		bad, err := parseServerFlags(t, append(args, "--storage-backend=memory", "--secure-port=0", "--cert-dir="+t.TempDir())...)
		if err != nil {
			t.Fatal(err)
		}
		if srv, err := startServer(context.Background(), bad, testLogger(t)); err == nil {
			_ = srv.shutdown()
			t.Fatalf("%v: started", args)
		} else if !strings.Contains(err.Error(), "service") {
			t.Fatalf("%v: %v, want an error about the range", args, err)
		}
	}

	// The server allocates from the ranges given.
	good, err := parseServerFlags(t, "--storage-backend=memory", "--secure-port=0", "--cert-dir="+t.TempDir(), "--anonymous-auth",
		"--service-cluster-ip-range=10.0.0.0/24", "--service-node-port-range=31000-31100")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := startServer(context.Background(), good, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.shutdown() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.waitReady(ctx); err != nil {
		t.Fatal(err)
	}
	// The kubernetes service, with the range's first IP, as kube makes it.
	var k8s struct {
		Metadata struct{ Labels map[string]string }
		Spec     struct {
			ClusterIP string
			Selector  map[string]string
			Ports     []struct {
				Name       string
				Port       int
				TargetPort int
			}
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/api/v1/namespaces/default/services/kubernetes", nil)
		if err != nil {
			t.Fatal(err)
		}
		var resp responseBuffer
		srv.api.Handler().ServeHTTP(&resp, req)
		if resp.code() == http.StatusOK {
			if err := json.Unmarshal(resp.body.Bytes(), &k8s); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no kubernetes service: %d %s", resp.code(), resp.body.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "https://"))
	if k8s.Spec.ClusterIP != "10.0.0.1" || len(k8s.Spec.Ports) != 1 || k8s.Spec.Ports[0].Name != "https" || k8s.Spec.Ports[0].Port != 443 ||
		strconv.Itoa(k8s.Spec.Ports[0].TargetPort) != port || k8s.Spec.Selector != nil || k8s.Metadata.Labels["provider"] != "kubernetes" {
		t.Errorf("kubernetes service %+v, want 10.0.0.1, https 443 to %s", k8s, port)
	}

	body := `{"metadata":{"name":"web"},"spec":{"type":"NodePort","ports":[{"port":80}]}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/api/v1/namespaces/default/services", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	var resp responseBuffer
	srv.api.Handler().ServeHTTP(&resp, req)
	if resp.code() != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.code(), resp.body.String())
	}
	var svc struct {
		Spec struct {
			ClusterIP string
			Ports     []struct{ NodePort int }
		}
	}
	if err := json.Unmarshal(resp.body.Bytes(), &svc); err != nil {
		t.Fatal(err)
	}
	_, cidr, _ := net.ParseCIDR("10.0.0.0/24")
	if ip := net.ParseIP(svc.Spec.ClusterIP); ip == nil || !cidr.Contains(ip) {
		t.Errorf("clusterIP %q, want one of 10.0.0.0/24", svc.Spec.ClusterIP)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].NodePort < 31000 || svc.Spec.Ports[0].NodePort > 31100 {
		t.Errorf("node ports %+v, want one of 31000-31100", svc.Spec.Ports)
	}
}
