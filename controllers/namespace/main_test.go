package namespace

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/listwatch/listwatch/internal/testbackends"
)

func TestMain(m *testing.M) {
	code := m.Run()
	_ = testbackends.Close()
	if code == 0 {
		// The etcd client's and member's goroutines end a moment after
		// Close: wait for them rather than report them.
		var err error
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if err = goleak.Find(); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
