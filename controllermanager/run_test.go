package controllermanager_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/listwatch/listwatch/controllermanager"
)

// runManager makes a manager of cfg, with leader election off and logs
// discarded, and runs it until t ends, when Run must return nil.
func runManager(t *testing.T, cfg controllermanager.Config) *controllermanager.Manager {
	t.Helper()
	cfg.LeaderElection = controllermanager.LeaderElection{Disabled: true}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := controllermanager.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return m
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
