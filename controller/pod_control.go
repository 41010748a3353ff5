package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// PodClient is the part of a Kubernetes REST client that PodControl uses.
// The client package implements it; tests fake it.
type PodClient interface {
	CreatePod(ctx context.Context, namespace string, pod *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error)
	DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
	PatchPod(ctx context.Context, namespace, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*corev1.Pod, error)
}

// EventRecorder records Kubernetes events about objects. It is optional.
type EventRecorder interface {
	Eventf(object runtime.Object, eventType, reason, messageFmt string, args ...any)
}

// RecorderOr returns r, or else opts.Recorder, or else a recorder that
// drops every event: the recorder of a controller whose own Options may
// leave it unset.
func RecorderOr(r EventRecorder, opts Options) EventRecorder {
	if r != nil {
		return r
	}
	if opts.Recorder != nil {
		return opts.Recorder
	}
	return discardEvents{}
}

type discardEvents struct{}

func (discardEvents) Eventf(runtime.Object, string, string, string, ...any) {}

// Event reasons used by RealPodControl.
const (
	FailedCreatePodReason     = "FailedCreate"
	SuccessfulCreatePodReason = "SuccessfulCreate"
	FailedDeletePodReason     = "FailedDelete"
	SuccessfulDeletePodReason = "SuccessfulDelete"
)

// PodControl creates, deletes and patches pods on behalf of a controller.
type PodControl interface {
	// CreatePods creates a pod from template in namespace, owned by
	// controllerObject through controllerRef, which must be a controller
	// reference (Controller=true) naming the owner.
	CreatePods(ctx context.Context, namespace string, template *corev1.PodTemplateSpec, controllerObject runtime.Object, controllerRef *metav1.OwnerReference) error
	// DeletePod deletes the pod namespace/name on behalf of controllerObject.
	DeletePod(ctx context.Context, namespace, name string, controllerObject runtime.Object) error
	// PatchPod applies a strategic merge patch to the pod.
	PatchPod(ctx context.Context, namespace, name string, data []byte) error
}

// RealPodControl is the PodControl that talks to the API server through
// Client.
type RealPodControl struct {
	Client PodClient
	// Recorder, when set, receives an event for every create and delete.
	Recorder EventRecorder
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

var _ PodControl = (*RealPodControl)(nil)

// ErrInvalidControllerRef is returned for a controller reference that
// cannot own a pod.
var ErrInvalidControllerRef = errors.New("invalid controller reference")

// ValidateControllerRef checks that ref is a controller reference naming
// its owner completely.
func ValidateControllerRef(ref *metav1.OwnerReference) error {
	switch {
	case ref == nil:
		return fmt.Errorf("%w: nil", ErrInvalidControllerRef)
	case ref.APIVersion == "":
		return fmt.Errorf("%w: apiVersion is empty", ErrInvalidControllerRef)
	case ref.Kind == "":
		return fmt.Errorf("%w: kind is empty", ErrInvalidControllerRef)
	case ref.Name == "":
		return fmt.Errorf("%w: name is empty", ErrInvalidControllerRef)
	case ref.UID == "":
		return fmt.Errorf("%w: uid is empty", ErrInvalidControllerRef)
	case ref.Controller == nil || !*ref.Controller:
		return fmt.Errorf("%w: controller is not true", ErrInvalidControllerRef)
	case ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion:
		return fmt.Errorf("%w: blockOwnerDeletion is not true", ErrInvalidControllerRef)
	}
	return nil
}

// PodFromTemplate builds the pod a controller creates from template: its
// labels, annotations, finalizers and spec, a name generated from the
// owner's name, and controllerRef as its only owner reference.
func PodFromTemplate(template *corev1.PodTemplateSpec, ownerName string, controllerRef *metav1.OwnerReference) (*corev1.Pod, error) {
	if template == nil {
		return nil, errors.New("pod template is nil")
	}
	if len(template.Labels) == 0 {
		// A pod without labels cannot match the selector of the
		// controller that made it, which would then make more forever.
		return nil, errors.New("pod template has no labels")
	}
	t := template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Labels:       t.Labels,
			Annotations:  t.Annotations,
			Finalizers:   t.Finalizers,
			GenerateName: podNamePrefix(ownerName),
		},
		Spec: t.Spec,
	}
	if controllerRef != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*controllerRef}
	}
	return pod, nil
}

// maxGeneratedNameLength leaves room for the 5 random characters the
// server appends to a generateName within the 63-character name limit.
const maxGeneratedNameLength = 63 - 5

func podNamePrefix(owner string) string {
	prefix := owner + "-"
	if len(prefix) > maxGeneratedNameLength {
		prefix = prefix[:maxGeneratedNameLength]
	}
	return prefix
}

