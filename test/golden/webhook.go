package golden

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"os"

	"github.com/listwatch/listwatch/internal/webhookserver"
)

// Masks of the webhook server's address and of the unreachable one, in
// the messages that quote them (failed calls), and of its CA.
const (
	MaskWebhookHost     = "{{webhook-host}}"
	MaskUnreachableHost = "{{unreachable-host}}"
	MaskCABundle        = "{{cabundle}}"
)

// startWebhook starts the case's webhook server and has the masker
// replace its address and the unreachable one; stop stops it.
func (r *run) startWebhook() (stop func(), err error) {
	dir, err := os.MkdirTemp("", "golden-webhook-")
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	hook, err := webhookserver.Start(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	unreachable, err := webhookserver.Unreachable()
	if err != nil {
		hook.Close()
		_ = os.RemoveAll(dir)
		return nil, err
	}
	r.hook, r.unreachable = hook, unreachable
	r.mask.exact = map[string]string{}
	for raw, mask := range map[string]string{hook.URL: MaskWebhookHost, unreachable: MaskUnreachableHost} {
		if u, err := url.Parse(raw); err == nil {
			r.mask.exact[u.Host] = mask
		}
	}
	r.mask.exact[base64.StdEncoding.EncodeToString(hook.CABundle)] = MaskCABundle
	return func() {
		hook.Close()
		_ = os.RemoveAll(dir)
	}, nil
}

// webhookPlaceholder is the value of {{webhook}}, {{cabundle}} or
// {{unreachable}}; "" in a case with no webhook.
func (r *run) webhookPlaceholder(name string) string {
	if r.hook == nil {
		return ""
	}
	switch name {
	case "webhook":
		return r.hook.URL
	case "cabundle":
		return base64.StdEncoding.EncodeToString(r.hook.CABundle)
	case "unreachable":
		return r.unreachable
	}
	return ""
}

// review answers a Review step: the last AdmissionReview request the
// webhook server received at path, masked.
func (r *run) review(path string) Response {
	if r.hook == nil {
		return Response{Text: "review: the case runs no webhook"}
	}
	got := r.hook.Requests(path)
	if len(got) == 0 {
		return Response{Code: http.StatusNotFound, Text: "review: no request at " + path}
	}
	decoded, ok := decodeJSON(got[len(got)-1])
	if !ok {
		return Response{Code: http.StatusOK, Text: r.mask.String(string(got[len(got)-1]))}
	}
	return Response{Code: http.StatusOK, Body: r.mask.Mask(decoded)}
}
