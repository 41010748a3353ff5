package cachetest

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ErrWatchBroken is what Next returns after BreakWatches(nil).
var ErrWatchBroken = errors.New("cachetest: watch stream broken")

// NewTooLargeResourceVersionError returns the error a real API server gives
// for a resourceVersion newer than anything it has seen: a 504 Timeout
// (apierrors.IsTimeout) whose details carry one cause of type
// metav1.CauseTypeResourceVersionTooLarge and ask the client to retry after
// one second.
func NewTooLargeResourceVersionError(requested, current int64) *apierrors.StatusError {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", requested, current), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{
		Type:    metav1.CauseTypeResourceVersionTooLarge,
		Message: "Too large resource version",
	}}
	return err
}

// IsTooLargeResourceVersion reports whether err (or an error it wraps) is
// the error of NewTooLargeResourceVersionError.
func IsTooLargeResourceVersion(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	return statusIsTooLarge(st.Status())
}

func statusIsTooLarge(st metav1.Status) bool {
	if st.Details == nil {
		return false
	}
	for _, c := range st.Details.Causes {
		if c.Type == metav1.CauseTypeResourceVersionTooLarge {
			return true
		}
	}
	return false
}

func expiredRV(rv, compacted int64) *apierrors.StatusError {
	return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, compacted))
}

func expiredContinue(rv, compacted int64) *apierrors.StatusError {
	return apierrors.NewResourceExpired(fmt.Sprintf(
		"The provided continue parameter is too old to display a consistent list result (resource version %d, compacted at %d). "+
			"You can start a new list without the continue parameter.", rv, compacted))
}
