package apiserver

import (
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/apiserver/internal/respond"
	"github.com/listwatch/listwatch/apiserver/internal/wire"
)

// encoding is a response format a client accepted.
type encoding int

const (
	encJSON encoding = iota
	encProtobuf
	encTable
)

// negotiate picks the first media type in Accept this server can produce
// for r: JSON, protobuf for built-in types, or a Table when table is true
// (reads only). Media types asking for another shape ("as=...") are
// skipped, so a client listing plain JSON as a fallback gets it; 406 when
// nothing fits.
func negotiate(req *http.Request, r *resource, table bool) (encoding, error) {
	enc, _, err := negotiateTable(req, r, table)
	return enc, err
}

// negotiateTable is negotiate also returning the meta.k8s.io version of an
// accepted Table.
func negotiateTable(req *http.Request, r *resource, table bool) (encoding, tableVersion, error) {
	accept := req.Header.Get("Accept")
	if strings.TrimSpace(accept) == "" {
		return encJSON, "", nil
	}
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case respond.MediaJSON:
			switch params["as"] {
			case "":
				return encJSON, "", nil
			case "Table":
				if table && params["g"] == "meta.k8s.io" && (params["v"] == "v1" || params["v"] == "v1beta1") {
					return encTable, tableVersion(params["v"]), nil
				}
			}
		case respond.MediaProtobuf:
			if params["as"] == "" && r != nil && r.Protobuf() {
				return encProtobuf, "", nil
			}
		case "*/*", "application/*":
			return encJSON, "", nil
		}
	}
	return encJSON, "", newStatus(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable, "only the following media types are accepted: application/json, application/vnd.kubernetes.protobuf")
}

// writeRead answers a get or list: a Table when the client asks for one,
// else as writeObject.
func writeRead(w http.ResponseWriter, req *http.Request, r *resource, u *unstructured.Unstructured) error {
	enc, v, err := negotiateTable(req, r, true)
	if err != nil {
		return err
	}
	if enc == encTable {
		return writeTable(w, req, r, v, http.StatusOK, u)
	}
	return writeObject(w, req, r, http.StatusOK, u)
}

// writeObject writes one object (or list) with the negotiated encoding.
func writeObject(w http.ResponseWriter, req *http.Request, r *resource, code int, obj object) error {
	return writeEncoded(w, req, r, code, obj, nil)
}

// writeEncoded is writeObject for an object whose JSON encoding js the
// caller has already made (nil if not).
func writeEncoded(w http.ResponseWriter, req *http.Request, r *resource, code int, obj object, js []byte) error {
	enc, err := negotiate(req, r, false)
	if err != nil {
		return err
	}
	u, isUnstructured := obj.(*unstructured.Unstructured)
	if enc == encProtobuf {
		var body []byte
		if isUnstructured {
			body, err = wire.ToProtobuf(r, u)
		} else {
			body, err = wire.EncodeProto(obj)
		}
		if err == nil {
			w.Header().Set("Content-Type", respond.MediaProtobuf)
			w.WriteHeader(code)
			_, _ = w.Write(body)
			return nil
		}
		// Fall back to JSON for anything the typed scheme cannot encode.
	}
	body := js
	if body == nil {
		if body, err = registry.MarshalJSON(obj); err != nil {
			return apierrors.NewInternalError(err)
		}
	}
	w.Header().Set("Content-Type", respond.MediaJSON)
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
	return nil
}
