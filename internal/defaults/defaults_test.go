package defaults

import (
	"testing"
	"time"
)

func TestPositive(t *testing.T) {
	for _, tc := range []struct {
		name   string
		v, def time.Duration
		want   time.Duration
	}{
		{"zero takes the default", 0, time.Second, time.Second},
		{"negative takes the default", -time.Nanosecond, time.Second, time.Second},
		{"positive is kept", time.Millisecond, time.Second, time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.v
			Positive(&v, tc.def)
			if v != tc.want {
				t.Errorf("Positive(%v, %v) left %v, want %v", tc.v, tc.def, v, tc.want)
			}
		})
	}
}
