package envtest

import (
	"testing"
	"time"
)

// EventuallyTimeout is how long Eventually waits: what a hung controller
// fails on, never what a test measures.
const EventuallyTimeout = time.Minute

// Eventually polls cond every 20 ms until it holds, and fails t when it
// has not within EventuallyTimeout, with what and what cond last said:
// the wait of a test that creates objects and expects the controllers to
// converge on them, as the kubebuilder book writes with Gomega's
// Eventually.
func Eventually(t testing.TB, what string, cond func() (ok bool, state string)) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(EventuallyTimeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
	}
	t.Fatalf("timed out waiting for %s; last: %s", what, last)
}
