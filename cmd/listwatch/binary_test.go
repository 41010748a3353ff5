package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBinaryUp builds the listwatch binary, runs `listwatch up` as a user
// would, queries the cluster through the kubeconfig it prints and stops it
// with SIGINT, expecting a clean exit.
func TestBinaryUp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "listwatch")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, backend := range testBackends {
		t.Run(backend, func(t *testing.T) {
			work := t.TempDir()
			cmd := exec.Command(bin, "up", "--dir", "tmp", "--storage-backend", backend)
			cmd.Dir = work
			cmd.Stderr = tWriter{t}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			// A guard, not an assertion: a hung process must not hang the
			// test run.
			guard := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
			defer guard.Stop()

			sc := bufio.NewScanner(stdout)
			var kc string
			var printed []string
			for sc.Scan() {
				printed = append(printed, sc.Text())
				if path, ok := strings.CutPrefix(sc.Text(), "kubeconfig: "); ok {
					kc = path
					break
				}
			}
			go func() {
				for sc.Scan() {
					printed = append(printed, sc.Text())
				}
				exited <- cmd.Wait()
			}()
			if kc == "" {
				t.Fatalf("no kubeconfig printed: %v\n%s", <-exited, strings.Join(printed, "\n"))
			}
			if want := filepath.Join(work, "tmp", "kubeconfig"); kc != want {
				t.Errorf("kubeconfig %s, want %s", kc, want)
			}
			client, host := kubeClient(t, kc)
			if code, body := do(t, client, "GET", host+"/api/v1/namespaces/default", ""); code != 200 || !strings.Contains(body, `"name":"default"`) {
				t.Errorf("GET default namespace: %d %s", code, body)
			}
			client.CloseIdleConnections()

			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			if err := <-exited; err != nil {
				t.Errorf("listwatch up exited with %v, want 0", err)
			}
			if _, err := os.Stat(filepath.Join(work, "tmp", upTokenFile)); err != nil {
				t.Errorf("token not kept: %v", err)
			}
		})
	}
}
