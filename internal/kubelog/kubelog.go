// Package kubelog routes what Kubernetes' own packages log, through klog,
// into a slog.Handler, with their informational chatter lowered to DEBUG.
// The listwatch command routes it into its logger; tests that run
// Kubernetes' code in process route it to standard error, so that a
// failing test's report is not buried under thousands of klog lines.
package kubelog

import (
	"context"
	"log/slog"
	"os"

	"k8s.io/klog/v2"
)

// Route makes h, through the level mapping of kubeLevels, the handler of
// everything klog logs from now on, each record marked logger=kube. klog's
// logger is process-wide: the last Route wins.
func Route(h slog.Handler) {
	klog.SetSlogLogger(slog.New(kubeLevels{h.WithAttrs([]slog.Attr{slog.String("logger", "kube")})}))
}

// ToStderr routes klog to standard error, where only Kubernetes' errors
// show (klog's warnings reach slog as info): for the TestMain of a test
// binary, or a tool, that runs Kubernetes' code in process, whose
// admission plugins alone log thousands of informational lines over a
// package's tests.
func ToStderr() { Route(slog.NewTextHandler(os.Stderr, nil)) }

// kubeLevels is the slog.Handler Kubernetes' own packages (which log
// through klog) log through: it hands their records to h four levels
// lower when below WARN, so that their informational chatter (some 60
// lines as `listwatch up` starts: admission plugins loaded, quota
// evaluators added, caches started) shows only at DEBUG, and what a user
// must act on, at WARN and ERROR, keeps its level. klog's V(0) info is
// then DEBUG, and its V(1) and finer below it. (klog hands its warnings
// to slog as info: they are debug too.)
type kubeLevels struct{ h slog.Handler }

// kubeLevelShift is how far kubeLevels lowers a record below WARN.
const kubeLevelShift = slog.LevelInfo - slog.LevelDebug

func kubeLevel(l slog.Level) slog.Level {
	if l >= slog.LevelWarn {
		return l
	}
	return l - kubeLevelShift
}

func (k kubeLevels) Enabled(ctx context.Context, l slog.Level) bool {
	return k.h.Enabled(ctx, kubeLevel(l))
}

func (k kubeLevels) Handle(ctx context.Context, r slog.Record) error {
	r.Level = kubeLevel(r.Level)
	return k.h.Handle(ctx, r)
}

func (k kubeLevels) WithAttrs(attrs []slog.Attr) slog.Handler {
	return kubeLevels{k.h.WithAttrs(attrs)}
}

func (k kubeLevels) WithGroup(name string) slog.Handler { return kubeLevels{k.h.WithGroup(name)} }
