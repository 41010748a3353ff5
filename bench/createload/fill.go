package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/listwatch/listwatch/internal/benchpods"
)

// The field managers of the writes -pods makes: the managedFields the
// server keeps name them as kube-apiserver names a client by its user
// agent.
const (
	controllerAgent = "kube-controller-manager/v1.37.2"
	kubeletAgent    = "kubelet/v1.37.2"
)

const protobufMediaType = "application/vnd.kubernetes.protobuf"

// fill creates o.pods pods (benchpods.Pod) with o.concurrency clients,
// then merge-patches each one's status (benchpods.StatusPatch) on the
// status subresource: what a ReplicaSet's pods and their kubelets write.
// Every write must succeed.
func fill(ctx context.Context, o options) (result, error) {
	c, err := newClient(o)
	if err != nil {
		return result{}, err
	}
	if err := c.prepare(ctx); err != nil {
		return result{}, err
	}
	res := result{Label: o.label, Concurrency: o.concurrency}
	start := time.Now()
	if err := c.each(ctx, func(i int) error {
		return c.expect(http.StatusCreated)(c.createPod(ctx, benchpods.Pod(i), controllerAgent))
	}); err != nil {
		return res, fmt.Errorf("create: %w", err)
	}
	created := time.Now()
	res.Creates, res.Seconds = int64(o.pods), created.Sub(start).Seconds()
	res.CreatesPerSec = float64(o.pods) / res.Seconds
	if err := c.each(ctx, func(i int) error {
		return c.expect(http.StatusOK)(c.send(ctx, request{method: http.MethodPatch,
			path:        c.podsPath() + "/" + benchpods.Name(i) + "/status",
			contentType: "application/merge-patch+json", userAgent: kubeletAgent, body: []byte(benchpods.StatusPatch(i))}))
	}); err != nil {
		return res, fmt.Errorf("patch status: %w", err)
	}
	res.Patches = int64(o.pods)
	res.PatchesPerSec = float64(o.pods) / time.Since(created).Seconds()
	return res, nil
}

// each calls write for 0 ≤ i < o.pods on o.concurrency goroutines, and
// returns the first error, after which no write starts.
func (c *client) each(ctx context.Context, write func(i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range c.o.concurrency {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= c.o.pods {
					return
				}
				if err := write(i); err != nil {
					cancel(err)
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// expect turns an answer other than code into an error.
func (c *client) expect(code int) func(int, string, error) error {
	return func(got int, body string, err error) error {
		if err != nil {
			return err
		}
		if got != code {
			return fmt.Errorf("%d %s", got, body)
		}
		return nil
	}
}

// podCodec encodes pods in kube's protobuf envelope.
var podCodec = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

// podProtobuf is the pod of the JSON document doc in protobuf.
func podProtobuf(doc string) ([]byte, error) {
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}
	if err := json.Unmarshal([]byte(doc), pod); err != nil {
		return nil, err
	}
	return runtime.Encode(podCodec, pod)
}
