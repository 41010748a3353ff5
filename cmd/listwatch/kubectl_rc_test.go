package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// podWatch is `kubectl get pods -w --output-watch-events` running against
// a cluster, with the pods it has reported so far.
type podWatch struct {
	t      *testing.T
	lines  chan []string
	stderr *lockedBuffer
	// pods maps each pod the watch reported and that was not deleted since
	// to its last row: EVENT NAME READY STATUS RESTARTS AGE.
	pods map[string][]string
}

// lockedBuffer is a bytes.Buffer that the process's stderr copier and the
// test may use at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// watchPods starts the watch; it ends with the test.
func watchPods(t *testing.T, e *kubectlEnv, selector string) *podWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := e.command(ctx, "get", "pods", "-l", selector, "-w", "--output-watch-events")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w := &podWatch{t: t, lines: make(chan []string), stderr: &lockedBuffer{}, pods: map[string][]string{}}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		defer close(w.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			w.lines <- strings.Fields(sc.Text())
		}
	}()
	t.Cleanup(func() {
		cancel()
		for range w.lines {
		}
		_ = cmd.Wait()
	})
	return w
}

// until reads the watch's lines until the pods it reported satisfy done,
// or fails the test after timeout.
func (w *podWatch) until(what string, timeout time.Duration, done func(pods map[string][]string) bool) {
	w.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for !done(w.pods) {
		select {
		case l, open := <-w.lines:
			if !open {
				w.t.Fatalf("kubectl get pods -w ended before %s; stderr: %s", what, w.stderr.String())
			}
			w.apply(l)
		case <-deadline.C:
			w.t.Fatalf("%s: not seen in %v; pods: %s; stderr: %s", what, timeout, w.summary(), w.stderr.String())
		}
	}
}

func (w *podWatch) apply(l []string) {
	if len(l) < 6 || l[0] == "EVENT" {
		return // the header, or a line this test does not read
	}
	switch l[0] {
	case "ADDED", "MODIFIED":
		w.pods[l[1]] = l
	case "DELETED":
		delete(w.pods, l[1])
	}
}

func (w *podWatch) summary() string {
	var out []string
	for name, row := range w.pods {
		out = append(out, fmt.Sprintf("%s %s %s", name, row[2], row[3]))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// running counts the pods reported Running with every container ready.
func running(pods map[string][]string) int {
	n := 0
	for _, row := range pods {
		if row[3] == "Running" && row[2] == "1/1" {
			n++
		}
	}
	return n
}

// TestKubectlReplication is issue 7's scenario driven by an unchanged
// kubectl against a real `up` (embedded etcd, HTTPS, its controller-manager
// with simulated nodes): the example RC is created, `get pods -w` shows its
// replicas Running, `scale` changes their number and `delete` takes the RC
// and, through the garbage collector, its pods.
func TestKubectlReplication(t *testing.T) {
	e := newKubectlEnv(t)
	const timeout = 30 * time.Second
	example, err := filepath.Abs(filepath.Join("..", "..", "examples", "rc.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	w := watchPods(t, e, "app=web")
	r := e.ok("create", "-f", example)
	if !strings.Contains(r.stdout, "replicationcontroller/web created") {
		t.Fatalf("create: %s", r)
	}
	// The example asks for 5.
	w.until("5 Running pods", timeout, func(p map[string][]string) bool { return len(p) == 5 && running(p) == 5 })

	steps := []int{8, 3}
	for _, n := range steps {
		r := e.ok("scale", "rc/web", fmt.Sprintf("--replicas=%d", n))
		if !strings.Contains(r.stdout, "replicationcontroller/web scaled") {
			t.Fatalf("scale to %d: %s", n, r)
		}
		w.until(fmt.Sprintf("%d Running pods and no others", n), timeout, func(p map[string][]string) bool {
			return len(p) == n && running(p) == n
		})
		want := fmt.Sprintf("%d %d", n, n)
		deadline := time.Now().Add(timeout)
		for {
			got := e.ok("get", "rc", "web", "-o", "jsonpath={.status.replicas} {.status.readyReplicas}").stdout
			if got == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("rc status replicas and readyReplicas %q, want %q", got, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	r = e.ok("delete", "rc", "web")
	if !strings.Contains(r.stdout, `replicationcontroller "web" deleted`) {
		t.Fatalf("delete: %s", r)
	}
	w.until("every pod deleted", timeout, func(p map[string][]string) bool { return len(p) == 0 })
	if r := e.ok("get", "pods", "-l", "app=web", "-o", "name"); strings.TrimSpace(r.stdout) != "" {
		t.Errorf("pods left after the RC's deletion: %s", r)
	}
}
