package deployment

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestFenceposts(t *testing.T) {
	i, p := intstr.FromInt32, intstr.FromString
	tests := []struct {
		name                    string
		surge, unavailable      intstr.IntOrString
		replicas                int32
		wantSurge, wantUnavail  int32
		wantMaxUnavail, wantMin int32
	}{
		{"counts", i(3), i(2), 10, 3, 2, 2, 8},
		{"defaults 25%: surge rounds up, unavailable down", p("25%"), p("25%"), 10, 3, 2, 2, 8},
		{"10% of 100", p("10%"), p("10%"), 100, 10, 10, 10, 90},
		{"1% of 10: surge up to 1, unavailable down to 0", p("1%"), p("1%"), 10, 1, 0, 0, 10},
		{"both resolve to zero: one may be unavailable", p("0%"), p("5%"), 10, 0, 1, 1, 9},
		{"both zero counts", i(0), i(0), 3, 0, 1, 1, 2},
		{"unavailable beyond replicas is capped", i(0), i(5), 3, 0, 5, 3, 0},
		{"100% surge", p("100%"), i(0), 7, 7, 0, 0, 7},
		{"zero replicas", p("25%"), p("25%"), 0, 0, 1, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, u, err := fenceposts(&tt.surge, &tt.unavailable, tt.replicas)
			if err != nil {
				t.Fatal(err)
			}
			if s != tt.wantSurge || u != tt.wantUnavail {
				t.Errorf("fenceposts = %d, %d; want %d, %d", s, u, tt.wantSurge, tt.wantUnavail)
			}
			d := newDeployment(tt.replicas, "a", tt.surge, tt.unavailable)
			if got := maxUnavailable(d); got != tt.wantMaxUnavail {
				t.Errorf("maxUnavailable = %d, want %d", got, tt.wantMaxUnavail)
			}
			if got := replicasOf(d) - maxUnavailable(d); got != tt.wantMin {
				t.Errorf("min available = %d, want %d", got, tt.wantMin)
			}
			if got := maxSurge(d); got != tt.wantSurge {
				t.Errorf("maxSurge = %d, want %d", got, tt.wantSurge)
			}
		})
	}
	bad := p("ten")
	if _, _, err := fenceposts(&bad, nil, 10); err == nil {
		t.Error("a malformed percentage resolved")
	}
}

// TestRollingUpdateSteps rolls a Deployment from image a to image b with
// ReplicaSets whose pods become available one sync after they are asked
// for, and checks, after every sync, kube's bounds: never more pods
// wanted than replicas+maxSurge, never fewer available than
// replicas-maxUnavailable; and that the rollout ends with the new
// ReplicaSet holding every replica, the old one at zero, and the status
// complete.
func TestRollingUpdateSteps(t *testing.T) {
	i, p := intstr.FromInt32, intstr.FromString
	tests := []struct {
		name               string
		replicas           int32
		surge, unavailable intstr.IntOrString
		// first are the first scalings, as the fake API records them:
		// the new ReplicaSet is created with the surge, the old one
		// loses maxUnavailable at once, then each sync that sees new
		// pods available scales old down by what availability above
		// the floor allows, and new up by what that frees.
		first []string
	}{
		{name: "counts 3 and 2", replicas: 10, surge: i(3), unavailable: i(2),
			first: []string{"create rs NEW replicas=3", "scale rs OLD 10->8", "scale rs NEW 3->5", "scale rs OLD 8->3", "scale rs NEW 5->10", "scale rs OLD 3->0"}},
		{name: "25% each", replicas: 10, surge: p("25%"), unavailable: p("25%"),
			first: []string{"create rs NEW replicas=3", "scale rs OLD 10->8", "scale rs NEW 3->5", "scale rs OLD 8->3", "scale rs NEW 5->10", "scale rs OLD 3->0"}},
		{name: "surge only", replicas: 4, surge: i(1), unavailable: i(0),
			first: []string{"create rs NEW replicas=1", "scale rs OLD 4->3", "scale rs NEW 1->2", "scale rs OLD 3->2"}},
		{name: "unavailable only", replicas: 4, surge: i(0), unavailable: i(1),
			first: []string{"create rs NEW replicas=0", "scale rs OLD 4->3", "scale rs NEW 0->1", "scale rs OLD 3->2"}},
		{name: "percentages resolving to zero", replicas: 5, surge: p("0%"), unavailable: p("10%"),
			first: []string{"create rs NEW replicas=0", "scale rs OLD 5->4", "scale rs NEW 0->1", "scale rs OLD 4->3"}},
		{name: "10% of 100", replicas: 100, surge: p("10%"), unavailable: p("10%"),
			first: []string{"create rs NEW replicas=10", "scale rs OLD 100->90", "scale rs NEW 10->20", "scale rs OLD 90->70", "scale rs NEW 20->40"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, newDeployment(tt.replicas, "a", tt.surge, tt.unavailable))
			h.sync()
			h.settle()
			h.sync()
			oldName, newName := rsName("a"), rsName("b")
			if got := h.sizes(); got != oldName+"="+itoa(tt.replicas)+"/"+itoa(tt.replicas) {
				t.Fatalf("before the update: %s", got)
			}
			h.api.take()
			h.update(func(d *appsv1.Deployment) { d.Spec.Template = template("b") })
			d := h.deployment()
			ceiling := tt.replicas + maxSurge(d)
			floor := tt.replicas - maxUnavailable(d)
			var scalings []string
			for step := 0; step < 200; step++ {
				h.sync()
				for _, a := range h.api.take() {
					if strings.HasPrefix(a, "create") || strings.HasPrefix(a, "scale") {
						scalings = append(scalings, strings.NewReplacer(oldName, "OLD", newName, "NEW").Replace(a))
					}
				}
				var wanted, available int32
				for _, rs := range h.rsList() {
					wanted += rsReplicas(rs)
					// Pods scaled away are no longer available.
					available += min(rsReplicas(rs), rs.Status.AvailableReplicas)
				}
				if wanted > ceiling {
					t.Fatalf("step %d: %d pods wanted, more than %d: %s", step, wanted, ceiling, h.sizes())
				}
				if available < floor {
					t.Fatalf("step %d: %d pods available, fewer than %d: %s", step, available, floor, h.sizes())
				}
				if complete(d, &h.deployment().Status) && len(h.rsList()) == 2 && rsReplicas(h.rs(oldName)) == 0 {
					break
				}
				h.settle()
			}
			if len(scalings) < len(tt.first) || !slices.Equal(scalings[:len(tt.first)], tt.first) {
				t.Errorf("scalings %q\nwant them to begin %q", scalings, tt.first)
			}
			st := h.deployment().Status
			if rsReplicas(h.rs(newName)) != tt.replicas || rsReplicas(h.rs(oldName)) != 0 ||
				st.Replicas != tt.replicas || st.UpdatedReplicas != tt.replicas || st.AvailableReplicas != tt.replicas ||
				st.UnavailableReplicas != 0 {
				t.Errorf("rollout did not complete: %s, status %+v", h.sizes(), st)
			}
			if c := getCondition(st, appsv1.DeploymentProgressing); c == nil || c.Reason != ReasonNewReplicaSetAvailable {
				t.Errorf("Progressing = %+v, want NewReplicaSetAvailable", c)
			}
			if got := h.deployment().Annotations[RevisionAnnotation]; got != "2" {
				t.Errorf("deployment revision %q, want 2", got)
			}
		})
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
