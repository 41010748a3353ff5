package apiserver

import (
	"errors"
	"net/http"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/listwatch/listwatch/apiserver/internal/decode"
	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/apiserver/internal/respond"
)

// scaleResource describes autoscaling/v1 Scale for decoding and encoding
// bodies of /scale.
var scaleResource = registry.ScaleResource

// replicas reads spec.replicas, which defaults to 1.
func replicas(obj map[string]any) int64 {
	n, ok, err := unstructured.NestedInt64(obj, "spec", "replicas")
	if !ok || err != nil {
		return 1
	}
	return n
}

// toScale is the Scale view of a scalable object (its Go type or a map).
func toScale(r *resource, in object) (*unstructured.Unstructured, error) {
	u, err := r.AsMap(in)
	if err != nil {
		return nil, err
	}
	sel, err := r.Scale.Selector(u.Object)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	statusReplicas, _, _ := unstructured.NestedInt64(u.Object, "status", "replicas")
	specReplicas := replicas(u.Object)
	if r.Scale.SpecReplicas != nil {
		// A custom resource's scale subresource: its paths, 0 when unset.
		specReplicas, _, _ = unstructured.NestedInt64(u.Object, r.Scale.SpecReplicas...)
		statusReplicas = 0
		if r.Scale.StatusReplicas != nil {
			statusReplicas, _, _ = unstructured.NestedInt64(u.Object, r.Scale.StatusReplicas...)
		}
	}
	// The Go type gives the Scale kube-apiserver's shape (no spec.replicas
	// when there are none, for one).
	sc := &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{
			Name:              u.GetName(),
			Namespace:         u.GetNamespace(),
			UID:               u.GetUID(),
			ResourceVersion:   u.GetResourceVersion(),
			CreationTimestamp: u.GetCreationTimestamp(),
		},
		Spec:   autoscalingv1.ScaleSpec{Replicas: int32(specReplicas)},
		Status: autoscalingv1.ScaleStatus{Replicas: int32(statusReplicas), Selector: sel},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sc)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out := &unstructured.Unstructured{Object: obj}
	out.SetAPIVersion(scaleResource.APIVersion())
	out.SetKind(scaleResource.GVK.Kind)
	return out, nil
}

// updateScale writes the Scale that scaleBody computes from the current
// Scale (the PUT body, or a patch applied to it) into spec.replicas.
//
// The Scale's replicas are set in the object's map: the one write that
// changes an object by a path (kube's scale subresources, which change
// the Go type's field, name a path only for custom resources).
func (s *Server) updateScale(w http.ResponseWriter, r *http.Request, req request, scaleBody func(cur object) ([]byte, error)) error {
	var scale *unstructured.Unstructured
	out, err := s.update(r.Context(), req, func(stored object) (object, error) {
		cur, err := req.res.AsMap(stored)
		if err != nil {
			return nil, err
		}
		curScale, err := toScale(req.res, cur)
		if err != nil {
			return nil, err
		}
		body, err := scaleBody(curScale)
		if err != nil {
			return nil, err
		}
		sc, err := decode.Body(scaleResource, body)
		if err != nil {
			return nil, err
		}
		if sc.GetName() != req.name {
			return nil, respond.BadRequest("the name of the object (%s) does not match the name on the URL (%s)", sc.GetName(), req.name)
		}
		// The Scale's uid, when set, must be the object's: kube-apiserver's
		// scale subresources answer a conflict on <plural>/scale (a patch
		// that changes it included).
		if uid := sc.GetUID(); uid != "" && uid != cur.GetUID() {
			gr := schema.GroupResource{Group: req.res.GVK.Group, Resource: req.res.Plural + "/scale"}
			return nil, apierrors.NewConflict(gr, req.name,
				errors.New("Precondition failed: UID in precondition: "+string(uid)+", UID in object meta: "+string(cur.GetUID())))
		}
		if err := setScaleReplicas(req, cur, sc); err != nil {
			return nil, err
		}
		if rv := sc.GetResourceVersion(); rv != "" || !req.res.UnconditionalScale() {
			// A custom resource's Scale without a resourceVersion is
			// written unconditionally, as kube-apiserver does.
			cur.SetResourceVersion(rv)
		}
		return cur, nil
	})
	if err != nil {
		return err
	}
	if scale, err = toScale(req.res, out); err != nil {
		return err
	}
	return writeObject(w, r, scaleResource, http.StatusOK, scale)
}

// setScaleReplicas sets cur's replicas (at its Scale's path) to the
// spec.replicas of sc, a Scale written to req (0 when it has none), as
// kube's scale subresources validate it.
func setScaleReplicas(req request, cur, sc *unstructured.Unstructured) error {
	n, _, err := unstructured.NestedInt64(sc.Object, "spec", "replicas")
	if err != nil {
		return respond.BadRequest("spec.replicas: %v", err)
	}
	if n < 0 {
		return apierrors.NewInvalid(scaleResource.GVK.GroupKind(), req.name, field.ErrorList{
			field.Invalid(field.NewPath("spec", "replicas"), n, "must be greater than or equal to 0"),
		})
	}
	if err := unstructured.SetNestedField(cur.Object, n, scaleReplicasPath(req.res)...); err != nil {
		return apierrors.NewInternalError(err)
	}
	return nil
}
