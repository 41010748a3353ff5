package kubelog

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// TestKubeLogLevels: what Kubernetes' packages log through klog reaches
// the process's logger marked logger=kube, their info four levels lower
// (klog's V(0) at DEBUG, its V(1) and finer under it), errors at ERROR;
// at the default level (info) only their errors show.
func TestKubeLogLevels(t *testing.T) {
	t.Cleanup(klog.ClearLogger)
	logAll := func() {
		klog.Info("plain info")
		klog.InfoS("structured info", "k", "v")
		klog.V(1).Info("verbose info")
		klog.V(4).InfoS("very verbose info")
		klog.ErrorS(errors.New("boom"), "structured error")
		klog.Error("plain error")
	}
	tests := []struct {
		level slog.Level
		want  []string // line prefixes, in order
	}{
		{slog.LevelInfo, []string{
			`level=ERROR msg="structured error" logger=kube err=boom`,
			`level=ERROR msg="plain error" logger=kube`,
		}},
		{slog.LevelDebug, []string{
			`level=DEBUG msg="plain info" logger=kube`,
			`level=DEBUG msg="structured info" logger=kube k=v`,
			`level=ERROR msg="structured error" logger=kube err=boom`,
			`level=ERROR msg="plain error" logger=kube`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.level.String(), func(t *testing.T) {
			var buf bytes.Buffer
			h := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tt.level})
			Route(h)
			log := slog.New(h)
			logAll()
			log.Info("ours")
			var lines []string
			for line := range strings.Lines(buf.String()) {
				// Drop the time= field.
				if _, rest, ok := strings.Cut(line, " "); ok {
					lines = append(lines, strings.TrimSpace(rest))
				}
			}
			want := append(tt.want, `level=INFO msg=ours`)
			if len(lines) != len(want) {
				t.Fatalf("logged\n%s\nwant %d lines:\n%s", strings.Join(lines, "\n"), len(want), strings.Join(want, "\n"))
			}
			for i, w := range want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("line %d: %s\nwant prefix: %s", i, lines[i], w)
				}
			}
		})
	}
}
