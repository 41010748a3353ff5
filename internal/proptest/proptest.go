// Package proptest runs property tests over seeded random histories.
package proptest

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"testing/synctest"
)

// SeedEnv names the environment variable that replays one seed.
const SeedEnv = "LISTWATCH_SEED"

// ForEachSeed runs fn in a synctest bubble for seeds 1..n (n/10 with
// -short), or for the one seed in LISTWATCH_SEED, stops at the first seed
// that fails with the command that replays it, and returns how many seeds
// ran.
func ForEachSeed(t *testing.T, n int, fn func(t *testing.T, seed uint64)) int {
	t.Helper()
	return forEachSeed(t, n, func(t *testing.T, seed uint64) bool {
		var failed bool
		synctest.Test(t, func(t *testing.T) {
			fn(t, seed)
			failed = t.Failed()
		})
		return failed
	})
}

// ForEachSeedRealTime is ForEachSeed outside a synctest bubble, in real
// time, for whole-path tests over real sockets or an embedded etcd, which
// cannot live in a bubble. Each seed runs as a subtest named after it.
func ForEachSeedRealTime(t *testing.T, n int, fn func(t *testing.T, seed uint64)) int {
	t.Helper()
	return forEachSeed(t, n, func(t *testing.T, seed uint64) bool {
		return !t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { fn(t, seed) })
	})
}

// forEachSeed runs one seed after another until run reports a failure.
func forEachSeed(t *testing.T, n int, run func(t *testing.T, seed uint64) (failed bool)) int {
	t.Helper()
	if testing.Short() {
		n = max(1, n/10)
	}
	first := uint64(1)
	if s := os.Getenv(SeedEnv); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", SeedEnv, err)
		}
		first, n = seed, 1
	}
	for seed := first; seed < first+uint64(n); seed++ {
		if run(t, seed) {
			t.Fatalf("seed %d failed; replay with %s=%d go test -run '^%s$'", seed, SeedEnv, seed, t.Name())
		}
	}
	return n
}
