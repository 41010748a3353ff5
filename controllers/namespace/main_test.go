package namespace

import (
	"os"
	"testing"

	"github.com/listwatch/listwatch/internal/testbackends"
)

func TestMain(m *testing.M) {
	os.Exit(testbackends.Run(m))
}
