// Package defaults fills in the unset fields of options structs.
package defaults

// Positive sets *v to def unless *v is positive: for the options whose zero
// value, like any negative one, stands for their default.
func Positive[T ~int | ~int32 | ~int64 | ~float32 | ~float64](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
