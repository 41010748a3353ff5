package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"

	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
)

// bindingResource describes v1 Binding for decoding bodies of
// pods/{name}/binding.
var bindingResource = &resource{
	gvk:    corev1.SchemeGroupVersion.WithKind("Binding"),
	plural: "bindings",
}

// handleBinding assigns a pod to a node, as a scheduler does: spec.nodeName
// is set once (409 Conflict when the pod is already bound or is being
// deleted), the Binding's annotations are copied onto the pod and the
// PodScheduled condition becomes True. The answer is a 201 Success Status,
// as kube-apiserver's.
func (s *Server) handleBinding(w http.ResponseWriter, r *http.Request, req request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	format, err := requestFormat(r, bindingResource, true)
	if err != nil {
		return err
	}
	js, err := toJSONBody(bindingResource, format, body)
	if err != nil {
		return err
	}
	u, err := decodeBody(bindingResource, js)
	if err != nil {
		return err
	}
	var b corev1.Binding
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &b); err != nil {
		return cannotHandle(bindingResource, err)
	}
	if b.Namespace != "" && b.Namespace != req.namespace {
		return badRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	if b.Name != "" && b.Name != req.name {
		return badRequest("name in URL does not match name in Binding object")
	}
	var errs field.ErrorList
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		errs = append(errs, field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node", "<empty>"}))
	}
	if b.Target.Name == "" {
		errs = append(errs, field.Required(field.NewPath("target", "name"), ""))
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(bindingResource.gvk.GroupKind(), req.name, errs)
	}
	_, err = s.updateObject(r.Context(), req, func(cur *unstructured.Unstructured) (object, error) {
		if err := uidPrecondition(req, b.UID, cur.GetUID()); err != nil {
			return nil, err
		}
		if b.ResourceVersion != "" && b.ResourceVersion != cur.GetResourceVersion() {
			return nil, conflict(req, "the object has been modified; please apply your changes to the latest version and try again")
		}
		if cur.GetDeletionTimestamp() != nil {
			return nil, bindingConflict(req, fmt.Sprintf("pod %s is being deleted, cannot be assigned to a host", req.name))
		}
		// The pod as its Go type, so that it is stored and watched
		// without going back to a map.
		ext, err := req.res.kube.External(cur)
		if err != nil {
			return nil, err
		}
		pod, ok := ext.(*corev1.Pod)
		if !ok {
			return nil, apierrors.NewInternalError(fmt.Errorf("apiserver: pod as %T", ext))
		}
		if pod.Spec.NodeName != "" {
			return nil, bindingConflict(req, fmt.Sprintf("pod %s is already assigned to node %q", req.name, pod.Spec.NodeName))
		}
		// As kube-apiserver's binding storage sets the pod.
		pod.Spec.NodeName = b.Target.Name
		if len(b.Annotations) > 0 {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			maps.Copy(pod.Annotations, b.Annotations)
		}
		podutil.UpdatePodCondition(&pod.Status, &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue})
		return pod, nil
	})
	if err != nil {
		return err
	}
	st := metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusCreated}
	writeStatusObject(w, &st)
	return nil
}

// bindingConflict is kube-apiserver's answer when its binding storage
// refuses the pod's state: a conflict on pods/binding (the preconditions'
// conflicts are on pods).
func bindingConflict(req request, msg string) error {
	return apierrors.NewConflict(schema.GroupResource{Resource: "pods/binding"}, req.name, errors.New(msg))
}
