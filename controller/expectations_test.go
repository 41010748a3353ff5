package controller

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

func TestControllerExpectations(t *testing.T) {
	tests := []struct {
		name          string
		ops           func(e *ControllerExpectations)
		wantSatisfied bool
		wantAdds      int
		wantDels      int
		wantExists    bool
	}{
		{"no expectations", func(e *ControllerExpectations) {}, true, 0, 0, false},
		{"creations outstanding", func(e *ControllerExpectations) { e.ExpectCreations("k", 2) }, false, 2, 0, true},
		{"creations observed", func(e *ControllerExpectations) {
			e.ExpectCreations("k", 2)
			e.CreationObserved("k")
			e.CreationObserved("k")
		}, true, 0, 0, true},
		{"deletions outstanding", func(e *ControllerExpectations) {
			e.ExpectDeletions("k", 2)
			e.DeletionObserved("k")
		}, false, 0, 1, true},
		{"both must reach zero", func(e *ControllerExpectations) {
			e.SetExpectations("k", 1, 1)
			e.CreationObserved("k")
		}, false, 0, 1, true},
		{"lowered for failed creations", func(e *ControllerExpectations) {
			e.ExpectCreations("k", 5)
			e.LowerExpectations("k", 3, 0)
			e.CreationObserved("k")
			e.CreationObserved("k")
		}, true, 0, 0, true},
		{"raised", func(e *ControllerExpectations) {
			e.ExpectCreations("k", 1)
			e.RaiseExpectations("k", 1, 1)
		}, false, 2, 1, true},
		{"observations beyond expected stay satisfied", func(e *ControllerExpectations) {
			e.ExpectCreations("k", 1)
			e.CreationObserved("k")
			e.CreationObserved("k")
		}, true, -1, 0, true},
		{"observation without expectations is ignored", func(e *ControllerExpectations) {
			e.CreationObserved("k")
			e.RaiseExpectations("k", 1, 0)
		}, true, 0, 0, false},
		{"deleted", func(e *ControllerExpectations) {
			e.ExpectCreations("k", 1)
			e.DeleteExpectations("k")
		}, true, 0, 0, false},
		{"other keys independent", func(e *ControllerExpectations) {
			e.ExpectCreations("other", 1)
		}, true, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e ControllerExpectations
			tt.ops(&e)
			if got := e.SatisfiedExpectations("k"); got != tt.wantSatisfied {
				t.Errorf("SatisfiedExpectations = %v, want %v", got, tt.wantSatisfied)
			}
			adds, dels, ok := e.GetExpectations("k")
			if adds != tt.wantAdds || dels != tt.wantDels || ok != tt.wantExists {
				t.Errorf("GetExpectations = %d, %d, %v; want %d, %d, %v", adds, dels, ok, tt.wantAdds, tt.wantDels, tt.wantExists)
			}
		})
	}
}

func TestExpectationsTTL(t *testing.T) {
	tests := []struct {
		name string
		ttl  time.Duration
		want time.Duration
	}{
		{"default five minutes", 0, 5 * time.Minute},
		{"custom", 30 * time.Second, 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := ControllerExpectations{TTL: tt.ttl}
				e.ExpectCreations("k", 3)
				time.Sleep(tt.want)
				if e.SatisfiedExpectations("k") {
					t.Fatal("satisfied at exactly the TTL")
				}
				time.Sleep(time.Nanosecond)
				if !e.SatisfiedExpectations("k") {
					t.Fatal("not satisfied past the TTL")
				}
				// Setting them again restarts the clock.
				e.ExpectCreations("k", 1)
				if e.SatisfiedExpectations("k") {
					t.Fatal("fresh expectations satisfied")
				}
			})
		})
	}
}

func TestUIDTrackingExpectations(t *testing.T) {
	var u UIDTrackingControllerExpectations
	u.ExpectDeletions("rc", []string{"ns/a", "ns/b", "ns/b"})
	if adds, dels, _ := u.GetExpectations("rc"); adds != 0 || dels != 2 {
		t.Fatalf("expectations %d, %d; want 0, 2", adds, dels)
	}
	u.DeletionObserved("rc", "ns/a")
	u.DeletionObserved("rc", "ns/a")     // seen twice: counted once
	u.DeletionObserved("rc", "ns/other") // not expected: not counted
	if u.SatisfiedExpectations("rc") {
		t.Fatal("satisfied with ns/b outstanding")
	}
	if got := u.GetUIDs("rc"); !slices.Equal(got, []string{"ns/b"}) {
		t.Fatalf("GetUIDs = %v, want [ns/b]", got)
	}
	u.DeletionObserved("rc", "ns/b")
	if !u.SatisfiedExpectations("rc") {
		t.Fatal("not satisfied after every deletion")
	}
	u.ExpectDeletions("rc", []string{"ns/c"})
	u.DeleteExpectations("rc")
	if len(u.GetUIDs("rc")) != 0 || !u.SatisfiedExpectations("rc") {
		t.Fatal("DeleteExpectations left state behind")
	}
}
