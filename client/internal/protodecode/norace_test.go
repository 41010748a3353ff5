//go:build !race

package protodecode

// defaultIters is the number of random objects per type of
// TestMatchesGenerated (a third of it for the merge and managedFields
// tests).
const defaultIters = 300
