package controller

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func pod(name string, lbls map[string]string, owner *metav1.OwnerReference) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Labels: lbls}}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return p
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestClassifyAndClaim(t *testing.T) {
	web := map[string]string{"app": "web"}
	other := map[string]string{"app": "db"}
	rc := newRC("web", "rc-uid")
	ours := NewControllerRef(rc, rcKind)
	theirs := NewControllerRef(newRC("other", "other-uid"), rcKind)
	nonController := &metav1.OwnerReference{APIVersion: "v1", Kind: "Thing", Name: "t", UID: "t-uid"}
	deleting := pod("orphan-deleting", web, nil)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	elsewhere := pod("orphan-elsewhere", web, nil)
	elsewhere.Namespace = "other-ns"
	pods := []*corev1.Pod{
		pod("owned", web, ours),
		pod("owned-nomatch", other, ours),
		pod("orphan", web, nil),
		pod("orphan-noncontroller-ref", web, nonController),
		pod("orphan-nomatch", other, nil),
		pod("theirs", web, theirs),
		deleting,
		elsewhere,
	}

	m := &PodControllerRefManager{Controller: rc, Selector: labels.SelectorFromSet(web), Kind: rcKind}
	owned, orphans, release := m.Classify(pods)
	if got, want := names(owned), []string{"owned"}; !slices.Equal(got, want) {
		t.Errorf("owned %v, want %v", got, want)
	}
	if got, want := names(orphans), []string{"orphan", "orphan-noncontroller-ref"}; !slices.Equal(got, want) {
		t.Errorf("orphans %v, want %v", got, want)
	}
	if got, want := names(release), []string{"owned-nomatch"}; !slices.Equal(got, want) {
		t.Errorf("release %v, want %v", got, want)
	}

	tests := []struct {
		name        string
		deleting    bool
		recheck     func(context.Context) (metav1.Object, error)
		clientErr   error
		wantClaimed []string
		wantPatched []string
		wantErr     error
	}{
		{
			name:        "adopts orphans and releases non-matching",
			wantClaimed: []string{"owned", "orphan", "orphan-noncontroller-ref"},
			wantPatched: []string{"ns/orphan", "ns/orphan-noncontroller-ref", "ns/owned-nomatch"},
		},
		{
			name:        "owner being deleted adopts and releases nothing",
			deleting:    true,
			wantClaimed: []string{"owned"},
		},
		{
			name: "recheck finds the owner being deleted",
			recheck: func(context.Context) (metav1.Object, error) {
				fresh := rc.DeepCopy()
				fresh.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
				return fresh, nil
			},
			wantClaimed: []string{"owned"},
			wantPatched: []string{"ns/owned-nomatch"},
			wantErr:     ErrOwnerBeingDeleted,
		},
		{
			name:        "recheck finds a replaced owner",
			recheck:     func(context.Context) (metav1.Object, error) { return newRC("web", "new-uid"), nil },
			wantClaimed: []string{"owned"},
			wantPatched: []string{"ns/owned-nomatch"},
			wantErr:     ErrOwnerBeingDeleted,
		},
		{
			name:        "pods gone meanwhile are skipped",
			clientErr:   apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "x"),
			wantClaimed: []string{"owned"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			owner := rc.DeepCopy()
			if tt.deleting {
				owner.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
			}
			client := &fakePodClient{err: tt.clientErr}
			m := &PodControllerRefManager{
				Control:    &RealPodControl{Client: client, Logger: quietLogger},
				Controller: owner,
				Selector:   labels.SelectorFromSet(web),
				Kind:       rcKind,
				Recheck:    tt.recheck,
			}
			claimed, err := m.ClaimPods(context.Background(), pods)
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("ClaimPods error %v, want %v", err, tt.wantErr)
			}
			if got := names(claimed); !slices.Equal(got, tt.wantClaimed) {
				t.Errorf("claimed %v, want %v", got, tt.wantClaimed)
			}
			var patched []string
			for k := range client.patches {
				patched = append(patched, k)
			}
			slices.Sort(patched)
			if !slices.Equal(patched, tt.wantPatched) {
				t.Errorf("patched %v, want %v", patched, tt.wantPatched)
			}
		})
	}
}
