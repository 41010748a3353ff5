package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/sharding"
	kubesharding "k8s.io/apiserver/pkg/sharding"

	"github.com/listwatch/listwatch/apiserver/internal/crd"
	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/apiserver/internal/wire"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/watchcache"
)

// getObject reads one object, answering 404 in kube's words.
func (s *Server) getObject(ctx context.Context, req request) (*unstructured.Unstructured, storage.KeyValue, error) {
	kv, err := s.cfg.Storage.Get(ctx, registry.KeyFor(req.res, req.namespace, req.name))
	if err != nil {
		return nil, kv, s.storageErr(req, err)
	}
	u, err := req.res.DecodeKV(kv)
	return u, kv, err
}

// storageErr translates a storage error about req's object.
func (s *Server) storageErr(req request, err error) error {
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return apierrors.NewNotFound(req.res.GR(), req.name)
	case errors.Is(err, storage.ErrKeyExists):
		return apierrors.NewAlreadyExists(req.res.GR(), req.name)
	case errors.Is(err, storage.ErrConflict):
		return conflict(req, "the object has been modified; please apply your changes to the latest version and try again")
	}
	return err
}

func conflict(req request, msg string) error {
	return apierrors.NewConflict(req.res.GR(), req.name, errors.New(msg))
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request, req request) error {
	// The object is read from storage whatever resourceVersion is asked
	// (none is older than what storage has), but one that does not parse
	// is refused as kube-apiserver's storage refuses it: a 500 quoting it.
	if _, err := watchcache.ParseResourceVersion(r.URL.Query().Get("resourceVersion")); err != nil {
		return err
	}
	u, _, err := s.getObject(r.Context(), req)
	if err != nil {
		return err
	}
	if req.sub == "scale" {
		sc, err := toScale(req.res, u)
		if err != nil {
			return err
		}
		return writeObject(w, r, scaleResource, http.StatusOK, sc)
	}
	return writeRead(w, r, req.res, u)
}

// listOptions are the parsed query parameters of a list or watch.
type listOptions struct {
	rv         string
	rvMatch    metav1.ResourceVersionMatch
	limit      int64
	continueTo string
	filter     filter
	// shard is the parsed shardSelector; nil when there is none or the
	// server ignores it (Config.DisableShardedListAndWatch).
	shard sharding.Selector
	// watch only
	timeoutSeconds    int64
	bookmarks         bool
	sendInitialEvents *bool
}

// gates are the kube-apiserver feature gates that change how list options
// are read.
type gates struct {
	watchList, shardedListAndWatch bool
}

// gates are the server's.
func (s *Server) gates() gates {
	return gates{watchList: !s.cfg.DisableWatchList, shardedListAndWatch: !s.cfg.DisableShardedListAndWatch}
}

// parseListOptions parses the list options of a list, a watch (watch) or
// a deletecollection, and validates them as kube-apiserver does, with its
// feature gates as g says.
func parseListOptions(r *resource, q url.Values, watch bool, g gates) (listOptions, error) {
	o := listOptions{
		rv:         q.Get("resourceVersion"),
		rvMatch:    metav1.ResourceVersionMatch(q.Get("resourceVersionMatch")),
		continueTo: q.Get("continue"),
	}
	var err error
	if o.filter, err = parseFilter(r, q.Get("labelSelector"), q.Get("fieldSelector")); err != nil {
		return o, err
	}
	// Parameters that do not parse are 400s quoting the parser, as
	// kube-apiserver's parameter codec words them; a resourceVersion is
	// parsed by the watch cache, as by kube's storage, after validation.
	if v := q.Get("limit"); v != "" {
		if o.limit, err = strconv.ParseInt(v, 10, 64); err != nil {
			return o, apierrors.NewBadRequest(err.Error())
		}
		// A limit below 1 is none.
		o.limit = max(o.limit, 0)
	}
	if v := q.Get("timeoutSeconds"); v != "" {
		if o.timeoutSeconds, err = strconv.ParseInt(v, 10, 64); err != nil {
			return o, apierrors.NewBadRequest(err.Error())
		}
	}
	if v := q.Get("allowWatchBookmarks"); v != "" {
		if o.bookmarks, err = strconv.ParseBool(v); err != nil {
			return o, apierrors.NewBadRequest(err.Error())
		}
	}
	if v := q.Get("sendInitialEvents"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, apierrors.NewBadRequest(err.Error())
		}
		o.sendInitialEvents = &b
	}
	if errs := metavalidation.ValidateListOptions(&metainternalversion.ListOptions{
		Watch:                watch,
		ResourceVersion:      o.rv,
		ResourceVersionMatch: o.rvMatch,
		Continue:             o.continueTo,
		SendInitialEvents:    o.sendInitialEvents,
	}, g.watchList); len(errs) > 0 {
		return o, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	if v := q.Get("shardSelector"); v != "" && g.shardedListAndWatch {
		// Parsed by kube-apiserver's own parser, after the options'
		// validation, where its registry parses it; what it refuses is
		// a 500 quoting the parser, as kube-apiserver's registry
		// returns its error unconverted.
		if o.shard, err = kubesharding.Parse(v); err != nil {
			return o, &apierrors.StatusError{ErrStatus: metav1.Status{
				Status:  metav1.StatusFailure,
				Code:    http.StatusInternalServerError,
				Message: fmt.Sprintf("invalid shard selector: %v", err),
			}}
		}
	}
	return o, nil
}

