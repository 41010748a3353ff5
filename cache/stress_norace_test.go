//go:build !race

package cache_test

// stalledInformerUpdates is the number of updates of the stalled-handler
// informer test.
const stalledInformerUpdates = 1_000_000
