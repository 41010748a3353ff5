package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
)

func TestControllerManagerFlags(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, c controllermanager.Config)
	}{
		{name: "defaults", check: func(t *testing.T, c controllermanager.Config) {
			if c.LeaderElection.Disabled || c.BindAddress != "127.0.0.1:10257" || len(c.Controllers) != len(controllermanager.AllControllers()) || c.Client.QPS != client.DefaultQPS ||
				c.LeaderElection.LeaseDuration != 15*time.Second || c.PodLifecycle.StartDelay != time.Second {
				t.Errorf("defaults: %+v", c)
			}
		}},
		{name: "chosen controllers, no election", args: []string{"--controllers=replication, podlifecycle", "--leader-elect=false"},
			check: func(t *testing.T, c controllermanager.Config) {
				if !slices.Equal(c.Controllers, []string{"replication", "podlifecycle"}) || !c.LeaderElection.Disabled {
					t.Errorf("got %v, election disabled %v", c.Controllers, c.LeaderElection.Disabled)
				}
			}},
		{name: "zero start delay means none", args: []string{"--pod-start-delay=0", "--nodes=a,b", "--pod-fail-fraction=0.25"},
			check: func(t *testing.T, c controllermanager.Config) {
				if c.PodLifecycle.StartDelay != time.Nanosecond || !slices.Equal(c.PodLifecycle.Nodes, []string{"a", "b"}) || c.PodLifecycle.FailFraction != 0.25 {
					t.Errorf("got %+v", c.PodLifecycle)
				}
			}},
		{name: "lease, workers, rate", args: []string{"--leader-elect-resource-name=x", "--leader-elect-lease-duration=3s", "--concurrent-rc-syncs=9", "--burst-replicas=7", "--bind-address=",
			"--kube-api-qps=200", "--kube-api-burst=300"},
			check: func(t *testing.T, c controllermanager.Config) {
				if c.LeaderElection.Name != "x" || c.LeaderElection.LeaseDuration != 3*time.Second ||
					c.Replication.Controller.Workers != 9 || c.Replication.BurstReplicas != 7 || c.BindAddress != "" ||
					c.Client.QPS != 200 || c.Client.Burst != 300 {
					t.Errorf("got %+v", c)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("controller-manager", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			o := defaultCMOptions()
			o.addFlags(fs, "bind-address")
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			tt.check(t, o.config(&client.Config{REST: &rest.Config{Host: "127.0.0.1:1"}}, nil))
		})
	}
	// A name that is no controller is refused before anything runs.
	o := defaultCMOptions()
	o.controllers = "replication,scheduler"
	_, err := controllermanager.New(o.config(&client.Config{REST: &rest.Config{Host: "127.0.0.1:1"}}, nil))
	if err == nil || !strings.Contains(err.Error(), `unknown controller "scheduler"`) {
		t.Errorf("unknown controller: %v", err)
	}
}

func TestUpControllerManagerFlags(t *testing.T) {
	tests := []struct {
		args        []string
		wantEnabled bool
		wantBind    string
	}{
		{args: nil, wantEnabled: true, wantBind: ""},
		{args: []string{"--controller-manager=false"}, wantEnabled: false, wantBind: ""},
		{args: []string{"--controller-manager-bind-address=127.0.0.1:10257", "--pod-start-delay=0"}, wantEnabled: true, wantBind: "127.0.0.1:10257"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			// A copy of the defaults `up` starts from, not the shared one.
			u := *upControllerManager
			fs := flag.NewFlagSet("up", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			u.addUpFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if u.enabled != tt.wantEnabled || u.bindAddress != tt.wantBind {
				t.Errorf("enabled %v bind %q, want %v %q", u.enabled, u.bindAddress, tt.wantEnabled, tt.wantBind)
			}
			if !u.enabled {
				// Disabled, the component returns at once without
				// reading the kubeconfig.
				if err := u.run(context.Background(), componentEnv{Kubeconfig: "/nonexistent"}); err != nil {
					t.Errorf("disabled component: %v", err)
				}
			}
		})
	}
}

// TestUpWalkthrough is the README's walkthrough on a real `up`, whose own
// controller-manager (leader election on, default pod start delay) does
// the work: apply an RC and a service, watch them converge, scale, delete.
func TestUpWalkthrough(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".listwatch")
	u := startUp(t, upConfig{Dir: dir, Port: 0, StorageBackend: backendEtcd,
		CustomResourcesFile: filepath.Join(examplesDir, "custom-resources.yaml")})
	defer func() {
		if err := u.stop(); err != nil {
			t.Errorf("up: %v", err)
		}
	}()
	c := clusterAt(t, u.kubeconfig)
	ctx := context.Background()
	out, err := runCLI(t, c, "", "apply", "-f", filepath.Join(examplesDir, "rc.yaml"), "-f", filepath.Join(examplesDir, "service.yaml"),
		"-f", filepath.Join(examplesDir, "widget.yaml"))
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	c.waitConverged(t, "default", "web", 5, 30*time.Second)
	//lint:ignore SA1019 the endpoints controller writes core/v1 Endpoints.
	eps := client.For[*corev1.Endpoints](c.client, "default")
	waitFor(t, 10*time.Second, "5 endpoint addresses", func() (bool, string) {
		ep, err := eps.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, s := range ep.Subsets {
			n += len(s.Addresses)
		}
		return n == 5, fmt.Sprintf("%d addresses", n)
	})
	if out, err := runCLI(t, c, "", "scale", "rc/web", "--replicas", "2"); err != nil {
		t.Fatalf("scale: %v\n%s", err, out)
	}
	c.waitConverged(t, "default", "web", 2, 30*time.Second)
	if out, err := runCLI(t, c, "", "delete", "rc", "web"); err != nil {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	waitFor(t, 20*time.Second, "the rc's pods to be collected", func() (bool, string) {
		n := 0
		for _, p := range c.listPods(t, "default") {
			if p.Labels["app"] == "web" {
				n++
			}
		}
		_, err := c.rcs.Namespace("default").Get(ctx, "web", metav1.GetOptions{})
		return n == 0 && apierrors.IsNotFound(err), fmt.Sprintf("%d pods, rc: %v", n, err)
	})
}
