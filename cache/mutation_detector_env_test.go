package cache_test

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
)

// TestMutationDetector_EnvironmentAndPeriodicCheck switches the detector on
// (or not) through the environment only, mutates a cached object in place,
// and lets the periodic check (default period 10 s) find it without any
// CheckMutations call.
func TestMutationDetector_EnvironmentAndPeriodicCheck(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		wantOn   bool
		wantKeys []string
	}{
		{name: "listwatch var", env: map[string]string{"LISTWATCH_CACHE_MUTATION_DETECTOR": "true"}, wantOn: true, wantKeys: []string{"ns/a"}},
		{name: "kube var", env: map[string]string{"KUBE_CACHE_MUTATION_DETECTOR": "1"}, wantOn: true, wantKeys: []string{"ns/a"}},
		{name: "false", env: map[string]string{"LISTWATCH_CACHE_MUTATION_DETECTOR": "false"}},
		{name: "garbage", env: map[string]string{"KUBE_CACHE_MUTATION_DETECTOR": "yes please"}},
		{name: "unset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Clear both, so the runner's environment cannot leak in.
			t.Setenv("LISTWATCH_CACHE_MUTATION_DETECTOR", "")
			t.Setenv("KUBE_CACHE_MUTATION_DETECTOR", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			synctest.Test(t, func(t *testing.T) {
				src := cachetest.New[*corev1.Pod]()
				// MutationDetection is left false: only the environment
				// may switch the detector on. The period is the default.
				inf, reported := runMutatingInformer(t, src, cache.SharedInformerOptions{})
				// The in-place write races with the detector's reads by
				// nature (that is the bug detected); order it before the
				// periodic check for the race detector: a later cache
				// change makes the informer take the detector's lock,
				// after the write, before the check.
				mustCreate(t, src, "ns", "c")
				synctest.Wait()
				if got := reported(); len(got) != 0 {
					t.Errorf("reported %v before the first periodic check", got)
				}
				time.Sleep(10 * time.Second)
				synctest.Wait()
				if got := reported(); !slices.Equal(got, tc.wantKeys) {
					t.Errorf("periodic check reported %v, want %v", got, tc.wantKeys)
				}
				// A mutation is reported once; later periods stay quiet.
				time.Sleep(30 * time.Second)
				synctest.Wait()
				if got := reported(); !slices.Equal(got, tc.wantKeys) {
					t.Errorf("after more periods reported %v, want %v", got, tc.wantKeys)
				}
				if found := inf.CheckMutations(t.Context()); found != nil && !tc.wantOn {
					t.Errorf("detector off, yet CheckMutations = %v", found)
				}
			})
		})
	}
}
