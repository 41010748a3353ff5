//go:build !race

package workqueue

// stressAdds is the number of Adds of the two-workers stress test.
const stressAdds = 1_000_000
