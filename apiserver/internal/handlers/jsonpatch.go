// Package handlers is named after k8s.io/apiserver/pkg/endpoints/handlers,
// whose patch handler decodes a JSON patch's operations into an unexported
// type before applying it: the errors of that decoding name the type
// (`[]handlers.jsonPatchOp`), and so do the server's, which decodes into a
// type of the same name and shape here.
package handlers

import (
	"fmt"

	kjson "sigs.k8s.io/json"
)

// jsonPatchOp is one operation of a JSON patch (RFC 6902).
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	From  string `json:"from"`
	Value any    `json:"value"`
}

// DecodeJSONPatchStrict decodes a JSON patch's operations strictly, as
// kube-apiserver does under fieldValidation Warn (its default) and Strict:
// err is the decoding's error, and the strict errors are the unknown and
// duplicate fields of the operations, each prefixed "json patch ".
func DecodeJSONPatchStrict(patch []byte) (strictErrs []error, err error) {
	var ops []jsonPatchOp
	strictErrs, err = kjson.UnmarshalStrict(patch, &ops)
	if err != nil {
		return nil, err
	}
	for i, e := range strictErrs {
		strictErrs[i] = fmt.Errorf("json patch %w", e)
	}
	return strictErrs, nil
}
