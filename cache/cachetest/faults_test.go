package cachetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFailNext(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		op      Op
		n       int
		err     error
		calls   int
		wantErr []bool // per call
		check   func(error) bool
	}{
		{"list twice", OpList, 2, boom, 3, []bool{true, true, false}, func(err error) bool { return errors.Is(err, boom) }},
		{"watch once nil err", OpWatch, 1, nil, 2, []bool{true, false}, apierrors.IsInternalError},
		{"cancelled", OpList, 0, boom, 1, []bool{false}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := history5(t)
			s.FailNext(tt.op, 5, boom)
			s.FailNext(tt.op, tt.n, tt.err) // replaces the first
			other := OpWatch
			if tt.op == OpWatch {
				other = OpList
			}
			for i := range tt.calls {
				var err error
				if tt.op == OpList {
					_, err = s.List(context.Background(), metav1.ListOptions{})
				} else {
					var w interface{ Stop() }
					w, err = s.Watch(context.Background(), metav1.ListOptions{ResourceVersion: "5"})
					if err == nil {
						w.Stop()
					}
				}
				if (err != nil) != tt.wantErr[i] || (err != nil && !tt.check(err)) {
					t.Fatalf("call %d: err = %v", i, err)
				}
			}
			// The other op is unaffected.
			var err error
			if other == OpList {
				_, err = s.List(context.Background(), metav1.ListOptions{})
			} else {
				var w interface{ Stop() }
				w, err = s.Watch(context.Background(), metav1.ListOptions{ResourceVersion: "5"})
				if err == nil {
					w.Stop()
				}
			}
			if err != nil {
				t.Fatalf("%v failed: %v", other, err)
			}
		})
	}
}

func TestFailListAfterPages(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name string
		k    int
		// per List call of the script: limit (0: unpaged) or -1 for "continue
		// from the previous page"; and whether it fails.
		script []struct {
			limit int64
			fail  bool
		}
	}{
		{"fail third page", 2, []struct {
			limit int64
			fail  bool
		}{{2, false}, {-1, false}, {-1, true}, {2, false}, {-1, false}, {-1, false}, {-1, false}}},
		{"fail first page", 0, []struct {
			limit int64
			fail  bool
		}{{2, true}, {2, false}, {-1, false}}},
		{"unpaged lists wait", 1, []struct {
			limit int64
			fail  bool
		}{{0, false}, {0, false}, {2, false}, {-1, true}, {0, false}}},
		{"cancelled", -1, []struct {
			limit int64
			fail  bool
		}{{2, false}, {-1, false}, {-1, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New[*corev1.Pod]()
			for i := range 7 {
				mustCreate(t, s, pod("ns", fmt.Sprintf("p%d", i), nil))
			}
			s.FailListAfterPages(0, boom)
			s.FailListAfterPages(tt.k, boom)
			cont := ""
			for i, step := range tt.script {
				opts := metav1.ListOptions{Limit: step.limit}
				if step.limit < 0 {
					opts = metav1.ListOptions{Limit: 2, Continue: cont}
				}
				l, err := s.List(context.Background(), opts)
				if step.fail {
					if !errors.Is(err, boom) {
						t.Fatalf("call %d: err = %v, want boom", i, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				cont = l.Continue
			}
		})
	}
}

func TestDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := history5(t)
		s.SetDelay(OpList, 5*time.Second)
		s.SetDelay(OpWatch, 3*time.Second)

		start := time.Now()
		if _, err := s.List(t.Context(), metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Fatalf("List took %v", d)
		}

		start = time.Now()
		w, err := s.Watch(t.Context(), metav1.ListOptions{ResourceVersion: "5"})
		if err != nil {
			t.Fatal(err)
		}
		w.Stop()
		if d := time.Since(start); d != 3*time.Second {
			t.Fatalf("Watch took %v", d)
		}

		// An injected failure still waits for the delay.
		s.FailNext(OpList, 1, nil)
		start = time.Now()
		if _, err := s.List(t.Context(), metav1.ListOptions{}); !apierrors.IsInternalError(err) || time.Since(start) != 5*time.Second {
			t.Fatalf("failed List: %v after %v", err, time.Since(start))
		}

		// The context ends the wait.
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start = time.Now()
		if _, err := s.List(ctx, metav1.ListOptions{}); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Fatalf("List: %v after %v", err, time.Since(start))
		}
		start = time.Now()
		if _, err := s.Watch(ctx, metav1.ListOptions{}); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 0 {
			t.Fatalf("Watch: %v after %v", err, time.Since(start))
		}

		s.SetDelay(OpList, 0)
		start = time.Now()
		if _, err := s.List(t.Context(), metav1.ListOptions{}); err != nil || time.Since(start) != 0 {
			t.Fatalf("List without delay: %v after %v", err, time.Since(start))
		}
		if s.Watchers() != 0 {
			t.Fatalf("Watchers = %d", s.Watchers())
		}
	})
}

func TestRequests(t *testing.T) {
	s := history5(t)
	s.FailNext(OpList, 1, nil)
	_, _ = s.List(context.Background(), metav1.ListOptions{ResourceVersion: "0", Limit: 500})
	_, _ = s.List(context.Background(), metav1.ListOptions{Limit: 1})
	w, _ := s.Watch(context.Background(), metav1.ListOptions{ResourceVersion: "5", AllowWatchBookmarks: true, TimeoutSeconds: ptr(int64(300))})
	w.Stop()
	if s.ListCalls() != 2 || s.WatchCalls() != 1 {
		t.Fatalf("calls: %d lists, %d watches", s.ListCalls(), s.WatchCalls())
	}
	lists := s.Requests(OpList)
	if lists[0].ResourceVersion != "0" || lists[0].Limit != 500 || lists[1].Limit != 1 {
		t.Fatalf("list requests %+v", lists)
	}
	watches := s.Requests(OpWatch)
	if len(watches) != 1 || !watches[0].AllowWatchBookmarks || *watches[0].TimeoutSeconds != 300 {
		t.Fatalf("watch requests %+v", watches)
	}
	// The record is a copy.
	*watches[0].TimeoutSeconds = 1
	if *s.Requests(OpWatch)[0].TimeoutSeconds != 300 {
		t.Fatalf("Requests returned shared options")
	}
	if got := s.Requests(Op(7)); got != nil {
		t.Fatalf("unknown op: %v", got)
	}
	s.FailNext(Op(7), 1, nil) // ignored, no panic
	s.SetDelay(Op(-1), time.Hour)
	if _, err := s.List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := []string{OpList.String(), OpWatch.String(), Op(7).String()}; !slices.Equal(got, []string{"list", "watch", "Op(7)"}) {
		t.Fatalf("Op names %v", got)
	}
}