// CreatePods creates one pod from template owned by controllerObject.
func (r *RealPodControl) CreatePods(ctx context.Context, namespace string, template *corev1.PodTemplateSpec, controllerObject runtime.Object, controllerRef *metav1.OwnerReference) error {
	return r.CreatePodsWithGenerateName(ctx, namespace, template, controllerObject, controllerRef, "")
}

// CreatePodsWithGenerateName is CreatePods with the pod's generateName
// given (an Indexed Job's "<job>-<index>-"); "" is CreatePods' own, the
// owner's name and a dash.
func (r *RealPodControl) CreatePodsWithGenerateName(ctx context.Context, namespace string, template *corev1.PodTemplateSpec, controllerObject runtime.Object, controllerRef *metav1.OwnerReference, generateName string) error {
	if err := ValidateControllerRef(controllerRef); err != nil {
		return err
	}
	pod, err := PodFromTemplate(template, controllerRef.Name, controllerRef)
	if err != nil {
		return fmt.Errorf("creating pod for %s %s/%s: %w", controllerRef.Kind, namespace, controllerRef.Name, err)
	}
	if generateName != "" {
		pod.GenerateName = generateName
	}
	created, err := r.Client.CreatePod(ctx, namespace, pod, metav1.CreateOptions{})
	if err != nil {
		r.event(controllerObject, corev1.EventTypeWarning, FailedCreatePodReason, "Error creating: %v", err)
		return fmt.Errorf("creating pod for %s %s/%s: %w", controllerRef.Kind, namespace, controllerRef.Name, err)
	}
	r.logger().Debug("created pod", "pod", namespace+"/"+created.Name, "owner", controllerRef.Kind+"/"+controllerRef.Name)
	r.event(controllerObject, corev1.EventTypeNormal, SuccessfulCreatePodReason, "Created pod: %v", created.Name)
	return nil
}

// DeletePod deletes the pod. A pod already gone yields the API's NotFound
// error, wrapped, for the caller to treat as it sees fit.
func (r *RealPodControl) DeletePod(ctx context.Context, namespace, name string, controllerObject runtime.Object) error {
	if err := r.Client.DeletePod(ctx, namespace, name, metav1.DeleteOptions{}); err != nil {
		r.event(controllerObject, corev1.EventTypeWarning, FailedDeletePodReason, "Error deleting: %v", err)
		return fmt.Errorf("deleting pod %s/%s: %w", namespace, name, err)
	}
	r.logger().Debug("deleted pod", "pod", namespace+"/"+name)
	r.event(controllerObject, corev1.EventTypeNormal, SuccessfulDeletePodReason, "Deleted pod: %v", name)
	return nil
}

// PatchPod applies a strategic merge patch.
func (r *RealPodControl) PatchPod(ctx context.Context, namespace, name string, data []byte) error {
	if _, err := r.Client.PatchPod(ctx, namespace, name, types.StrategicMergePatchType, data, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patching pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

func (r *RealPodControl) event(obj runtime.Object, eventType, reason, format string, args ...any) {
	if r.Recorder != nil && obj != nil {
		r.Recorder.Eventf(obj, eventType, reason, format, args...)
	}
}

func (r *RealPodControl) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

// ownerRefPatch is the strategic merge patch that adopts or releases an
// object (a pod, a ControllerRevision). Carrying the object's UID makes
// the server refuse the patch if the object was replaced by another of the
// same name meanwhile.
type ownerRefPatch struct {
	Metadata ownerRefPatchMeta `json:"metadata"`
}

type ownerRefPatchMeta struct {
	OwnerReferences []map[string]any `json:"ownerReferences"`
	UID             types.UID        `json:"uid"`
}

// AdoptPatch is the strategic merge patch that makes ref's owner the
// controller of the object whose UID is uid.
func AdoptPatch(uid types.UID, ref metav1.OwnerReference) ([]byte, error) {
	return json.Marshal(ownerRefPatch{Metadata: ownerRefPatchMeta{
		OwnerReferences: []map[string]any{{
			"apiVersion":         ref.APIVersion,
			"kind":               ref.Kind,
			"name":               ref.Name,
			"uid":                ref.UID,
			"controller":         true,
			"blockOwnerDeletion": true,
		}},
		UID: uid,
	}})
}

// ReleasePatch is the strategic merge patch that deletes the owner
// reference with ownerUID from the object whose UID is uid.
func ReleasePatch(uid, ownerUID types.UID) ([]byte, error) {
	return json.Marshal(ownerRefPatch{Metadata: ownerRefPatchMeta{
		OwnerReferences: []map[string]any{{"$patch": "delete", "uid": ownerUID}},
		UID:             uid,
	}})
}
