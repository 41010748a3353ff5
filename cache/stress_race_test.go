//go:build race

package cache_test

// stalledInformerUpdates is smaller under the race detector, which slows
// every synchronising operation down by an order of magnitude.
const stalledInformerUpdates = 100_000
