package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"

	"github.com/listwatch/listwatch/apiserver/internal/decode"
	"github.com/listwatch/listwatch/apiserver/internal/kube"
	"github.com/listwatch/listwatch/apiserver/internal/registry"
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
		target := s.reg.BindingTarget(gv)
		if target == nil {
			return notFoundPath()
		}
		req := request{res: target, namespace: rest[1], sub: resources.Binding, warn: func(text string) { respond.Warning(w, text) }}
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

// bind assigns req's pod to the node b targets, through its resource's
// binding rules (registry.Binder, kube-apiserver's BindingREST), and
// answers with a 201 Success Status. resource is what was posted to:
// pods (pods/{name}/binding) or bindings.
func (s *Server) bind(w http.ResponseWriter, r *http.Request, req request, resource schema.GroupVersionResource, b *corev1.Binding) error {
	binder, ok := req.res.WriteRules().(registry.Binder)
	if !ok {
		return apierrors.NewInternalError(fmt.Errorf("apiserver: %v has no binding rules", req.res.GVR()))
	}
	wr := s.write(r.Context(), req, "create", req.name)
	if resource.Resource != req.res.Plural {
		wr.Subresource = ""
	}
	mutate, err := binder.Bind(r.Context(), wr, resource, b)
	if err != nil {
		return err
	}
	if _, err := s.update(r.Context(), req, mutate); err != nil {
		return err
	}
	st := metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusCreated}
	writeStatusObject(w, &st)
	return nil
}
