package main

import (
	"bytes"
	"net/http"
)

// responseBuffer is an in-memory http.ResponseWriter for the requests the
// server makes to its own routes.
type responseBuffer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *responseBuffer) Header() http.Header {
	if r.header == nil {
		r.header = http.Header{}
	}
	return r.header
}

func (r *responseBuffer) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *responseBuffer) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

func (r *responseBuffer) code() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}
