//go:build race

package protodecode

// defaultIters is smaller under the race detector, which slows decoding
// tenfold and finds nothing in it that TestConcurrent does not: test.sh
// runs the full count without it.
const defaultIters = 30
