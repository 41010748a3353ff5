package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildListwatch builds the listwatch binary as users build it (without
// the race detector the tests may run under, which would multiply its
// memory) and returns its path.
func buildListwatch(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "listwatch")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestBinaryUp builds the listwatch binary, runs `listwatch up` as a user
// would, queries the cluster through the kubeconfig it prints and stops it
// with SIGINT, expecting a clean exit.
func TestBinaryUp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildListwatch(t)
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

	// As a test script runs it: started in the background by a shell,
	// ready when its one JSON line comes, gone when the shell is.
	t.Run("json output, exit with parent", func(t *testing.T) {
		work := t.TempDir()
		sh := exec.Command("sh", "-c", `"$0" up --dir tmp --storage-backend memory --port 0 --output json --exit-with-parent 2>/dev/null & read line; true`, bin)
		sh.Dir = work
		stdin, err := sh.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := sh.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := sh.Start(); err != nil {
			t.Fatal(err)
		}
		guard := time.AfterFunc(2*time.Minute, func() { sh.Process.Kill() })
		defer guard.Stop()
		sc := bufio.NewScanner(stdout)
		if !sc.Scan() {
			t.Fatalf("no line from up: %v", sc.Err())
		}
		var ready struct {
			URL, Kubeconfig string
			PID             int
		}
		if err := json.Unmarshal(sc.Bytes(), &ready); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		defer syscall.Kill(ready.PID, syscall.SIGKILL)
		client, host := kubeClient(t, ready.Kubeconfig)
		if code, _ := do(t, client, "GET", host+"/api/v1/namespaces/default", ""); code != 200 || host != ready.URL {
			t.Errorf("GET default namespace at %s (printed %s): %d", host, ready.URL, code)
		}
		client.CloseIdleConnections()
		// The shell ends; up notices within its period and stops, closing
		// the stdout it shared.
		stdin.Close()
		if err := sh.Wait(); err != nil {
			t.Fatalf("shell: %v", err)
		}
		closed := make(chan struct{})
		go func() {
			for sc.Scan() {
			}
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(30 * time.Second):
			t.Fatal("up still running 30 s after its parent exited")
		}
	})
}
