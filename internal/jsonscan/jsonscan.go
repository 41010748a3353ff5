// Package jsonscan holds the pieces of JSON's grammar that the project's
// hand-written decoders (client/internal/jsondecode for typed objects,
// internal/jsontree for unstructured ones) share, so that the two read
// numbers and escapes alike.
package jsonscan

// What Number expected where a malformed number broke off.
const (
	WantDigit         = "a digit"
	WantFractionDigit = "digits after the decimal point"
	WantExponentDigit = "digits in the exponent"
)

// Number scans the number that starts at data[i] and returns the offset
// just past it. For a malformed number, end is the offset of the byte where
// it broke off and want (otherwise empty) says what was expected there.
func Number(data []byte, i int) (end int, want string) {
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		i = digits(data, i)
	default:
		return i, WantDigit
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i >= len(data) || data[i] < '0' || data[i] > '9' {
			return i, WantFractionDigit
		}
		i = digits(data, i)
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || data[i] < '0' || data[i] > '9' {
			return i, WantExponentDigit
		}
		i = digits(data, i)
	}
	return i, ""
}

// digits returns the offset just past the run of decimal digits at i.
func digits(data []byte, i int) int {
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	return i
}

// Hex4 is the value of the four hexadecimal digits at the start of b, as
// in a \u escape; ok is false when there are not four.
func Hex4(b []byte) (r rune, ok bool) {
	if len(b) < 4 {
		return 0, false
	}
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