// listResult is one page of a list.
type listResult struct {
	// items are the watch cache's, shared: their kept bytes and memoized
	// serializations are what a list writes.
	items     []*wire.Item
	rev       int64
	continue_ string
	remaining *int64
	// shardInfo echoes the list's shard selector, normalized as kube's
	// Selector.String writes it; nil for an unsharded list and for custom
	// resources.
	shardInfo *metav1.ShardInfo
}

// list reads a page of req's collection through its watch cache, which
// serves every resourceVersion rule (from itself or from storage).
func (s *Server) list(ctx context.Context, req request, o listOptions) (listResult, error) {
	res, err := s.cacheFor(req.res).List(ctx, watchcache.ListOptions{
		ResourceVersion:      o.rv,
		ResourceVersionMatch: o.rvMatch,
		Limit:                o.limit,
		Continue:             o.continueTo,
		Label:                o.filter.labels,
		Field:                o.filter.fields,
		Shard:                o.shard,
		Namespace:            req.namespace,
	})
	if err != nil {
		return listResult{}, err
	}
	if o.rv != "0" {
		// kube-apiserver serves a list at resourceVersion 0 from its
		// watch cache, which left out what it could not decode (and
		// stopped there); other lists wait for the cache to be as fresh
		// as storage, and read storage when it does not get there.
		if err := s.undecodable(ctx, req); err != nil {
			return listResult{}, err
		}
	}
	out := listResult{items: res.Items, rev: res.ResourceVersion, continue_: res.Continue, remaining: res.RemainingItemCount}
	if o.shard != nil && !o.shard.Empty() && !req.res.Custom {
		// kube-apiserver sets shardInfo on the lists that implement
		// metav1.ShardedListInterface: every built-in <Kind>List, but
		// not the UnstructuredList of a custom resource.
		out.shardInfo = &metav1.ShardInfo{Selector: o.shard.String()}
	}
	return out, nil
}

// undecodable is the error of a list of req's collection whose watch
// cache left objects out that it could not decode (custom resources whose
// conversion webhook fails): those still stored and still failing, as
// kube-apiserver's list, which reads them from storage, answers them
// (crd.CorruptObjects). nil when there are none.
func (s *Server) undecodable(ctx context.Context, req request) error {
	errs, _, err := s.stillUndecodable(ctx, req)
	if err != nil || len(errs) == 0 {
		return err
	}
	return crd.CorruptObjects(req.res.GR(), errs)
}

// stillUndecodable returns the decoding errors of the objects of req's
// collection that its watch cache left out and that are still stored and
// still fail, with the lowest revision among them (0 when none): where
// kube-apiserver's watch cache of the collection stopped, its storage
// watch failing there each time it starts again.
func (s *Server) stillUndecodable(ctx context.Context, req request) (errs []error, first int64, err error) {
	c := s.cacheFor(req.res)
	for _, key := range c.Undecodable(registry.PrefixFor(req.res, req.namespace)) {
		kv, err := s.cfg.Storage.Get(ctx, key)
		if errors.Is(err, storage.ErrNotFound) {
			c.Forget(key)
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		if _, err := req.res.DecodeListItem(kv); err != nil {
			errs = append(errs, err)
			if first == 0 || kv.Revision < first {
				first = kv.Revision
			}
		} else {
			c.Forget(key)
		}
	}
	return errs, first, nil
}

// collectionOptions are the list options of a list or (watch) a watch of
// req's collection, which has no subresources.
func (s *Server) collectionOptions(r *http.Request, req request, watch bool) (listOptions, error) {
	if req.sub != "" {
		return listOptions{}, methodNotAllowed(r, req)
	}
	return parseListOptions(req.res, r.URL.Query(), watch, s.gates())
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request, req request) error {
	o, err := s.collectionOptions(r, req, false)
	if err != nil {
		return err
	}
	res, err := s.list(r.Context(), req, o)
	if err != nil {
		return err
	}
	enc, v, err := negotiateTable(r, req.res, true)
	if err != nil {
		return err
	}
	if enc == encTable {
		objs := make([]*unstructured.Unstructured, len(res.items))
		for i, it := range res.items {
			if objs[i], err = listedObject(req.res, it); err != nil {
				return err
			}
		}
		return writeTable(w, r, req.res, v, http.StatusOK, listObject(req.res, res, objs))
	}
	return writeList(w, req.res, enc, res)
}

// listedObject is the object of it, an item of a list of r: decoded from
// its bytes, or, for a custom resource its cache converts by webhook, from
// the JSON the cache made when it converted it (no further call).
func listedObject(r *resource, it *wire.Item) (*unstructured.Unstructured, error) {
	if r.CR == nil || !r.CR.ConvertsByWebhook() || r.CR.IsStorageVersion() {
		return it.Decode()
	}
	js, err := wire.DecodedJSON(it)
	if err != nil {
		return nil, err
	}
	return registry.DecodeStored(js, it.Revision())
}

// listObject builds the <Kind>List of a page whose items are objs.
func listObject(r *resource, res listResult, objs []*unstructured.Unstructured) *unstructured.Unstructured {
	items := make([]any, len(objs))
	for i, it := range objs {
		items[i] = it.Object
	}
	md := map[string]any{"resourceVersion": strconv.FormatInt(res.rev, 10)}
	if res.continue_ != "" || r.AlwaysContinue() {
		md["continue"] = res.continue_
	}
	if res.remaining != nil {
		md["remainingItemCount"] = *res.remaining
	}
	if res.shardInfo != nil {
		md["shardInfo"] = map[string]any{"selector": res.shardInfo.Selector}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": r.APIVersion(),
		"kind":       r.GVK.Kind + "List",
		"metadata":   md,
		"items":      items,
	}}
}
