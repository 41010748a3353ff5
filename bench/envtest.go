package main

// The envtest workload: what a test suite pays for a server of its own
// (package envtest, in the test's process), as issue 20 asks it measured:
// the time from the start to the first successful list on the memory
// store and on an embedded etcd, the same with 100 CRDs installed as part
// of the start, the heap an idle server holds, and the wall time of 20
// servers started at once, as 20 parallel tests start them. Beside it,
// hack/envtest-kube-start.sh measures kube-apiserver and etcd started as
// controller-runtime's envtest starts them (not run here: it needs the
// binaries hack/record-goldens.sh builds).

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/envtest"
)

func init() {
	register("envtest-start", func(cfg config) ([]Row, error) {
		runs := 9
		if cfg.scale > 1 {
			runs = 3
		}
		return benchEnvtest("envtest-start", runs)
	})
}

func benchEnvtest(name string, runs int) ([]Row, error) {
	crds, err := envtestCRDs(100)
	if err != nil {
		return nil, err
	}
	var rows []Row
	for _, c := range []struct {
		metric string
		opts   envtest.Options
	}{
		{"start to first list, memory", envtest.Options{}},
		{"start to first list, etcd", envtest.Options{Etcd: true}},
		{"start to first list, memory, 100 CRDs", envtest.Options{CRDs: crds}},
	} {
		times := make([]time.Duration, runs)
		for i := range times {
			d, env, err := envtestStartToList(c.opts)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.metric, err)
			}
			env.Stop()
			times[i] = d
		}
		slices.Sort(times)
		rows = append(rows, Row{name, implListwatch, c.metric + " (median)", ms(times[len(times)/2]), "ms"})
	}

	const idle = 10
	before := envtestLiveHeap()
	envs := make([]*envtest.Environment, 0, idle)
	for range idle {
		_, env, err := envtestStartToList(envtest.Options{})
		if err != nil {
			return nil, err
		}
		envs = append(envs, env)
	}
	after := envtestLiveHeap()
	for _, env := range envs {
		env.Stop()
	}
	rows = append(rows, Row{name, implListwatch, fmt.Sprintf("heap per idle server (%d, memory)", idle), float64(after-before) / idle / (1 << 20), "MiB"})

	const parallel = 20
	begin := time.Now()
	envs = make([]*envtest.Environment, parallel)
	errs := make([]error, parallel)
	var wg sync.WaitGroup
	for i := range parallel {
		wg.Go(func() { _, envs[i], errs[i] = envtestStartToList(envtest.Options{}) })
	}
	wg.Wait()
	wall := time.Since(begin)
	for _, env := range envs {
		if env != nil {
			env.Stop()
		}
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	rows = append(rows, Row{name, implListwatch, fmt.Sprintf("%d servers started in parallel, all listed", parallel), ms(wall), "ms"})
	return rows, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// envtestStartToList starts an environment and lists namespaces through
// its client: how long both took, and the environment to stop.
func envtestStartToList(opts envtest.Options) (time.Duration, *envtest.Environment, error) {
	begin := time.Now()
	env, err := envtest.New(opts)
	if err != nil {
		return 0, nil, err
	}
	if _, err := client.For[*corev1.Namespace](env.Client, "").List(context.Background(), metav1.ListOptions{}); err != nil {
		env.Stop()
		return 0, nil, err
	}
	return time.Since(begin), env, nil
}

// envtestLiveHeap is the heap in use after a full collection.
func envtestLiveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// envtestCRDs are n definitions of a namespaced kind with a status
// subresource and a small schema, as kubebuilder writes them.
func envtestCRDs(n int) ([]*unstructured.Unstructured, error) {
	var docs strings.Builder
	for i := range n {
		fmt.Fprintf(&docs, `---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: kind%[1]ds.bench.listwatch.dev}
spec:
  group: bench.listwatch.dev
  scope: Namespaced
  names: {plural: kind%[1]ds, singular: kind%[1]d, kind: Kind%[1]d, listKind: Kind%[1]dList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {replicas: {type: integer, minimum: 0}, image: {type: string}}}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, i)
	}
	return apiserver.ParseManifests([]byte(docs.String()))
}
