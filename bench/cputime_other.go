//go:build !unix

package main

import "time"

// processCPU returns false: the process's CPU time is read only on Unix.
func processCPU() (time.Duration, bool) { return 0, false }
