package cachetest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// history5 builds: a@1 b@2 a@3 (update) -b@4 (delete) c@5.
func history5(t *testing.T, opts ...Option[*corev1.Pod]) *podSource {
	t.Helper()
	s := New(opts...)
	mustCreate(t, s, pod("ns", "a", map[string]string{"app": "x"}))
	mustCreate(t, s, pod("ns", "b", map[string]string{"app": "y"}))
	mustUpdate(t, s, pod("ns", "a", map[string]string{"app": "y"}))
	mustDelete(t, s, "ns", "b")
	mustCreate(t, s, pod("other", "c", map[string]string{"app": "x"}))
	return s
}

func TestListResourceVersion(t *testing.T) {
	tests := []struct {
		name      string
		compact   int64
		opts      listOpts
		wantRV    string
		wantItems []string
		wantErr   func(error) bool
	}{
		{name: "empty rv is latest", opts: listOpts{}, wantRV: "5", wantItems: []string{"ns/a@3", "other/c@5"}},
		{name: "rv 0 is latest", opts: listOpts{RV: "0"}, wantRV: "5", wantItems: []string{"ns/a@3", "other/c@5"}},
		{name: "rv 0 not older than", opts: listOpts{RV: "0", Match: "NotOlderThan"}, wantRV: "5", wantItems: []string{"ns/a@3", "other/c@5"}},
		{name: "old rv is latest", opts: listOpts{RV: "2"}, wantRV: "5", wantItems: []string{"ns/a@3", "other/c@5"}},
		{name: "old rv not older than", opts: listOpts{RV: "2", Match: "NotOlderThan"}, wantRV: "5", wantItems: []string{"ns/a@3", "other/c@5"}},
		{name: "current rv", opts: listOpts{RV: "5"}, wantRV: "5", wantItems: []string{"ns/a@3", "other/c@5"}},
		{name: "not older than compacted rv", compact: 4, opts: listOpts{RV: "1", Match: "NotOlderThan"}, wantRV: "5", wantItems: []string{"ns/a@3", "other/c@5"}},
		{name: "future rv", opts: listOpts{RV: "6"}, wantErr: IsTooLargeResourceVersion},
		{name: "future rv is a timeout", opts: listOpts{RV: "6", Match: "NotOlderThan"}, wantErr: apierrors.IsTimeout},
		{name: "exact 1", opts: listOpts{RV: "1", Match: "Exact"}, wantRV: "1", wantItems: []string{"ns/a@1"}},
		{name: "exact 2", opts: listOpts{RV: "2", Match: "Exact"}, wantRV: "2", wantItems: []string{"ns/a@1", "ns/b@2"}},
		{name: "exact 3", opts: listOpts{RV: "3", Match: "Exact"}, wantRV: "3", wantItems: []string{"ns/a@3", "ns/b@2"}},
		{name: "exact 4", opts: listOpts{RV: "4", Match: "Exact"}, wantRV: "4", wantItems: []string{"ns/a@3"}},
		{name: "exact 5", opts: listOpts{RV: "5", Match: "Exact"}, wantRV: "5", wantItems: []string{"ns/a@3", "other/c@5"}},
		{name: "exact with selector", opts: listOpts{RV: "2", Match: "Exact", Labels: "app=y"}, wantRV: "2", wantItems: []string{"ns/b@2"}},
		{name: "exact at compacted rv", compact: 2, opts: listOpts{RV: "2", Match: "Exact"}, wantRV: "2", wantItems: []string{"ns/a@1", "ns/b@2"}},
		{name: "exact below compacted rv", compact: 2, opts: listOpts{RV: "1", Match: "Exact"}, wantErr: apierrors.IsResourceExpired},
		{name: "exact below compacted rv is gone", compact: 5, opts: listOpts{RV: "4", Match: "Exact"}, wantErr: func(err error) bool {
			var st apierrors.APIStatus
			return errors.As(err, &st) && st.Status().Code == 410
		}},
		{name: "exact future", opts: listOpts{RV: "6", Match: "Exact"}, wantErr: IsTooLargeResourceVersion},
		{name: "exact 0", opts: listOpts{RV: "0", Match: "Exact"}, wantErr: apierrors.IsBadRequest},
		{name: "match without rv", opts: listOpts{Match: "NotOlderThan"}, wantErr: apierrors.IsBadRequest},
		{name: "unknown match", opts: listOpts{RV: "1", Match: "Newest"}, wantErr: apierrors.IsBadRequest},
		{name: "malformed rv", opts: listOpts{RV: "abc"}, wantErr: apierrors.IsBadRequest},
		{name: "negative rv", opts: listOpts{RV: "-1"}, wantErr: apierrors.IsBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := history5(t)
			s.Compact(tt.compact)
			l, err := s.List(context.Background(), tt.opts.opts())
			if tt.wantErr != nil {
				if !tt.wantErr(err) {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.ResourceVersion != tt.wantRV {
				t.Fatalf("rv = %s, want %s", l.ResourceVersion, tt.wantRV)
			}
			if got := keys(l.Items); !slices.Equal(got, tt.wantItems) {
				t.Fatalf("items = %v, want %v", got, tt.wantItems)
			}
			if l.Continue != "" || l.RemainingItemCount != nil {
				t.Fatalf("unpaged list has continue %q / remaining %v", l.Continue, l.RemainingItemCount)
			}
		})
	}
}

func TestTooLargeError(t *testing.T) {
	err := NewTooLargeResourceVersionError(9, 5)
	if !apierrors.IsTimeout(err) || err.ErrStatus.Code != 504 || err.ErrStatus.Details.RetryAfterSeconds != 1 {
		t.Fatalf("status %+v", err.ErrStatus)
	}
	if !IsTooLargeResourceVersion(fmt.Errorf("wrapped: %w", err)) {
		t.Fatalf("wrapped error not recognised")
	}
	if IsTooLargeResourceVersion(apierrors.NewTimeoutError("x", 1)) || IsTooLargeResourceVersion(nil) {
		t.Fatalf("false positive")
	}
}

func TestListSelectors(t *testing.T) {
	s := New(WithField("spec.nodeName", func(p *corev1.Pod) string { return p.Spec.NodeName }))
	for i, spec := range []struct{ ns, name, app, node string }{
		{"a", "p1", "web", "n1"}, {"a", "p2", "db", "n2"}, {"b", "p1", "web", "n2"}, {"", "cluster", "web", ""},
	} {
		p := pod(spec.ns, spec.name, map[string]string{"app": spec.app, "i": fmt.Sprint(i)})
		p.Spec.NodeName = spec.node
		mustCreate(t, s, p)
	}
	tests := []struct {
		name    string
		opts    listOpts
		want    []string
		wantErr bool
	}{
		{"everything", listOpts{}, []string{"a/p1@1", "a/p2@2", "b/p1@3", "cluster@4"}, false},
		{"label equality", listOpts{Labels: "app=web"}, []string{"a/p1@1", "b/p1@3", "cluster@4"}, false},
		{"label set", listOpts{Labels: "app in (db),i"}, []string{"a/p2@2"}, false},
		{"label absent", listOpts{Labels: "!app"}, nil, false},
		{"name", listOpts{Fields: "metadata.name=p1"}, []string{"a/p1@1", "b/p1@3"}, false},
		{"namespace", listOpts{Fields: "metadata.namespace=a"}, []string{"a/p1@1", "a/p2@2"}, false},
		{"cluster-scoped namespace", listOpts{Fields: "metadata.namespace="}, []string{"cluster@4"}, false},
		{"not namespace", listOpts{Fields: "metadata.namespace!=a"}, []string{"b/p1@3", "cluster@4"}, false},
		{"registered field", listOpts{Fields: "spec.nodeName=n2"}, []string{"a/p2@2", "b/p1@3"}, false},
		{"both", listOpts{Labels: "app=web", Fields: "spec.nodeName=n2,metadata.namespace=b"}, []string{"b/p1@3"}, false},
		{"bad label selector", listOpts{Labels: "app=(x"}, nil, true},
		{"bad field selector", listOpts{Fields: "metadata.name=a=b"}, nil, true},
		{"unsupported field", listOpts{Fields: "status.phase=Running"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := s.List(context.Background(), tt.opts.opts())
			if tt.wantErr {
				if !apierrors.IsBadRequest(err) {
					t.Fatalf("err = %v, want BadRequest", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := keys(l.Items); !slices.Equal(got, tt.want) {
				t.Fatalf("items = %v, want %v", got, tt.want)
			}
			// Watches select the same objects.
			w := watch(t, s, tt.opts.opts())
			var got []string
			for _, e := range takeAll(t, w) {
				got = append(got, short(e).Key+"@"+short(e).RV)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("watch initial events = %v, want %v", got, tt.want)
			}
		})
	}
}

// listAll follows Continue to the end and returns each page.
func listAll(t *testing.T, s *podSource, opts metav1.ListOptions, between func(page int)) []*cacheList {
	t.Helper()
	var pages []*cacheList
	for {
		l, err := s.List(context.Background(), opts)
		if err != nil {
			t.Fatalf("page %d: %v", len(pages)+1, err)
		}
		pages = append(pages, l)
		if l.Continue == "" {
			return pages
		}
		if between != nil {
			between(len(pages))
		}
		opts = metav1.ListOptions{Limit: opts.Limit, Continue: l.Continue, LabelSelector: opts.LabelSelector, FieldSelector: opts.FieldSelector}
	}
}

func TestListPaging(t *testing.T) {
	s := New[*corev1.Pod]()
	for i := range 10 {
		mustCreate(t, s, pod("ns", fmt.Sprintf("p%02d", i), map[string]string{"even": fmt.Sprint(i%2 == 0)}))
	}
	pages := listAll(t, s, metav1.ListOptions{Limit: 3}, nil)
	var sizes []int
	var remaining []int64
	var all []string
	for _, p := range pages {
		sizes = append(sizes, len(p.Items))
		if p.RemainingItemCount != nil {
			remaining = append(remaining, *p.RemainingItemCount)
		}
		if p.ResourceVersion != "10" {
			t.Fatalf("page rv %s", p.ResourceVersion)
		}
		all = append(all, keys(p.Items)...)
	}
	if !slices.Equal(sizes, []int{3, 3, 3, 1}) || !slices.Equal(remaining, []int64{7, 4, 1}) {
		t.Fatalf("sizes %v remaining %v", sizes, remaining)
	}
	if pages[3].RemainingItemCount != nil {
		t.Fatalf("last page has RemainingItemCount")
	}
	want := keys(s.Items())
	if !slices.Equal(all, want) {
		t.Fatalf("paged items %v, want %v", all, want)
	}

	// Exactly limit items: no continue.
	l, err := s.List(context.Background(), metav1.ListOptions{Limit: 10})
	if err != nil || len(l.Items) != 10 || l.Continue != "" {
		t.Fatalf("limit 10: %v items, continue %q, err %v", len(l.Items), l.Continue, err)
	}

	// Selector with paging.
	pages = listAll(t, s, metav1.ListOptions{Limit: 2, LabelSelector: "even=true"}, nil)
	all = nil
	for _, p := range pages {
		all = append(all, keys(p.Items)...)
	}
	if !slices.Equal(all, []string{"ns/p00@1", "ns/p02@3", "ns/p04@5", "ns/p06@7", "ns/p08@9"}) {
		t.Fatalf("selected pages %v", all)
	}

	// Exact rv with paging: the continuation stays at that revision.
	pages = listAll(t, s, metav1.ListOptions{Limit: 2, ResourceVersion: "4", ResourceVersionMatch: "Exact"}, nil)
	all = nil
	for _, p := range pages {
		all = append(all, keys(p.Items)...)
		if p.ResourceVersion != "4" {
			t.Fatalf("page at rv %s", p.ResourceVersion)
		}
	}
	if !slices.Equal(all, []string{"ns/p00@1", "ns/p01@2", "ns/p02@3", "ns/p03@4"}) {
		t.Fatalf("exact pages %v", all)
	}
}

func TestListPagingSnapshot(t *testing.T) {
	s := New[*corev1.Pod]()
	for i := range 6 {
		mustCreate(t, s, pod("ns", fmt.Sprintf("p%d", i), nil))
	}
	want := keys(s.Items())
	pages := listAll(t, s, metav1.ListOptions{Limit: 2}, func(page int) {
		// Everything a later page would show changes between pages.
		mustDelete(t, s, "ns", fmt.Sprintf("p%d", page*2+1))
		mustUpdate(t, s, pod("ns", fmt.Sprintf("p%d", page*2), map[string]string{"x": "y"}))
		mustCreate(t, s, pod("ns", fmt.Sprintf("p%da", page*2), nil))
	})
	var all []string
	for _, p := range pages {
		all = append(all, keys(p.Items)...)
		if p.ResourceVersion != "6" {
			t.Fatalf("page served at %s, want 6", p.ResourceVersion)
		}
	}
	if !slices.Equal(all, want) {
		t.Fatalf("pages %v, want the state at rv 6 %v", all, want)
	}
	if s.Revision() != 12 {
		t.Fatalf("revision %d", s.Revision())
	}
}

// Concurrent writers never make a paged list inconsistent: the pages always
// add up to the exact state at the first page's revision.
func TestListPagingConcurrentWrites(t *testing.T) {
	s := New[*corev1.Pod]()
	for i := range 50 {
		mustCreate(t, s, pod("ns", fmt.Sprintf("p%02d", i), nil))
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("p%02d", (i*7+g*13)%60)
				if i%3 == 0 {
					_, _ = s.Delete("ns", name)
				} else {
					_, _ = s.Upsert(pod("ns", name, map[string]string{"g": fmt.Sprint(g)}))
				}
			}
		})
	}
	for range 30 {
		pages := listAll(t, s, metav1.ListOptions{Limit: 7}, nil)
		var got []string
		for _, p := range pages {
			if p.ResourceVersion != pages[0].ResourceVersion {
				t.Fatalf("pages at %s and %s", pages[0].ResourceVersion, p.ResourceVersion)
			}
			got = append(got, keys(p.Items)...)
		}
		exact, err := s.List(context.Background(), metav1.ListOptions{ResourceVersion: pages[0].ResourceVersion, ResourceVersionMatch: "Exact"})
		if err != nil {
			t.Fatal(err)
		}
		if want := keys(exact.Items); !slices.Equal(got, want) {
			t.Fatalf("paged %v\nexact %v", got, want)
		}
	}
	close(stop)
	wg.Wait()
}

func TestListContinueErrors(t *testing.T) {
	s := New[*corev1.Pod]()
	for i := range 5 {
		mustCreate(t, s, pod("ns", fmt.Sprintf("p%d", i), nil))
	}
	first, err := s.List(context.Background(), metav1.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	tok := first.Continue
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		name    string
		compact int64
		opts    metav1.ListOptions
		wantErr func(error) bool
	}{
		{"valid", 0, metav1.ListOptions{Continue: tok, Limit: 2}, nil},
		{"at compacted revision", 5, metav1.ListOptions{Continue: tok, Limit: 2}, nil},
		{"with rv", 0, metav1.ListOptions{Continue: tok, ResourceVersion: "5"}, apierrors.IsBadRequest},
		{"with rv 0", 0, metav1.ListOptions{Continue: tok, ResourceVersion: "0"}, apierrors.IsBadRequest},
		{"with match", 0, metav1.ListOptions{Continue: tok, ResourceVersionMatch: "NotOlderThan"}, apierrors.IsBadRequest},
		{"not base64", 0, metav1.ListOptions{Continue: "!!!"}, apierrors.IsBadRequest},
		{"not json", 0, metav1.ListOptions{Continue: enc("nope")}, apierrors.IsBadRequest},
		{"wrong version", 0, metav1.ListOptions{Continue: enc(`{"v":2,"rv":5,"start":"ns/p1","page":1}`)}, apierrors.IsBadRequest},
		{"no start", 0, metav1.ListOptions{Continue: enc(`{"v":1,"rv":5,"page":1}`)}, apierrors.IsBadRequest},
		{"future revision", 0, metav1.ListOptions{Continue: enc(`{"v":1,"rv":99,"start":"ns/p1","page":1}`)}, apierrors.IsBadRequest},
		{"compacted", 6, metav1.ListOptions{Continue: tok}, apierrors.IsResourceExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.compact > 0 {
				for s.Revision() < tt.compact {
					mustCreate(t, s, pod("x", fmt.Sprint(s.Revision()), nil))
				}
				s.Compact(tt.compact)
			}
			l, err := s.List(context.Background(), tt.opts)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got := keys(l.Items); !slices.Equal(got, []string{"ns/p2@3", "ns/p3@4"}) {
					t.Fatalf("second page %v", got)
				}
				return
			}
			if !tt.wantErr(err) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestUnpagedRV0(t *testing.T) {
	s := New(UnpagedRV0[*corev1.Pod]())
	for i := range 5 {
		mustCreate(t, s, pod("ns", fmt.Sprintf("p%d", i), nil))
	}
	l, err := s.List(context.Background(), metav1.ListOptions{ResourceVersion: "0", Limit: 2})
	if err != nil || len(l.Items) != 5 || l.Continue != "" {
		t.Fatalf("rv 0: %d items, continue %q, err %v", len(l.Items), l.Continue, err)
	}
	l, err = s.List(context.Background(), metav1.ListOptions{Limit: 2})
	if err != nil || len(l.Items) != 2 || l.Continue == "" {
		t.Fatalf("rv \"\": %d items, continue %q, err %v", len(l.Items), l.Continue, err)
	}
}

func TestListContextDone(t *testing.T) {
	s := history5(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.List(ctx, metav1.ListOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("List = %v", err)
	}
	if _, err := s.Watch(ctx, metav1.ListOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch = %v", err)
	}
	if s.ListCalls() != 1 || s.WatchCalls() != 1 {
		t.Fatalf("calls %d %d", s.ListCalls(), s.WatchCalls())
	}
}
