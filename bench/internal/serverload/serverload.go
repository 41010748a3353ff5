// Package serverload holds what bench's load generators (createload,
// watchload) share about the server they load over HTTPS: trusting the CA
// its certificate is signed by (-ca), and the CPU time its processes (-pids:
// the API server and its etcd) spend, read from /proc, so that a run can
// report what the server spent on it.
package serverload

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// RootCAs is the pool of the PEM certificates in the file path, or nil (the
// system's roots) when path is empty.
func RootCAs(path string) (*x509.CertPool, error) {
	if path == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read -ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("-ca %s holds no certificate", path)
	}
	return pool, nil
}

// ParsePIDs parses a comma-separated list of process IDs (-pids); empty
// items are skipped.
func ParsePIDs(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("-pids: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// CPUTime is the user and system CPU time the processes have used, from
// /proc/<pid>/stat (fields 14 and 15, in clock ticks of 1/100 s, which is
// what Linux reports to user space on every architecture Go runs on).
func CPUTime(pids []int) (time.Duration, error) {
	var total time.Duration
	for _, p := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
		if err != nil {
			return 0, fmt.Errorf("cpu time of %d: %w", p, err)
		}
		// The command name (field 2) may hold spaces; fields after it
		// start after its closing parenthesis.
		end := bytes.LastIndexByte(b, ')')
		if end < 0 || end+2 > len(b) {
			return 0, fmt.Errorf("cpu time of %d: malformed stat", p)
		}
		f := strings.Fields(string(b[end+2:]))
		if len(f) < 13 {
			return 0, fmt.Errorf("cpu time of %d: short stat", p)
		}
		for _, s := range f[11:13] {
			ticks, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("cpu time of %d: %w", p, err)
			}
			total += time.Duration(ticks) * 10 * time.Millisecond
		}
	}
	return total, nil
}
