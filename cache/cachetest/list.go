package cachetest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
)

// continueToken is what a Continue string encodes. It is opaque to clients.
type continueToken struct {
	Version int    `json:"v"`
	Rev     int64  `json:"rv"`    // the revision every page is served at
	Start   string `json:"start"` // the last key served; the next page starts after it
	Page    int    `json:"page"`  // the page number of the page that issued the token
}

const tokenVersion = 1

func encodeContinue(t continueToken) string {
	t.Version = tokenVersion
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(s string) (continueToken, error) {
	var t continueToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err == nil && (t.Version != tokenVersion || t.Rev <= 0 || t.Start == "" || t.Page < 1) {
		err = fmt.Errorf("bad fields")
	}
	if err != nil {
		return continueToken{}, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
	}
	return t, nil
}

// List returns one page of the objects that match opts' selectors, sorted by
// key, with the semantics of a real API server:
//
//   - resourceVersion "" or "0": the latest state.
//   - resourceVersion N with resourceVersionMatch "" or NotOlderThan: the
//     latest state if N <= Revision(), else the error of
//     NewTooLargeResourceVersionError.
//   - N with Exact: the state at revision N; too large as above, 410 Expired
//     if N < CompactedRevision(). Exact with "0", or any
//     resourceVersionMatch without a resourceVersion, is 400.
//   - limit > 0: at most limit items; if more remain, Continue and
//     RemainingItemCount are set. The next page is asked for with Continue
//     and an empty resourceVersion (400 otherwise) and is served at the
//     first page's revision whatever was written since; 410 Expired if that
//     revision was compacted away, 400 if the token is malformed.
//
// Malformed resourceVersions and selectors are 400 BadRequest. The returned
// items are shared with the Source and must not be mutated.
func (s *Source[T]) List(ctx context.Context, opts metav1.ListOptions) (*cache.List[T], error) {
	if err := s.begin(ctx, OpList, opts); err != nil {
		return nil, err
	}
	f, err := s.newFilter(opts)
	if err != nil {
		return nil, err
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	var (
		rev   int64
		after string // serve keys above this one
		page  = 1
	)
	if opts.Continue != "" {
		if opts.ResourceVersion != "" || opts.ResourceVersionMatch != "" {
			return nil, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
		}
		tok, err := decodeContinue(opts.Continue)
		if err != nil {
			return nil, err
		}
		if tok.Rev > s.rev {
			return nil, apierrors.NewBadRequest("invalid continue token: revision from the future")
		}
		if tok.Rev < s.compacted {
			return nil, expiredContinue(tok.Rev, s.compacted)
		}
		rev, after, page = tok.Rev, tok.Start, tok.Page+1
	} else {
		rev, err = s.listRevision(opts)
		if err != nil {
			return nil, err
		}
	}
	if s.pageFail && page > s.pageFailK {
		s.pageFail = false
		return nil, s.pageFailEr
	}

	state := s.stateAt(rev)
	var keys []string
	for _, k := range sortedKeys(state) {
		if k > after && f.match(state[k]) {
			keys = append(keys, k)
		}
	}
	limit := opts.Limit
	if s.cfg.unpagedRV0 && opts.ResourceVersion == "0" {
		limit = 0
	}
	out := &cache.List[T]{ResourceVersion: strconv.FormatInt(rev, 10)}
	if limit > 0 && int64(len(keys)) > limit {
		rest := int64(len(keys)) - limit
		keys = keys[:limit]
		out.Continue = encodeContinue(continueToken{Rev: rev, Start: keys[len(keys)-1], Page: page})
		out.RemainingItemCount = &rest
	}
	out.Items = make([]T, len(keys))
	for i, k := range keys {
		out.Items[i] = state[k]
	}
	return out, nil
}

// listRevision resolves the revision a first-page list is served at.
// s.mu is held.
func (s *Source[T]) listRevision(opts metav1.ListOptions) (int64, error) {
	match := opts.ResourceVersionMatch
	switch match {
	case "", metav1.ResourceVersionMatchNotOlderThan, metav1.ResourceVersionMatchExact:
	default:
		return 0, apierrors.NewBadRequest(fmt.Sprintf("unsupported resourceVersionMatch %q", match))
	}
	if opts.ResourceVersion == "" {
		if match != "" {
			return 0, apierrors.NewBadRequest("resourceVersionMatch is forbidden unless resourceVersion is provided")
		}
		return s.rev, nil
	}
	n, err := parseRV(opts.ResourceVersion)
	if err != nil {
		return 0, err
	}
	switch {
	case n == 0 && match == metav1.ResourceVersionMatchExact:
		return 0, apierrors.NewBadRequest(`resourceVersionMatch "Exact" is forbidden for resourceVersion "0"`)
	case n == 0:
		return s.rev, nil
	case n > s.rev:
		return 0, NewTooLargeResourceVersionError(n, s.rev)
	case match != metav1.ResourceVersionMatchExact:
		return s.rev, nil
	case n < s.compacted:
		return 0, expiredRV(n, s.compacted)
	}
	return n, nil
}
