// Package benchpods holds the pods the memory benchmarks write, in JSON:
// as kube-controller-manager creates a Deployment's ReplicaSet's pods, and
// as the kubelets then patch each pod's status once. BenchmarkCachedPodHeap
// in package apiserver writes them in process, and bench/createload
// (hack/memory.sh) writes them to listwatch and kube-apiserver over HTTPS,
// so that the two measure the same objects.
package benchpods

import "fmt"

// Name names the i-th pod as a ReplicaSet's: its generateName and a
// suffix.
func Name(i int) string { return fmt.Sprintf("svc-%03d-7d9c4b5f8-%05x", i%211, i) }

// Pod is the i-th pod as kube-controller-manager creates it from a
// Deployment's ReplicaSet: labels and annotations of the template, the
// controller reference, two containers with env, ports, resources and a
// config volume.
func Pod(i int) string {
	app := fmt.Sprintf("svc-%03d", i%211)
	return fmt.Sprintf(`{"metadata":{"name":%q,"generateName":"%s-7d9c4b5f8-",
"labels":{"app":%q,"app.kubernetes.io/name":%q,"pod-template-hash":"7d9c4b5f8","tier":%q},
"annotations":{"prometheus.io/scrape":"true","prometheus.io/port":"9090"},
"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"%s-7d9c4b5f8","uid":"6f1c1f7e-0000-4000-8000-%012d","controller":true,"blockOwnerDeletion":true}]},
"spec":{"volumes":[{"name":"config","configMap":{"name":"%s-config"}}],
"containers":[{"name":"app","image":"reg.example/%s:v1.%d.3","args":["--port=8080"],
"ports":[{"name":"http","containerPort":8080,"protocol":"TCP"}],
"env":[{"name":"LOG_LEVEL","value":"info"},{"name":"POD_NAME","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}],
"resources":{"requests":{"cpu":"250m","memory":"256Mi"},"limits":{"cpu":"1","memory":"512Mi"}},
"volumeMounts":[{"name":"config","mountPath":"/etc/app","readOnly":true}],"imagePullPolicy":"IfNotPresent"},
{"name":"log-shipper","image":"reg.example/infra/log-shipper:2.4.1","resources":{"requests":{"cpu":"50m","memory":"64Mi"}},"imagePullPolicy":"IfNotPresent"}],
"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","nodeName":"node-%03d"}}`,
		Name(i), app, app, app, []string{"frontend", "backend", "worker"}[i%3], app, i%211, app, app, i%17, i%300)
}

// StatusPatch is the kubelet's merge patch of the i-th pod's status once
// its containers run.
func StatusPatch(i int) string {
	return fmt.Sprintf(`{"status":{"phase":"Running","hostIP":"192.168.%d.%d","podIP":"10.%d.%d.%d","podIPs":[{"ip":"10.%d.%d.%d"}],
"startTime":"2026-03-01T08:00:00Z",
"conditions":[{"type":"Ready","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-03-01T08:00:09Z"},
{"type":"PodScheduled","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-03-01T08:00:00Z"}],
"containerStatuses":[{"name":"app","state":{"running":{"startedAt":"2026-03-01T08:00:03Z"}},"lastState":{},"ready":true,"restartCount":0,
"image":"reg.example/svc-%03d:v1.%d.3","imageID":"reg.example/svc-%03d@sha256:%064x","containerID":"containerd://%064x","started":true},
{"name":"log-shipper","state":{"running":{"startedAt":"2026-03-01T08:00:03Z"}},"lastState":{},"ready":true,"restartCount":0,
"image":"reg.example/infra/log-shipper:2.4.1","imageID":"reg.example/infra/log-shipper@sha256:5f2b3c9a0d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a","containerID":"containerd://%064x","started":true}],
"qosClass":"Burstable"}}`,
		i%300/250, i%250+1, 64+i>>16&63, i>>8&255, i&255, 64+i>>16&63, i>>8&255, i&255,
		i%211, i%17, i%211, i, i*7919+1, i*104729+3)
}
