package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestPrintUp: people get the export line, scripts one JSON line and
// nothing else.
func TestPrintUp(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   upConfig
		check func(t *testing.T, out string)
	}{
		{"text", upConfig{Output: "text", Port: 6443}, func(t *testing.T, out string) {
			if !strings.Contains(out, "export KUBECONFIG=/d/kubeconfig") || !strings.Contains(out, "port 6443 is busy") {
				t.Errorf("text output:\n%s", out)
			}
		}},
		{"json", upConfig{Output: "json", Port: 6443}, func(t *testing.T, out string) {
			if strings.Count(out, "\n") != 1 {
				t.Fatalf("json output is not one line:\n%s", out)
			}
			var got struct {
				URL, Kubeconfig string
				PID             int
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatal(err)
			}
			if got.URL != "https://127.0.0.1:7000" || got.Kubeconfig != "/d/kubeconfig" || got.PID != os.Getpid() {
				t.Errorf("json output %+v", got)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			printUp(&out, "https://127.0.0.1:7000", "/d/kubeconfig", tc.cfg)
			tc.check(t, out.String())
		})
	}
}

// TestUntilOrphaned: the stop comes once the parent changes, not before,
// and not at all when ctx ends first.
func TestUntilOrphaned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ppid atomic.Int64
		ppid.Store(42)
		var stopped atomic.Bool
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go untilOrphaned(ctx, func() int { return int(ppid.Load()) }, time.Second, func() { stopped.Store(true) })
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if stopped.Load() {
			t.Fatal("stopped while the parent lives")
		}
		ppid.Store(1) // the parent exited; init adopted the process
		time.Sleep(time.Second)
		synctest.Wait()
		if !stopped.Load() {
			t.Fatal("not stopped a second after the parent exited")
		}

		stopped.Store(false)
		ctx2, cancel2 := context.WithCancel(t.Context())
		go untilOrphaned(ctx2, func() int { return int(ppid.Load()) }, time.Second, func() { stopped.Store(true) })
		synctest.Wait()
		cancel2()
		ppid.Store(7)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if stopped.Load() {
			t.Fatal("stopped after ctx ended")
		}
	})
}
