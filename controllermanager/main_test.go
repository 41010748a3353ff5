package controllermanager

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/listwatch/listwatch/internal/kubelog"
)

func TestMain(m *testing.M) {
	kubelog.ToStderr()
	goleak.VerifyTestMain(m)
}
