package jsonscan

import (
	"encoding/json"
	"testing"
)

func TestNumber(t *testing.T) {
	for _, tt := range []struct {
		in   string
		end  int
		want string
	}{
		{"0", 1, ""},
		{"-12.5e+3,", 8, ""},
		{"10E2]", 4, ""},
		{"01", 1, ""},
		{"-", 1, WantDigit},
		{"-x", 1, WantDigit},
		{"1.", 2, WantFractionDigit},
		{"1.e3", 2, WantFractionDigit},
		{"1e", 2, WantExponentDigit},
		{"1e+", 3, WantExponentDigit},
	} {
		end, want := Number([]byte(tt.in), 0)
		if end != tt.end || want != tt.want {
			t.Errorf("Number(%q) = %d, %q; want %d, %q", tt.in, end, want, tt.end, tt.want)
		}
		if want == "" && !json.Valid([]byte(tt.in[:end])) {
			t.Errorf("Number(%q) accepted %q, which encoding/json refuses", tt.in, tt.in[:end])
		}
	}
}

func TestHex4(t *testing.T) {
	for in, want := range map[string]rune{"00e9": 0xe9, "D83D": 0xd83d, "aBcD": 0xabcd} {
		if r, ok := Hex4([]byte(in)); !ok || r != want {
			t.Errorf("Hex4(%q) = %#x, %v; want %#x", in, r, ok, want)
		}
	}
	for _, in := range []string{"", "123", "12g4"} {
		if _, ok := Hex4([]byte(in)); ok {
			t.Errorf("Hex4(%q) accepted", in)
		}
	}
}
