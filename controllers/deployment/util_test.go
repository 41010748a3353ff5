package deployment

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

func TestAppendRevisionHistory(t *testing.T) {
	long := strings.Repeat("1234,", 399) + "1234" // 1,999 characters
	tests := []struct {
		name, history, revision, want string
	}{
		{"first", "", "3", "3"},
		{"appended", "1,3", "5", "1,3,5"},
		{"oldest dropped to stay within 2000", long, "99", strings.Repeat("1234,", 398) + "1234,99"},
		{"all older ones dropped for a long one", "1", strings.Repeat("9", 2000), strings.Repeat("9", 2000)},
		{"too long alone: not recorded", "1", strings.Repeat("9", 2001), "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := appendRevisionHistory(tt.history, tt.revision)
			if got != tt.want {
				t.Errorf("got %d chars %.40q…, want %d chars %.40q…", len(got), got, len(tt.want), tt.want)
			}
			if len(got) > maxRevisionHistoryChars {
				t.Errorf("history of %d characters", len(got))
			}
		})
	}
}

func TestTerminatingTotal(t *testing.T) {
	two := int32(2)
	synced := func(term *int32) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{Status: appsv1.ReplicaSetStatus{ObservedGeneration: 1, TerminatingReplicas: term}}
	}
	never := &appsv1.ReplicaSet{}
	tests := []struct {
		name string
		rss  []*appsv1.ReplicaSet
		want *int32
	}{
		{"none", nil, new(int32(0))},
		{"summed, unsynced ones count none", []*appsv1.ReplicaSet{synced(&two), never, synced(&two), nil}, new(int32(4))},
		{"a synced one without the count: unknown", []*appsv1.ReplicaSet{synced(&two), synced(nil)}, nil},
	}
	for _, tt := range tests {
		got := terminatingTotal(tt.rss)
		if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestReplicaSetName(t *testing.T) {
	if got := replicaSetName("web", "5d4f8b"); got != "web-5d4f8b" {
		t.Errorf("short: %s", got)
	}
	long := strings.Repeat("d", 253)
	got := replicaSetName(long, "5d4f8b")
	if len(got) != 253 || !strings.HasSuffix(got, "d-5d4f8b") {
		t.Errorf("long name cut to %d: ...%s", len(got), got[len(got)-10:])
	}
}

func TestPreviousRevision(t *testing.T) {
	rs := func(rev string) *appsv1.ReplicaSet {
		r := &appsv1.ReplicaSet{}
		if rev != "-" {
			r.Annotations = map[string]string{RevisionAnnotation: rev}
		}
		return r
	}
	tests := []struct {
		revs      []string
		max, prev int64
	}{
		{[]string{"1"}, 1, 0},
		{[]string{"1", "3", "2"}, 3, 2},
		{[]string{"3", "-", "x", "1"}, 3, 1},
		{[]string{"5", "5"}, 5, 5},
	}
	for _, tt := range tests {
		var rss []*appsv1.ReplicaSet
		for _, r := range tt.revs {
			rss = append(rss, rs(r))
		}
		if got := maxRevision(rss); got != tt.max {
			t.Errorf("%v: max %d, want %d", tt.revs, got, tt.max)
		}
		if got := previousRevision(rss); got != tt.prev {
			t.Errorf("%v: previous %d, want %d", tt.revs, got, tt.prev)
		}
	}
}
