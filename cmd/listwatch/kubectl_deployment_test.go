package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/client"
)

// atoi is the number s says, or -1.
func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// kubectlDeployment is a Deployment of replicas pods rolling 10% at a
// time either way.
func kubectlDeployment(replicas int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: %d
  selector:
    matchLabels: {app: web}
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxSurge: 10%%, maxUnavailable: 10%%}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: registry.example/web:1
`, replicas)
}

// rolloutSampler counts the pods of app=web every 50 ms: the fewest available
// (Ready and not being deleted) and the most not being deleted; and the
// most replicas the ReplicaSets' specs asked for at once, which kube's
// controller bounds by replicas + maxSurge. Pods may exceed that bound for
// a moment, as in kube: an old ReplicaSet's spec goes down before its
// controller marks its pods deleted, and the new one may grow meanwhile.
type rolloutSampler struct {
	mu                 sync.Mutex
	minAvailable, most int
	mostSpec           int
	samples            int
	stop               context.CancelFunc
	wg                 sync.WaitGroup
}

func sampleRollout(t *testing.T, kubeconfig string, start int) *rolloutSampler {
	t.Helper()
	cc, err := client.LoadConfig(client.LoadOptions{Kubeconfig: kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	pods := client.For[*corev1.Pod](c, "default")
	replicaSets := client.For[*appsv1.ReplicaSet](c, "default")
	ctx, cancel := context.WithCancel(context.Background())
	s := &rolloutSampler{minAvailable: start, stop: cancel}
	s.wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			l, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err == nil {
				var available, live int
				for _, p := range l.Items {
					if p.DeletionTimestamp != nil {
						continue
					}
					live++
					for _, cond := range p.Status.Conditions {
						if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
							available++
						}
					}
				}
				s.mu.Lock()
				s.minAvailable, s.most = min(s.minAvailable, available), max(s.most, live)
				s.samples++
				s.mu.Unlock()
			}
			if l, err := replicaSets.List(ctx, metav1.ListOptions{LabelSelector: "app=web"}); err == nil {
				spec := 0
				for _, rs := range l.Items {
					if rs.Spec.Replicas != nil {
						spec += int(*rs.Spec.Replicas)
					}
				}
				s.mu.Lock()
				s.mostSpec = max(s.mostSpec, spec)
				s.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return s
}

func (s *rolloutSampler) end() (minAvailable, most, mostSpec, samples int) {
	s.stop()
	s.wg.Wait()
	return s.minAvailable, s.most, s.mostSpec, s.samples
}

// TestKubectlRollout is issue 18's Deployment rollout with the real
// kubectl against `listwatch up`: a Deployment of 100 with maxSurge and
// maxUnavailable 10% becomes available; kubectl set image rolls it with
// never fewer than 90 pods available nor more than 110 pods (sampled every
// 50 ms); kubectl rollout status returns; kubectl rollout undo makes the
// old ReplicaSet current again; kubectl expose makes a Service whose
// EndpointSlice lists the pods; a paused Deployment does not roll until
// resumed; a rollout to an image the nodes cannot run (`up
// --pod-fail-images`) ends with Progressing=False, reason
// ProgressDeadlineExceeded, and kubectl rollout status fails saying so.
// A StatefulSet's and a DaemonSet's rollout status return too.
func TestKubectlRollout(t *testing.T) {
	// As `up --pod-fail-images registry.example/broken:*` would; `up`
	// reads the flags when it starts, and no test of the package runs in
	// parallel with another.
	saved := upControllerManager.podFailImages
	upControllerManager.podFailImages = "registry.example/broken:*"
	t.Cleanup(func() { upControllerManager.podFailImages = saved })
	e := newKubectlEnv(t)
	e.ok("apply", "-f", e.file("web.yaml", kubectlDeployment(100)))
	e.ok("rollout", "status", "deployment/web", "--timeout=60s")
	if got := e.ok("get", "deployment", "web", "-o", "jsonpath={.status.availableReplicas}/{.status.updatedReplicas}").stdout; got != "100/100" {
		t.Fatalf("available/updated after the first rollout: %s", got)
	}
	rsOf := func() map[string]string {
		out := e.ok("get", "rs", "-l", "app=web", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.spec.template.spec.containers[0].image} {.spec.replicas} {.metadata.annotations.deployment\.kubernetes\.io/revision}{"\n"}{end}`).stdout
		m := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(line); len(f) == 4 {
				m[f[1]] = f[0] + " replicas=" + f[2] + " revision=" + f[3]
			}
		}
		return m
	}
	first := rsOf()["registry.example/web:1"]
	if !strings.HasSuffix(first, "replicas=100 revision=1") {
		t.Fatalf("replica sets: %v", rsOf())
	}

	// kubectl expose makes a Service of the Deployment's pods: its
	// EndpointSlice, which kubectl get endpointslices shows, lists the 100
	// pods, ready, as its Endpoints do.
	t.Run("endpointslices", func(t *testing.T) {
		e.ok("expose", "deployment", "web", "--port=80", "--target-port=8080")
		deadline := time.Now().Add(30 * time.Second)
		for {
			ready := e.ok("get", "endpointslices", "-l", "kubernetes.io/service-name=web", "-o",
				`jsonpath={range .items[*].endpoints[*]}{.conditions.ready}{"\n"}{end}`).stdout
			if strings.Count(ready, "true") == 100 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the Service's EndpointSlices list %d ready endpoints, want 100", strings.Count(ready, "true"))
			}
			time.Sleep(100 * time.Millisecond)
		}
		table := e.ok("get", "endpointslices", "-l", "kubernetes.io/service-name=web").stdout
		// NAME ADDRESSTYPE PORTS ENDPOINTS AGE, and one slice.
		rows := tableRows(table)
		if len(rows) != 2 || len(rows[1]) < 3 || !strings.HasPrefix(rows[1][0], "web-") || rows[1][1] != "IPv4" || rows[1][2] != "8080" {
			t.Errorf("kubectl get endpointslices:\n%s", table)
		}
		if got := e.ok("get", "endpoints", "web", "-o", `jsonpath={.metadata.labels.endpoints\.kubernetes\.io/managed-by}`).stdout; got != "endpoint-controller" {
			t.Errorf("the Endpoints' managed-by label %q, want endpoint-controller", got)
		}
	})

	// What a new user tries first: kubectl create job runs to Complete and
	// kubectl wait returns on it; the nodes are Ready; describe shows the
	// pod's events, as kube's scheduler and kubelet record them; logs and
	// exec say that no kubelet runs here.
	t.Run("job, nodes and pod events", func(t *testing.T) {
		e.ok("create", "job", "pi", "--image=registry.example/pi:1")
		e.ok("wait", "--for=condition=complete", "job/pi", "--timeout=60s")
		// NAME STATUS COMPLETIONS DURATION AGE
		table := e.ok("get", "job", "pi").stdout
		if row := rowFor(tableRows(table), "pi"); len(row) < 3 || row[1] != "Complete" || row[2] != "1/1" {
			t.Errorf("kubectl get job pi:\n%s", table)
		}
		// NAME STATUS ROLES AGE VERSION
		table = e.ok("get", "nodes").stdout
		rows := tableRows(table)
		if len(rows) < 2 {
			t.Fatalf("kubectl get nodes:\n%s", table)
		}
		for _, row := range rows[1:] {
			if len(row) < 2 || row[1] != "Ready" {
				t.Errorf("node not Ready in kubectl get nodes:\n%s", table)
			}
		}
		// Events are recorded as kube's recorders record them, after the
		// fact and in the background, behind those of the Deployment's
		// 100 pods: describe is asked again until they have all arrived.
		var described string
		for deadline := time.Now().Add(60 * time.Second); ; {
			described = e.ok("describe", "pod", "-l", "job-name=pi").stdout
			missing := podEventsMissing(described, "Scheduled", "Pulled", "Created", "Started")
			if len(missing) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("kubectl describe pod lacks the %s events:\n%s", strings.Join(missing, ", "), described)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if !strings.Contains(described, "Status:") || !strings.Contains(described, "Succeeded") {
			t.Errorf("kubectl describe pod: the pod did not succeed:\n%s", described)
		}
		// No kubelet runs behind the simulated nodes: kubectl logs and
		// exec fail saying so.
		for _, args := range [][]string{{"logs", "job/pi"}, {"exec", "deployment/web", "--", "ls"}} {
			if r := e.run(args...); r.err == nil || !strings.Contains(r.stderr, "no kubelet runs here") {
				t.Errorf("kubectl %s: %v, want an error saying no kubelet runs here\n%s", strings.Join(args, " "), r.err, r)
			}
		}
	})

	// kubectl rollout status of a StatefulSet and of a DaemonSet returns
	// once their pods are up, and again once kubectl set image has rolled
	// them (the StatefulSet's one at a time from the highest ordinal, the
	// DaemonSet's one node at a time).
	nodes := len(strings.Fields(e.ok("get", "nodes", "-o", "jsonpath={.items[*].metadata.name}").stdout))
	for _, w := range []struct {
		kind, manifest string
		// status is a jsonpath of the object's status, checked by
		// statusOK once the roll is done.
		status   string
		statusOK func(string) bool
		// pods are the pods' names and images wanted, or, when empty,
		// one pod per node, all of the new image.
		pods string
	}{{
		kind: "statefulset", manifest: kubectlStatefulSet,
		status: "{.status.readyReplicas}/{.status.updatedReplicas} {.status.currentRevision} {.status.updateRevision}",
		statusOK: func(st string) bool {
			f := strings.Fields(st)
			return len(f) == 3 && f[0] == "2/2" && f[1] == f[2] && strings.HasPrefix(f[1], "db-")
		},
		pods: "db-0=registry.example/db:2 db-1=registry.example/db:2",
	}, {
		kind: "daemonset", manifest: kubectlDaemonSet,
		status: "{.status.desiredNumberScheduled} {.status.numberAvailable} {.status.updatedNumberScheduled} {.status.numberMisscheduled}",
		statusOK: func(st string) bool {
			n := strconv.Itoa(nodes)
			return st == n+" "+n+" "+n+" 0"
		},
	}} {
		t.Run(w.kind, func(t *testing.T) {
			start := time.Now()
			e.ok("apply", "-f", e.file(w.kind+".yaml", w.manifest))
			e.ok("rollout", "status", w.kind+"/db", "--timeout=60s")
			created := time.Since(start)
			start = time.Now()
			e.ok("set", "image", w.kind+"/db", "db=registry.example/db:2")
			e.ok("rollout", "status", w.kind+"/db", "--timeout=60s")
			t.Logf("%s up in %v, rolled in %v", w.kind, created.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
			if st := e.ok("get", w.kind, "db", "-o", "jsonpath="+w.status).stdout; !w.statusOK(st) {
				t.Errorf("status %s: %q", w.status, st)
			}
			got := strings.TrimSpace(e.ok("get", "pods", "-l", "app=db,kind="+w.kind, "-o", `jsonpath={range .items[*]}{.metadata.name}={.spec.containers[0].image} {end}`).stdout)
			if w.pods != "" {
				if got != w.pods {
					t.Errorf("pods %q, want %q", got, w.pods)
				}
				return
			}
			pods := strings.Fields(got)
			if len(pods) != nodes || slices.ContainsFunc(pods, func(p string) bool { return !strings.HasSuffix(p, "=registry.example/db:2") }) {
				t.Errorf("pods %q, want one of registry.example/db:2 on each of the %d nodes", got, nodes)
			}
		})
	}

	t.Run("set image", func(t *testing.T) {
		s := sampleRollout(t, e.kubeconfig, 100)
		start := time.Now()
		e.ok("set", "image", "deployment/web", "web=registry.example/web:2")
		e.ok("rollout", "status", "deployment/web", "--timeout=90s")
		took := time.Since(start)
		minAvailable, most, mostSpec, samples := s.end()
		t.Logf("rollout of 100 (10%% surge, 10%% unavailable): %v; %d samples, available never below %d, pods never above %d, replica sets' replicas never above %d",
			took.Round(time.Millisecond), samples, minAvailable, most, mostSpec)
		if minAvailable < 90 || mostSpec > 110 {
			t.Errorf("available pods fell to %d (floor 90) or the replica sets asked for %d (ceiling 110)", minAvailable, mostSpec)
		}
		rs := rsOf()
		if !strings.HasSuffix(rs["registry.example/web:2"], "replicas=100 revision=2") || !strings.HasSuffix(rs["registry.example/web:1"], "replicas=0 revision=1") {
			t.Errorf("replica sets after set image: %v", rs)
		}
	})

	t.Run("rollout undo", func(t *testing.T) {
		e.ok("rollout", "undo", "deployment/web")
		e.ok("rollout", "status", "deployment/web", "--timeout=90s")
		rs := rsOf()
		if len(rs) != 2 || rs["registry.example/web:1"] != strings.Replace(first, "revision=1", "revision=3", 1) {
			t.Errorf("replica sets after undo: %v (the first was %s)", rs, first)
		}
		if got := e.ok("get", "deployment", "web", "-o", `jsonpath={.metadata.annotations.deployment\.kubernetes\.io/revision}`).stdout; got != "3" {
			t.Errorf("deployment revision %q after undo, want 3", got)
		}
		hist := e.ok("rollout", "history", "deployment/web").stdout
		rows := tableRows(hist[strings.Index(hist, "REVISION"):])
		if rowFor(rows, "2") == nil || rowFor(rows, "3") == nil || rowFor(rows, "1") != nil {
			t.Errorf("rollout history:\n%s", hist)
		}
	})

	t.Run("paused", func(t *testing.T) {
		e.ok("rollout", "pause", "deployment/web")
		e.ok("set", "image", "deployment/web", "web=registry.example/web:3")
		// The controller sees the change (observedGeneration) and does
		// not roll.
		deadline := time.Now().Add(30 * time.Second)
		for {
			got := e.ok("get", "deployment", "web", "-o", "jsonpath={.metadata.generation}/{.status.observedGeneration}").stdout
			if g := strings.Split(got, "/"); len(g) == 2 && g[0] == g[1] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("generation never observed: %s", got)
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond)
		if rs := rsOf(); len(rs) != 2 {
			t.Errorf("a paused deployment rolled: %v", rs)
		}
		cond := e.ok("get", "deployment", "web", "-o", `jsonpath={.status.conditions[?(@.type=="Progressing")].reason}`).stdout
		if cond != "DeploymentPaused" {
			t.Errorf("Progressing reason while paused: %q", cond)
		}
		e.ok("rollout", "resume", "deployment/web")
		e.ok("rollout", "status", "deployment/web", "--timeout=90s")
		if rs := rsOf(); !strings.HasSuffix(rs["registry.example/web:3"], "replicas=100 revision=4") {
			t.Errorf("replica sets after resume: %v", rs)
		}
	})

	t.Run("failing image", func(t *testing.T) {
		e.ok("patch", "deployment", "web", "-p", `{"spec":{"progressDeadlineSeconds":3}}`)
		e.ok("set", "image", "deployment/web", "web=registry.example/broken:1")
		start := time.Now()
		r := e.run("rollout", "status", "deployment/web", "--timeout=60s")
		t.Logf("kubectl rollout status failed after %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(r.stderr))
		if r.err == nil || !strings.Contains(r.stderr, `deployment "web" exceeded its progress deadline`) {
			t.Errorf("rollout status of a rollout to a failing image: %v, want an error saying the deadline was exceeded\n%s", r.err, r)
		}
		cond := e.ok("get", "deployment", "web", "-o", `jsonpath={.status.conditions[?(@.type=="Progressing")].status} {.status.conditions[?(@.type=="Progressing")].reason}`).stdout
		if cond != "False ProgressDeadlineExceeded" {
			t.Errorf("Progressing condition %q, want \"False ProgressDeadlineExceeded\"", cond)
		}
		// The old pods are still serving: the rollout stopped within
		// maxUnavailable.
		if got := e.ok("get", "deployment", "web", "-o", "jsonpath={.status.availableReplicas}").stdout; atoi(got) < 90 {
			t.Errorf("availableReplicas %s during the stuck rollout, want at least 90", got)
		}
	})
}

// kubectlStatefulSet is a StatefulSet of 2 (OrderedReady, RollingUpdate).
const kubectlStatefulSet = `apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  replicas: 2
  serviceName: db
  selector:
    matchLabels: {app: db, kind: statefulset}
  template:
    metadata:
      labels: {app: db, kind: statefulset}
    spec:
      containers:
      - name: db
        image: registry.example/db:1
`

// kubectlDaemonSet is a DaemonSet (RollingUpdate, maxUnavailable 1).
const kubectlDaemonSet = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: db
spec:
  selector:
    matchLabels: {app: db, kind: daemonset}
  template:
    metadata:
      labels: {app: db, kind: daemonset}
    spec:
      containers:
      - name: db
        image: registry.example/db:1
`

// podEventsMissing is those of reasons that kubectl describe's output
// does not list under its Events.
func podEventsMissing(described string, reasons ...string) []string {
	i := strings.Index(described, "Events:")
	var missing []string
	for _, reason := range reasons {
		if i < 0 || !strings.Contains(described[i:], reason) {
			missing = append(missing, reason)
		}
	}
	return missing
}
