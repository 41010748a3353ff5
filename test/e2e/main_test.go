package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// listwatchBin is the listwatch binary TestMain builds once for the tests
// that run it as a process.
var listwatchBin string

// leakGrace is how long TestMain waits for goroutines to end: the HTTP
// connections between the members of a stopped etcd cluster, and etcd's
// client connections, end a few seconds after Close.
const leakGrace = 20 * time.Second

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "listwatch-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	listwatchBin = filepath.Join(dir, "listwatch")
	// The binary is built as users build it: no race detector, whatever the
	// tests themselves run with.
	build := exec.Command("go", "build", "-o", listwatchBin, "github.com/listwatch/listwatch/cmd/listwatch")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build cmd/listwatch: %v\n%s", err, out)
		return 1
	}

	code := m.Run()
	if code != 0 {
		return code
	}
	// An etcd member stopped with Kill (a simulated crash) can be asked for
	// its version by a peer in the moment between its raft stopping and its
	// peer listener closing; etcd's peer version handler then blocks for
	// good on the closed backend. That goroutine is etcd's, not ours.
	killedPeerVersion := goleak.IgnoreAnyFunction("go.etcd.io/etcd/server/v3/etcdserver/api/etcdhttp.newPeerHandler.versionHandler.func1")
	err = goleak.Find(killedPeerVersion)
	for deadline := time.Now().Add(leakGrace); err != nil && time.Now().Before(deadline); {
		err = goleak.Find(killedPeerVersion) // itself retries for about a second
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		return 1
	}
	return 0
}
