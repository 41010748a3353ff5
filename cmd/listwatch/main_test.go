package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/listwatch/listwatch/internal/kubelog"
)

// execMainEnv, set in its environment, makes the test binary the listwatch
// binary: TestMain dispatches its arguments as main would, so a test can
// run a command in a process of its own (and kill it) without a build.
const execMainEnv = "LISTWATCH_TEST_EXEC_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(execMainEnv) != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		code := dispatch(ctx, os.Args[1:], os.Stderr)
		stop()
		os.Exit(code)
	}
	kubelog.ToStderr()
	goleak.VerifyTestMain(m)
}

func TestDispatch(t *testing.T) {
	errBoom := errors.New("boom")
	commands["test-ok"] = command{name: "test-ok", summary: "succeeds", run: func(_ context.Context, args []string) error {
		if strings.Join(args, " ") != "a b" {
			return errors.New("wrong args")
		}
		return nil
	}}
	commands["test-fail"] = command{name: "test-fail", summary: "fails", run: func(context.Context, []string) error { return errBoom }}
	t.Cleanup(func() {
		delete(commands, "test-ok")
		delete(commands, "test-fail")
	})
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr []string
	}{
		{name: "no command", wantCode: 2, wantStderr: []string{"Usage: listwatch", "apiserver", "up", "test-ok"}},
		{name: "help", args: []string{"help"}, wantCode: 0, wantStderr: []string{"Usage: listwatch", "succeeds"}},
		{name: "unknown", args: []string{"nope"}, wantCode: 2, wantStderr: []string{`unknown command "nope"`, "Usage"}},
		{name: "success with args", args: []string{"test-ok", "a", "b"}, wantCode: 0},
		{name: "failure", args: []string{"test-fail"}, wantCode: 1, wantStderr: []string{"listwatch test-fail: boom"}},
		{name: "flag help", args: []string{"apiserver", "-h"}, wantCode: 0},
		{name: "bad flag", args: []string{"up", "--no-such-flag"}, wantCode: 1, wantStderr: []string{"no-such-flag"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := dispatch(context.Background(), tt.args, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
				}
			}
		})
	}
}
