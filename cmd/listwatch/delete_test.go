package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseObjectRefs(t *testing.T) {
	tests := []struct {
		args    []string
		want    string
		wantErr string
	}{
		{args: nil, want: ""},
		{args: []string{"rc", "web"}, want: "rc/web"},
		{args: []string{"rc", "web", "db"}, want: "rc/web rc/db"},
		{args: []string{"rc/web", "svc/db"}, want: "rc/web svc/db"},
		{args: []string{"rc"}, wantErr: "which names"},
		{args: []string{"rc/web", "db"}, wantErr: "want resource/name"},
		{args: []string{"rc/"}, wantErr: "want resource/name"},
		{args: []string{"rc", "a/b"}, wantErr: "cannot contain /"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			refs, err := parseObjectRefs(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range refs {
				got = append(got, r.resource+"/"+r.name)
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("got %v, want %s", got, tt.want)
			}
		})
	}
}

func TestDelete(t *testing.T) {
	c := startCLICluster(t)
	ctx := context.Background()
	widgetFile := filepath.Join(examplesDir, "widget.yaml")
	for _, f := range []string{"rc.yaml", "service.yaml", "widget.yaml"} {
		if _, err := runCLI(t, c, "", "apply", "-f", filepath.Join(examplesDir, f)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{name: "by resource and name", args: []string{"delete", "rc", "web"}, want: "replicationcontroller/web deleted\n"},
		{name: "gone now", args: []string{"delete", "rc", "web"}, wantErr: "not found"},
		{name: "gone, ignored", args: []string{"delete", "rc/web", "--ignore-not-found"}, want: ""},
		{name: "resource/name with cascade", args: []string{"delete", "svc/web", "--cascade", "orphan"}, want: "service/web deleted\n"},
		{name: "objects of a file", args: []string{"delete", "-f", widgetFile},
			want: "widget.example.listwatch.dev/gadget deleted\nwidget.example.listwatch.dev/gizmo deleted\n"},
		{name: "bad cascade", args: []string{"delete", "rc", "web", "--cascade", "sideways"}, wantErr: "--cascade"},
		{name: "unknown resource", args: []string{"delete", "gizmos", "x"}, wantErr: "doesn't have a resource type"},
		{name: "nothing to delete", args: []string{"delete"}, wantErr: "want either -f FILE"},
		{name: "file and names", args: []string{"delete", "-f", widgetFile, "rc", "web"}, wantErr: "want either -f FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runCLI(t, c, "", tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q (output %q)", err, tt.wantErr, out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out != tt.want {
				t.Errorf("output %q, want %q", out, tt.want)
			}
		})
	}
	if _, err := c.rcs.Namespace("default").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("rc web after delete: %v", err)
	}
}
