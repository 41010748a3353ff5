package serve

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/listwatch/listwatch/apiserver"
)

// healthCheck is one named check of the health endpoints.
type healthCheck = apiserver.ReadyCheck

// healthTimeout bounds one run of the checks, so that a hung storage
// answers a probe with a failure instead of hanging it.
const healthTimeout = 5 * time.Second

// health serves kube-apiserver's health endpoints: /livez (the process
// serves requests), /readyz (it can serve them correctly: storage reachable,
// start-up done, not shutting down) and /healthz (the older union of both).
// Each answers "ok" or 500 with the failed checks; ?verbose lists every
// check, /readyz/<name> runs one, and ?exclude=<name> skips some.
type health struct {
	live, ready []healthCheck
	log         *slog.Logger
}

func pingCheck() healthCheck {
	return healthCheck{Name: "ping", Check: func(context.Context) error { return nil }}
}

// isHealthPath reports whether health serves path.
func isHealthPath(path string) bool {
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

func (h *health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	endpoint, only, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	checks := h.ready
	if endpoint == "livez" {
		checks = h.live
	}
	if only != "" {
		var one []healthCheck
		for _, c := range checks {
			if c.Name == only {
				one = append(one, c)
			}
		}
		if len(one) == 0 {
			http.NotFound(w, r)
			return
		}
		checks = one
	}
	excluded := map[string]bool{}
	for _, name := range r.URL.Query()["exclude"] {
		excluded[name] = true
	}
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	var report strings.Builder
	failed := false
	for _, c := range checks {
		if excluded[c.Name] {
			fmt.Fprintf(&report, "[+]%s excluded: ok\n", c.Name)
			continue
		}
		if err := c.Check(ctx); err != nil {
			failed = true
			// The reason goes to the server's log only: probes are
			// anonymous.
			h.log.Info("health check failed", "endpoint", endpoint, "check", c.Name, "err", err)
			fmt.Fprintf(&report, "[-]%s failed: reason withheld\n", c.Name)
			continue
		}
		fmt.Fprintf(&report, "[+]%s ok\n", c.Name)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if failed {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "%s%s check failed\n", report.String(), endpoint)
		return
	}
	if _, verbose := r.URL.Query()["verbose"]; verbose {
		fmt.Fprintf(w, "%s%s check passed\n", report.String(), endpoint)
		return
	}
	fmt.Fprint(w, "ok")
}

// readyErr runs the readiness checks in-process and returns the first
// failure, for callers that wait for the server without a client.
func (h *health) readyErr(ctx context.Context) error {
	for _, c := range h.ready {
		if err := c.Check(ctx); err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
	}
	return nil
}
