package envtest

import (
	"testing"

	"github.com/listwatch/listwatch/controllermanager"
)

// BenchmarkStart is the cost of an environment from Start until it is
// stopped: bare on each store, and on memory with every controller
// running and synced.
func BenchmarkStart(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts Options
	}{
		{"memory", Options{}},
		{"etcd", Options{Etcd: true}},
		{"memory+controllers", Options{Controllers: controllermanager.AllControllers()}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				_, stop, err := start(b.TempDir(), bc.opts)
				stop()
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
