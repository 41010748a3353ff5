package watchcache

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/listwatch/listwatch/storage"
)

// The errors below are the Status errors kube-apiserver answers in the same
// cases, so that clients (client-go's reflector in particular) react to them
// as they do to kube-apiserver's.

// errTooOld reports a watch from rv whose following events have left the
// window, which holds every event after from.
func errTooOld(rv, from int64) error {
	return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, from))
}

func errExpired(msg string) error { return apierrors.NewResourceExpired(msg) }

// errContinueExpired reports a continue token whose revision is gone.
func errContinueExpired() error {
	return apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
}

// errTooLarge reports a resourceVersion newer than anything written.
func errTooLarge(rv, cur int64) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", rv, cur), 1)
	if err.ErrStatus.Details == nil {
		err.ErrStatus.Details = &metav1.StatusDetails{}
	}
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{
		Type:    metav1.CauseTypeResourceVersionTooLarge,
		Message: "Too large resource version",
	}}
	return err
}

func errBadRequest(format string, args ...any) error {
	return apierrors.NewBadRequest(fmt.Sprintf(format, args...))
}

// storageError maps what storage says about a read at rev to the Status a
// client expects, wrapping the rest.
func (c *Cache[T]) storageError(err error, rev int64, continuing bool) error {
	switch {
	case errors.Is(err, storage.ErrCompacted) && continuing:
		return errContinueExpired()
	case errors.Is(err, storage.ErrCompacted):
		return errExpired(fmt.Sprintf("too old resource version: %d", rev))
	case errors.Is(err, storage.ErrFutureRevision):
		return errTooLarge(rev, 0)
	}
	return fmt.Errorf("watchcache %s: %w", c.cfg.Prefix, err)
}

// ParseResourceVersion parses a resourceVersion parameter ("" is 0) as
// kube-apiserver's storage does: one that is not an unsigned integer is
// an *InvalidResourceVersionError, which each kind of request answers in
// its own way (a list's 400 quotes it; a get's or a watch's 500 is it,
// and it is that 500 as an apierrors.APIStatus).
func ParseResourceVersion(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	rv, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, &InvalidResourceVersionError{Value: s, Err: err}
	}
	if rv > math.MaxInt64 {
		return 0, errTooLarge(math.MaxInt64, 0)
	}
	return int64(rv), nil
}

// InvalidResourceVersionError is a resourceVersion that does not parse,
// worded as kube-apiserver's storage words it.
type InvalidResourceVersionError struct {
	Value string
	// Err is the parser's error, which is all kube-apiserver's answer to
	// an update quotes.
	Err error
}

func (e *InvalidResourceVersionError) Error() string {
	return field.Invalid(field.NewPath("resourceVersion"), e.Value, e.Err.Error()).Error()
}

func (e *InvalidResourceVersionError) Unwrap() error { return e.Err }

// Status is kube-apiserver's answer to a get or a watch from e: a 500
// with e's text and no reason.
func (e *InvalidResourceVersionError) Status() metav1.Status {
	return metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: e.Error()}
}

// validateWatch applies kube-apiserver's rules for watch parameters.
func validateWatch(o WatchOptions) error {
	if o.SendInitialEvents != nil && o.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan {
		return errBadRequest("sendInitialEvents requires setting resourceVersionMatch to %s", metav1.ResourceVersionMatchNotOlderThan)
	}
	if o.ResourceVersionMatch != "" && o.SendInitialEvents == nil {
		return errBadRequest("resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")
	}
	if o.SendInitialEvents != nil && *o.SendInitialEvents && !o.AllowBookmarks {
		return errBadRequest("allowWatchBookmarks must be set to true when sendInitialEvents is set")
	}
	return nil
}

// validateList applies kube-apiserver's rules for list parameters.
func validateList(o ListOptions) error {
	if m := o.ResourceVersionMatch; m != "" {
		switch {
		case o.ResourceVersion == "":
			return errBadRequest("resourceVersionMatch is forbidden unless resourceVersion is provided")
		case o.Continue != "":
			return errBadRequest("resourceVersionMatch is forbidden when continue is provided")
		case m != metav1.ResourceVersionMatchExact && m != metav1.ResourceVersionMatchNotOlderThan:
			return errBadRequest("unsupported resourceVersionMatch %q: must be %s or %s", m, metav1.ResourceVersionMatchExact, metav1.ResourceVersionMatchNotOlderThan)
		case m == metav1.ResourceVersionMatchExact && o.ResourceVersion == "0":
			return errBadRequest("resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"")
		}
	}
	if o.Limit < 0 {
		return errBadRequest("limit must not be negative")
	}
	return nil
}
