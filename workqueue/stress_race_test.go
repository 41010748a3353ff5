//go:build race

package workqueue

// stressAdds is smaller under the race detector, which slows every
// synchronising operation down by an order of magnitude.
const stressAdds = 100_000
