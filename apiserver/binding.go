package apiserver

import (
	"bytes"
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
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	apipod "k8s.io/kubernetes/pkg/api/pod"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/kubernetes/pkg/features"
	sigsjson "sigs.k8s.io/json"

	"github.com/listwatch/listwatch/apiserver/internal/decode"
	"github.com/listwatch/listwatch/apiserver/internal/kube"
	"github.com/listwatch/listwatch/apiserver/internal/respond"
	"github.com/listwatch/listwatch/resources"
)

// bindingResource describes v1 Binding for decoding bodies of
// pods/{name}/binding and of the bindings resource.
var bindingResource = &resource{
	GVK:    corev1.SchemeGroupVersion.WithKind("Binding"),
	Plural: "bindings",
}

// handleBinding serves pods/{name}/binding: it assigns the pod to a node,
// as a scheduler does (bind).
func (s *Server) handleBinding(w http.ResponseWriter, r *http.Request, req request) error {
	b, err := decodeBinding(r, req)
	if err != nil {
		return err
	}
	return s.bind(w, r, req, req.res.GVR(), b)
}

// serveBindings serves the bindings resource of core/v1, which takes only
// creates, each binding the pod its Binding names as pods/{name}/binding
// does, and answers as kube-apiserver does: 405 to any other method on
// the collection, 404 under it. It reports whether the path was its.
func (s *Server) serveBindings(w http.ResponseWriter, r *http.Request, gv schema.GroupVersion, rest []string) bool {
	if gv != corev1.SchemeGroupVersion || len(rest) < 3 || rest[0] != "namespaces" || rest[1] == "" || rest[2] != bindingResource.Plural {
		return false
	}
	err := func() error {
		if len(rest) > 3 {
			return notFoundPath()
		}
		if r.Method != http.MethodPost {
			return methodNotAllowedPath(r)
		}
		pods := s.reg.Lookup(gv, "pods")
		if pods == nil || !pods.Binding {
			return notFoundPath()
		}
		req := request{res: pods, namespace: rest[1], sub: resources.Binding, warn: func(text string) { respond.Warning(w, text) }}
		var err error
		if req.dryRun, err = decode.DryRun(r); err != nil {
			return err
		}
		b, err := decodeBinding(r, req)
		if err != nil {
			return err
		}
		// The pod is the one the Binding names.
		req.name = b.Name
		return s.bind(w, r, req, gv.WithResource(bindingResource.Plural), b)
	}()
	if err != nil {
		WriteStatus(w, err)
	}
	return true
}

// decodeBinding reads the Binding of a request for req's pod (whose
// namespace it must be in).
func decodeBinding(r *http.Request, req request) (*corev1.Binding, error) {
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	format, err := decode.RequestFormat(r, bindingResource, true)
	if err != nil {
		return nil, err
	}
	js, err := decode.ToJSON(bindingResource, format, body)
	if err != nil {
		return nil, err
	}
	u, err := decode.Body(bindingResource, js)
	if err != nil {
		if format != decode.Protobuf && len(bytes.TrimSpace(js)) > 0 {
			// Answered with kube-apiserver's decoder's error, when that
			// refuses the body too.
			if kerr := kube.BindingBodyError(js); kerr != nil {
				err = kerr
			}
		}
		return nil, err
	}
	var b corev1.Binding
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &b); err != nil {
		return nil, decode.CannotHandle(bindingResource, err)
	}
	if b.Namespace != "" && b.Namespace != req.namespace {
		return nil, respond.BadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return &b, nil
}

// bind assigns req's pod to the node b targets, as kube-apiserver's
// binding storage does (pkg/registry/core/pod/storage, BindingREST):
// after admission and its checks (kube.Binding), the pod, with b's UID
// and resourceVersion as preconditions, gets spec.nodeName once (409
// Conflict when it is bound already, being deleted, or still has
// scheduling gates), loses its nominatedNodeName, takes b's annotations
// (less the init-container ones kube drops) and labels, and its
// PodScheduled condition becomes True. The answer is a 201 Success
// Status. resource is what was posted to: pods (pods/{name}/binding) or
// bindings.
func (s *Server) bind(w http.ResponseWriter, r *http.Request, req request, resource schema.GroupVersionResource, b *corev1.Binding) error {
	kr := s.kubeRequest(r.Context(), req, "create", req.name)
	if resource.Resource != req.res.Plural {
		kr.Subresource = ""
	}
	b, err := kube.Binding(r.Context(), kr, resource, b)
	if err != nil {
		return err
	}
	if req.name == "" {
		// kube's storage finds no key for the pod.
		return respond.BadRequest("Name parameter required.")
	}
	_, err = s.updateObject(r.Context(), req, func(cur *unstructured.Unstructured) (object, error) {
		if err := preconditions(req, b.UID, b.ResourceVersion, cur.GetUID(), cur.GetResourceVersion()); err != nil {
			return nil, err
		}
		// The pod as its Go type, so that it is stored and watched
		// without going back to a map.
		ext, err := req.res.Typed(cur)
		if err != nil {
			return nil, err
		}
		pod, ok := ext.(*corev1.Pod)
		if !ok {
			return nil, apierrors.NewInternalError(fmt.Errorf("apiserver: pod %s as %T", req.name, ext))
		}
		switch {
		case pod.DeletionTimestamp != nil:
			return nil, bindingConflict(req, fmt.Sprintf("pod %s is being deleted, cannot be assigned to a host", pod.Name))
		case pod.Spec.NodeName != "":
			return nil, bindingConflict(req, fmt.Sprintf("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName))
		case len(pod.Spec.SchedulingGates) != 0:
			return nil, bindingConflict(req, fmt.Sprintf("pod %s has non-empty .spec.schedulingGates", pod.Name))
		}
		pod.Spec.NodeName = b.Target.Name
		if utilfeature.DefaultFeatureGate.Enabled(features.ClearingNominatedNodeNameAfterBinding) {
			pod.Status.NominatedNodeName = ""
		}
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		maps.Copy(pod.Annotations, b.Annotations)
		apipod.DropInitContainerAnnotations(pod.Annotations)
		if utilfeature.DefaultFeatureGate.Enabled(features.PodTopologyLabelsAdmission) && len(b.Labels) > 0 {
			if pod.Labels == nil {
				pod.Labels = map[string]string{}
			}
			maps.Copy(pod.Labels, b.Labels)
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
