package cache

import (
	"errors"
	"math/big"
	"testing"
)

func TestCompareResourceVersion(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
		err  bool
	}{
		{a: "1", b: "1", want: 0},
		{a: "1", b: "2", want: -1},
		{a: "10", b: "9", want: 1},
		{a: "9", b: "10", want: -1},
		{a: "123", b: "124", want: -1},
		{a: "0", b: "1", want: -1},
		{a: "0", b: "0", want: 0},
		{a: "18446744073709551616", b: "18446744073709551615", want: 1}, // past uint64
		{a: "", b: "1", err: true},
		{a: "1", b: "", err: true},
		{a: "01", b: "1", err: true},
		{a: "1", b: "-1", err: true},
		{a: "abc", b: "1", err: true},
		{a: "1", b: "1.5", err: true},
		{a: "1", b: " 1", err: true},
	} {
		got, err := CompareResourceVersion(tc.a, tc.b)
		if tc.err {
			if !errors.Is(err, ErrResourceVersionNotComparable) {
				t.Errorf("Compare(%q, %q): err %v, want ErrResourceVersionNotComparable", tc.a, tc.b, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Compare(%q, %q) = %d, %v; want %d", tc.a, tc.b, got, err, tc.want)
		}
	}
}

func TestNewerResourceVersion(t *testing.T) {
	for _, tc := range []struct{ cur, next, want string }{
		{"", "5", "5"},
		{"5", "", "5"},
		{"5", "4", "5"},
		{"5", "5", "5"},
		{"5", "6", "6"},
		{"5", "opaque", "opaque"},
		{"opaque", "3", "3"},
	} {
		if got := newerResourceVersion(tc.cur, tc.next); got != tc.want {
			t.Errorf("newerResourceVersion(%q, %q) = %q, want %q", tc.cur, tc.next, got, tc.want)
		}
	}
}

// FuzzCompareResourceVersion checks the comparison against big-integer
// arithmetic wherever both inputs are comparable, and that it never panics.
func FuzzCompareResourceVersion(f *testing.F) {
	for _, s := range [][2]string{{"1", "2"}, {"10", "9"}, {"", "0"}, {"007", "7"}, {"99999999999999999999", "1"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		got, err := CompareResourceVersion(a, b)
		back, errBack := CompareResourceVersion(b, a)
		if (err == nil) != (errBack == nil) {
			t.Fatalf("Compare(%q, %q) err %v but reversed err %v", a, b, err, errBack)
		}
		if err != nil {
			return
		}
		if got != -back {
			t.Fatalf("Compare(%q, %q) = %d, reversed %d", a, b, got, back)
		}
		x, okA := new(big.Int).SetString(a, 10)
		y, okB := new(big.Int).SetString(b, 10)
		if !okA || !okB {
			t.Fatalf("Compare accepted %q, %q, which are not integers", a, b)
		}
		if want := x.Cmp(y); got != want {
			t.Fatalf("Compare(%q, %q) = %d, big.Int says %d", a, b, got, want)
		}
	})
}
