package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// fakePodClient records calls and fails with err when set.
type fakePodClient struct {
	mu      sync.Mutex
	created []*corev1.Pod
	deleted []string
	patches map[string][]byte
	err     error
}

func (f *fakePodClient) CreatePod(_ context.Context, ns string, pod *corev1.Pod, _ metav1.CreateOptions) (*corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	p := pod.DeepCopy()
	p.Namespace = ns
	p.Name = fmt.Sprintf("%sx%d", pod.GenerateName, len(f.created))
	f.created = append(f.created, p)
	return p, nil
}

func (f *fakePodClient) DeletePod(_ context.Context, ns, name string, _ metav1.DeleteOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.deleted = append(f.deleted, ns+"/"+name)
	return nil
}

func (f *fakePodClient) PatchPod(_ context.Context, ns, name string, pt types.PatchType, data []byte, _ metav1.PatchOptions) (*corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pt != types.StrategicMergePatchType {
		return nil, fmt.Errorf("unexpected patch type %s", pt)
	}
	if f.err != nil {
		return nil, f.err
	}
	if f.patches == nil {
		f.patches = map[string][]byte{}
	}
	f.patches[ns+"/"+name] = data
	return &corev1.Pod{}, nil
}

type fakeRecorder struct {
	mu      sync.Mutex
	reasons []string
}

func (r *fakeRecorder) Eventf(_ runtime.Object, _, reason, _ string, _ ...any) {
	r.mu.Lock()
	r.reasons = append(r.reasons, reason)
	r.mu.Unlock()
}

var rcKind = schema.GroupVersionKind{Version: "v1", Kind: "ReplicationController"}

func newRC(name string, uid types.UID) *corev1.ReplicationController {
	return &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid}}
}

func template() *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{"a": "b"},
			Finalizers:  []string{"f"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
	}
}

func TestCreatePods(t *testing.T) {
	rc := newRC("web", "uid-1")
	goodRef := NewControllerRef(rc, rcKind)
	noLabels := template()
	noLabels.Labels = nil
	tests := []struct {
		name      string
		template  *corev1.PodTemplateSpec
		ref       *metav1.OwnerReference
		clientErr error
		wantErr   error
		wantEvent string
	}{
		{"creates", template(), goodRef, nil, nil, SuccessfulCreatePodReason},
		{"nil ref", template(), nil, nil, ErrInvalidControllerRef, ""},
		{"not a controller ref", template(), &metav1.OwnerReference{APIVersion: "v1", Kind: "RC", Name: "web", UID: "u"}, nil, ErrInvalidControllerRef, ""},
		{"ref without uid", template(), func() *metav1.OwnerReference { r := *goodRef; r.UID = ""; return &r }(), nil, ErrInvalidControllerRef, ""},
		{"template without labels", noLabels, goodRef, nil, nil, ""},
		{"nil template", nil, goodRef, nil, nil, ""},
		{"server error", template(), goodRef, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("quota")), nil, FailedCreatePodReason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := &fakePodClient{err: tt.clientErr}
			rec := &fakeRecorder{}
			pc := &RealPodControl{Client: client, Recorder: rec, Logger: quietLogger}
			err := pc.CreatePods(context.Background(), "ns", tt.template, rc, tt.ref)
			wantFail := tt.wantErr != nil || tt.clientErr != nil || tt.template == nil || len(tt.template.Labels) == 0
			if (err != nil) != wantFail {
				t.Fatalf("CreatePods = %v, want failure %v", err, wantFail)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("CreatePods = %v, want %v", err, tt.wantErr)
			}
			if tt.clientErr != nil && !apierrors.IsForbidden(err) {
				t.Fatalf("server error not wrapped: %v", err)
			}
			if tt.wantEvent != "" && (len(rec.reasons) != 1 || rec.reasons[0] != tt.wantEvent) {
				t.Fatalf("events %v, want [%s]", rec.reasons, tt.wantEvent)
			}
			if wantFail {
				return
			}
			if len(client.created) != 1 {
				t.Fatalf("%d pods created", len(client.created))
			}
			pod := client.created[0]
			if pod.GenerateName != "web-" || pod.Namespace != "ns" {
				t.Errorf("generateName %q namespace %q", pod.GenerateName, pod.Namespace)
			}
			if pod.Labels["app"] != "web" || pod.Annotations["a"] != "b" || len(pod.Finalizers) != 1 || len(pod.Spec.Containers) != 1 {
				t.Errorf("pod does not carry the template: %+v", pod)
			}
			if c := metav1.GetControllerOf(pod); c == nil || c.UID != "uid-1" || c.Kind != "ReplicationController" {
				t.Errorf("controller ref %+v", c)
			}
			// The template must not be shared with the pod.
			pod.Labels["app"] = "changed"
			if tt.template.Labels["app"] != "web" {
				t.Error("pod shares the template's labels")
			}
		})
	}
}

func TestPodNamePrefixTruncated(t *testing.T) {
	long := string(make([]byte, 100))
	if p := podNamePrefix(long); len(p) != maxGeneratedNameLength {
		t.Fatalf("prefix length %d", len(p))
	}
}

func TestDeletePod(t *testing.T) {
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "p")
	tests := []struct {
		name      string
		clientErr error
		wantEvent string
	}{
		{"deletes", nil, SuccessfulDeletePodReason},
		{"already gone", notFound, FailedDeletePodReason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := &fakePodClient{err: tt.clientErr}
			rec := &fakeRecorder{}
			pc := &RealPodControl{Client: client, Recorder: rec, Logger: quietLogger}
			err := pc.DeletePod(context.Background(), "ns", "p", newRC("web", "u"))
			if tt.clientErr == nil {
				if err != nil || len(client.deleted) != 1 || client.deleted[0] != "ns/p" {
					t.Fatalf("DeletePod = %v, deleted %v", err, client.deleted)
				}
			} else if !apierrors.IsNotFound(err) {
				t.Fatalf("DeletePod = %v, want a NotFound the caller can recognise", err)
			}
			if len(rec.reasons) != 1 || rec.reasons[0] != tt.wantEvent {
				t.Fatalf("events %v", rec.reasons)
			}
		})
	}
}

func TestOwnerRefPatches(t *testing.T) {
	ref := NewControllerRef(newRC("web", "owner-uid"), rcKind)
	data, err := AdoptPatch("pod-uid", *ref)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := `{"metadata":{"ownerReferences":[{"apiVersion":"v1","blockOwnerDeletion":true,"controller":true,"kind":"ReplicationController","name":"web","uid":"owner-uid"}],"uid":"pod-uid"}}`
	if string(data) != want {
		t.Fatalf("adopt patch\n%s\nwant\n%s", data, want)
	}
	data, err = ReleasePatch("pod-uid", "owner-uid")
	if err != nil {
		t.Fatal(err)
	}
	want = `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":"owner-uid"}],"uid":"pod-uid"}}`
	if string(data) != want {
		t.Fatalf("release patch\n%s\nwant\n%s", data, want)
	}
}
