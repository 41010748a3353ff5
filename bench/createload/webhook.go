package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/listwatch/listwatch/internal/webhookserver"
)

// allowWebhook serves, in this process, a validating admission webhook
// that allows every pod created in the run's namespace, and installs its
// configuration: what one webhook costs each create. The returned stop
// removes both.
func (c *client) allowWebhook(ctx context.Context) (stop func(), err error) {
	dir, err := os.MkdirTemp("", "createload-webhook-")
	if err != nil {
		return nil, err
	}
	hook, err := webhookserver.Start(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	name := "createload-allow-" + c.o.namespace
	cfg := map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
		"metadata": map[string]any{"name": name},
		"webhooks": []any{map[string]any{
			"name": "allow.createload.example.com", "sideEffects": "None", "admissionReviewVersions": []string{"v1"},
			"failurePolicy": "Fail",
			"clientConfig":  map[string]any{"url": hook.URL + "/allow", "caBundle": base64.StdEncoding.EncodeToString(hook.CABundle)},
			"rules": []any{map[string]any{"apiGroups": []string{""}, "apiVersions": []string{"v1"},
				"operations": []string{"CREATE"}, "resources": []string{"pods"}}},
			"namespaceSelector": map[string]any{"matchLabels": map[string]string{"kubernetes.io/metadata.name": c.o.namespace}},
		}},
	}
	body, _ := json.Marshal(cfg) // maps and strings only
	const path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
	stop = func() {
		if code, _, err := c.do(context.WithoutCancel(ctx), http.MethodDelete, path+"/"+name, ""); err != nil || code != http.StatusOK {
			fmt.Fprintf(os.Stderr, "createload: delete webhook configuration: %d %v\n", code, err)
		}
		hook.Close()
		_ = os.RemoveAll(dir)
	}
	if err := c.ensure(ctx, path, string(body)); err != nil {
		stop()
		return nil, fmt.Errorf("create webhook configuration: %w", err)
	}
	// The server's webhook plugin sees the configuration a moment after
	// it is stored: the measurement starts once the webhook is called.
	deadline := time.Now().Add(30 * time.Second)
	for len(hook.Requests("/allow")) == 0 {
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("the webhook was not called within 30 s")
		}
		if _, _, err := c.post(ctx, c.podsPath()+"?dryRun=All", pod("createload-webhook-probe", 0)); err != nil {
			stop()
			return nil, err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return stop, nil
}
