//go:build race

package main

// raceEnabled: the race detector slows the server tenfold and grows its
// memory, so the probes that measure time or memory only report then.
const raceEnabled = true
