package cache

import (
	"errors"
	"fmt"
)

// ErrResourceVersionNotComparable is wrapped by CompareResourceVersion's
// error when either resourceVersion is not of the comparable form.
var ErrResourceVersionNotComparable = errors.New("resourceVersion is not comparable")

// CompareResourceVersion orders two resourceVersions as KEP-5504 (GA in
// Kubernetes 1.35) lets clients order them: a resourceVersion issued by a
// conforming server is a decimal integer with no sign and no leading zero,
// and of two such the longer is the newer, or, at equal length, the
// lexicographically greater. It returns -1, 0 or +1 as a is older than,
// the same as, or newer than b, and an error wrapping
// ErrResourceVersionNotComparable when either is not of that form (an
// empty one included): such versions are opaque and must not be ordered.
//
// Comparing as strings keeps any length valid: no integer type bounds what
// a server may issue.
func CompareResourceVersion(a, b string) (int, error) {
	if err := checkComparable(a); err != nil {
		return 0, err
	}
	if err := checkComparable(b); err != nil {
		return 0, err
	}
	switch {
	case len(a) < len(b):
		return -1, nil
	case len(a) > len(b):
		return 1, nil
	case a < b:
		return -1, nil
	case a > b:
		return 1, nil
	}
	return 0, nil
}

func checkComparable(rv string) error {
	if rv == "" {
		return fmt.Errorf("empty: %w", ErrResourceVersionNotComparable)
	}
	if rv[0] == '0' && len(rv) > 1 {
		return fmt.Errorf("%q has a leading zero: %w", rv, ErrResourceVersionNotComparable)
	}
	for i := 0; i < len(rv); i++ {
		if rv[i] < '0' || rv[i] > '9' {
			return fmt.Errorf("%q is not a decimal integer: %w", rv, ErrResourceVersionNotComparable)
		}
	}
	return nil
}

// newerResourceVersion returns next when it is newer than cur, or when
// either cannot be ordered and next is not empty (a server whose versions
// are opaque is followed as it speaks); else cur. It is what keeps a
// store's resourceVersion from moving backwards, as when a relist is
// served from a cache that lags what a watch already delivered.
func newerResourceVersion(cur, next string) string {
	if next == "" {
		return cur
	}
	if c, err := CompareResourceVersion(next, cur); err == nil && c <= 0 {
		return cur
	}
	return next
}
