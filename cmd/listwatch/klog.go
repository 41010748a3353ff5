package main

import (
	"context"
	"log/slog"
)

// kubeLevels is the slog.Handler Kubernetes' own packages (which log
// through klog) log through: it hands their records to h four levels
// lower when below WARN, so that their informational chatter (some 60
// lines as `up` starts: admission plugins loaded, quota evaluators added,
// caches started) shows only with --log-level=debug, and what a user must
// act on, at WARN and ERROR, keeps its level. klog's V(0) info is then
// DEBUG, and its V(1) and finer below it, shown by no level the flag
// takes. (klog hands its warnings to slog as info: they are debug too.)
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
