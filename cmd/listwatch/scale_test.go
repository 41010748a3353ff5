package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestScale(t *testing.T) {
	c := startCLICluster(t)
	if _, err := runCLI(t, c, "", "apply", "-f", filepath.Join(examplesDir, "rc.yaml")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		args         []string
		want         string
		wantReplicas int32
		wantErr      string
	}{
		{name: "rc/NAME", args: []string{"scale", "rc/web", "--replicas", "7"}, want: "replicationcontroller/web scaled\n", wantReplicas: 7},
		{name: "resource NAME, flag first", args: []string{"scale", "--replicas=0", "replicationcontroller", "web"}, want: "replicationcontroller/web scaled\n", wantReplicas: 0},
		{name: "explicit namespace", args: []string{"scale", "rc/web", "-n", "default", "--replicas", "2"}, want: "replicationcontroller/web scaled\n", wantReplicas: 2},
		{name: "no replicas", args: []string{"scale", "rc/web"}, wantErr: "--replicas", wantReplicas: 2},
		{name: "negative replicas", args: []string{"scale", "rc/web", "--replicas", "-3"}, wantErr: "--replicas", wantReplicas: 2},
		{name: "nothing to scale", args: []string{"scale", "--replicas", "1"}, wantErr: "want what to scale", wantReplicas: 2},
		{name: "missing rc", args: []string{"scale", "rc/nope", "--replicas", "1"}, wantErr: "not found", wantReplicas: 2},
		{name: "unknown resource", args: []string{"scale", "gizmo/web", "--replicas", "1"}, wantErr: "doesn't have a resource type", wantReplicas: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runCLI(t, c, "", tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q (output %q)", err, tt.wantErr, out)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if out != tt.want {
				t.Errorf("output %q, want %q", out, tt.want)
			}
			rc, err := c.rcs.Namespace("default").Get(context.Background(), "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if *rc.Spec.Replicas != tt.wantReplicas {
				t.Errorf("replicas %d, want %d", *rc.Spec.Replicas, tt.wantReplicas)
			}
		})
	}
}
