package webhookserver

import (
	"encoding/json"
	"fmt"
	"net/http"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The conversion webhook: a custom resource whose version v1 has
// spec.<V1Field> and v2 spec.<V2Field>, the same value under two names.
const (
	// ConvertPath converts between v1 and v2; ConvertFailPath answers
	// every ConversionReview with a Failure carrying ConvertFailMessage.
	ConvertPath        = "/convert"
	ConvertFailPath    = "/convert-fail"
	ConvertFailMessage = "the test conversion webhook refuses"
	V1Field            = "color"
	V2Field            = "hue"
)

// convert answers a ConversionReview v1 request.
func (s *Server) convert(w http.ResponseWriter, r *http.Request, fail bool, body []byte) {
	review := &apiextensionsv1.ConversionReview{}
	if err := json.Unmarshal(body, review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not a ConversionReview request: %v", err), http.StatusBadRequest)
		return
	}
	s.record(r.URL.Path, body)

	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	if fail {
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: ConvertFailMessage}
	} else {
		for _, obj := range review.Request.Objects {
			out, err := ConvertObject(obj.Raw, review.Request.DesiredAPIVersion)
			if err != nil {
				resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
				resp.ConvertedObjects = nil
				break
			}
			resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
		}
	}
	out := apiextensionsv1.ConversionReview{TypeMeta: review.TypeMeta, Response: resp}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// ConvertObject converts obj, a custom resource at v1 or v2 as JSON, to
// desired (group/v1 or group/v2 of the same group): spec.<V1Field> at v1
// is spec.<V2Field> at v2.
func ConvertObject(obj []byte, desired string) ([]byte, error) {
	var o map[string]any
	if err := json.Unmarshal(obj, &o); err != nil {
		return nil, fmt.Errorf("object: %w", err)
	}
	from, _ := o["apiVersion"].(string)
	fromGV, err := schema.ParseGroupVersion(from)
	if err != nil {
		return nil, err
	}
	toGV, err := schema.ParseGroupVersion(desired)
	if err != nil {
		return nil, err
	}
	if fromGV.Group != toGV.Group {
		return nil, fmt.Errorf("cannot convert %s to %s", from, desired)
	}
	names := map[string]string{"v1": V1Field, "v2": V2Field}
	fromField, toField := names[fromGV.Version], names[toGV.Version]
	if fromField == "" || toField == "" {
		return nil, fmt.Errorf("cannot convert %s to %s", from, desired)
	}
	if spec, ok := o["spec"].(map[string]any); ok && fromField != toField {
		if v, ok := spec[fromField]; ok {
			delete(spec, fromField)
			spec[toField] = v
		}
	}
	o["apiVersion"] = desired
	return json.Marshal(o)
}
