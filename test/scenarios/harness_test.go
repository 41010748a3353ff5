package scenarios

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/controllers/cronjob"
	"github.com/listwatch/listwatch/controllers/podlifecycle"
	"github.com/listwatch/listwatch/envtest"
	"github.com/listwatch/listwatch/test/golden"
)

var kubeconfig = flag.String("kubeconfig", "", "record: run the scenarios against the cluster of this kubeconfig (kube-apiserver and kube-controller-manager, as hack/record-scenarios.sh starts them), with the stand-in nodes run here, and write testdata/<scenario>.json")

// KubeVersion is the release the goldens are recorded from.
const KubeVersion = "v1.37.2"

// Bounds of the waits of a run.
const (
	// doneTimeout bounds the wait for a scenario's end state (a CronJob's
	// first schedule on kube comes within a minute).
	doneTimeout = 3 * time.Minute
	// replayTimeout bounds the wait, once the end state is reached on
	// listwatch, for the objects to equal the golden.
	replayTimeout = time.Minute
	// settle is how long the objects must stay unchanged, once the end
	// state is reached on kube, before they are recorded: the events and
	// status writes that follow the end state are part of it.
	settle = 5 * time.Second
	// stayEqual is how long the objects must stay equal to the golden,
	// once they are, on listwatch: a state passed through on the way to
	// another does not pass.
	stayEqual = time.Second
	poll      = 50 * time.Millisecond
)

// standIn is the stand-in scheduler and kubelets' timing on both sides.
var standIn = podlifecycle.Options{
	StartDelay:       200 * time.Millisecond,
	RunDuration:      500 * time.Millisecond,
	TerminationDelay: 100 * time.Millisecond,
}

// scenario is one golden: objects created in a fresh namespace and the
// state to wait for.
type scenario struct {
	name string
	// create makes the scenario's objects in namespace ns. On listwatch,
	// env is the replay's environment (nil when recording).
	create func(ctx context.Context, c *client.Client, ns string, env *replay) error
	// done reports whether the end state is reached (of create, when
	// then follows).
	done func(ctx context.Context, c *client.Client, ns string) (bool, error)
	// then are further steps, each done in turn once the state before
	// it is reached.
	then []step
	// cleanup, when set, undoes what the scenario changed outside its
	// namespace (a node's taints) once it has ended.
	cleanup func(ctx context.Context, c *client.Client) error
}

// step is one action of a scenario after its creation, and the state it
// leads to.
type step struct {
	do    func(ctx context.Context, c *client.Client, ns string, env *replay) error
	until func(ctx context.Context, c *client.Client, ns string) (bool, error)
}

// Golden is a scenario's recording: its masked objects, by kind.
type Golden struct {
	Scenario string `json:"scenario"`
	// RecordedFrom names what the objects were recorded from.
	RecordedFrom string `json:"recordedFrom"`
	// Objects are the masked objects, by resource (cronjobs, jobs, pods,
	// events; statefulsets, daemonsets, controllerrevisions,
	// persistentvolumeclaims, resourcequotas, replicasets, services,
	// endpoints, endpointslices and poddisruptionbudgets where there are
	// some), each
	// list sorted.
	Objects map[string]any `json:"objects"`
}

// replay is the listwatch side of a run.
type replay struct {
	// cronClock shifts the CronJob controller's clock (cronClock.advanceTo).
	cronClock *shiftedClock
}

// target is where the scenarios run.
type target struct {
	c      *client.Client
	replay *replay // nil when recording
}

func TestScenarios(t *testing.T) {
	tg := startTarget(t)
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) { tg.run(t, s) })
	}
}

// startTarget connects to the cluster of -kubeconfig and runs the
// stand-in nodes against it, or starts listwatch's server and every
// controller in the test's process.
func startTarget(t *testing.T) *target {
	t.Helper()
	if *kubeconfig == "" {
		clock := &shiftedClock{}
		env := envtest.Start(t, envtest.Options{
			Controllers:  controllermanager.AllControllers(),
			PodLifecycle: standIn,
			CronJob:      cronjob.Options{Now: clock.Now},
		})
		return &target{c: env.Client, replay: &replay{cronClock: clock}}
	}
	cfg, err := client.LoadConfig(client.LoadOptions{Kubeconfig: *kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS = -1
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := controllermanager.New(controllermanager.Config{
		Client:         cfg,
		Controllers:    []string{controllermanager.PodLifecycle},
		LeaderElection: controllermanager.LeaderElection{Disabled: true},
		PodLifecycle:   standIn,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stand-in nodes: %v", err)
		}
	})
	return &target{c: c}
}

func (tg *target) run(t *testing.T, s scenario) {
	ctx := t.Context()
	ns := "scenario-" + s.name
	if _, err := client.For[*corev1.Namespace](tg.c, "").Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Pods are admitted once the namespace's default ServiceAccount is
	// there; kube's controller makes it shortly after the namespace.
	waitFor(t, time.Minute, "the default ServiceAccount", func() (bool, error) {
		_, err := client.For[*corev1.ServiceAccount](tg.c, ns).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if s.cleanup != nil {
		t.Cleanup(func() {
			if err := s.cleanup(context.Background(), tg.c); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
	}
	if err := s.create(ctx, tg.c, ns, tg.replay); err != nil {
		t.Fatal(err)
	}
	waitFor(t, doneTimeout, "the end state", func() (bool, error) { return s.done(ctx, tg.c, ns) })
	for i, st := range s.then {
		if err := st.do(ctx, tg.c, ns, tg.replay); err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		waitFor(t, doneTimeout, fmt.Sprintf("the end state of step %d", i+1), func() (bool, error) { return st.until(ctx, tg.c, ns) })
	}
	path := filepath.Join("testdata", s.name+".json")
	if tg.replay == nil {
		got := settled(t, tg.c, ns)
		rec := Golden{Scenario: s.name, RecordedFrom: "kube-apiserver and kube-controller-manager " + KubeVersion, Objects: got}
		b, err := json.MarshalIndent(rec, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %s", path)
		return
	}
	want := readGolden(t, path)
	var diff []string
	deadline := time.Now().Add(replayTimeout)
	var equalSince time.Time
	for {
		got, err := snapshot(ctx, tg.c, ns)
		if err != nil {
			t.Fatal(err)
		}
		diff = golden.Diff(golden.Response{Body: want.Objects}, golden.Response{Body: got})
		switch {
		case len(diff) > 0:
			if !equalSince.IsZero() {
				t.Errorf("the objects equalled kube-controller-manager %s's (%s), then left that state:\n  %s", KubeVersion, path, strings.Join(diff, "\n  "))
				return
			}
		case equalSince.IsZero():
			equalSince = time.Now()
		case time.Since(equalSince) >= stayEqual:
			return
		}
		if equalSince.IsZero() && time.Now().After(deadline) {
			break
		}
		time.Sleep(poll)
	}
	t.Errorf("the objects differ from kube-controller-manager %s's (%s):\n  %s", KubeVersion, path, strings.Join(diff, "\n  "))
}

func readGolden(t *testing.T, path string) Golden {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no golden: %v (record it with hack/record-scenarios.sh)", err)
	}
	var g Golden
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&g); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	objs, _ := g.Objects["endpointslices"].([]any)
	for _, s := range objs {
		if slice, ok := s.(map[string]any); ok {
			if err := sortEndpoints(slice); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
	}
	return g
}

// sortEndpoints orders the endpoints of a masked EndpointSlice by their
// JSON, in a golden as in a snapshot: their order follows the history of
// the slice's updates (an endpoint changed in place keeps its place), so
// two controllers that saw the same changes batched differently, kube's
// and ours or kube's twice, order the same endpoints differently.
func sortEndpoints(slice map[string]any) error {
	eps, _ := slice["endpoints"].([]any)
	return sortByJSON(eps)
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v", what, timeout)
		}
		time.Sleep(poll)
	}
}

// settled returns the masked objects once they have stayed the same for
// settle.
func settled(t *testing.T, c *client.Client, ns string) map[string]any {
	t.Helper()
	var last []byte
	since := time.Now()
	deadline := time.Now().Add(doneTimeout)
	for {
		got, err := snapshot(t.Context(), c, ns)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, last) {
			last, since = b, time.Now()
		} else if time.Since(since) >= settle {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("objects still changing after %v", doneTimeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// generationMask replaces an EndpointSlice's generation.
const generationMask = "<generation>"

// persistentVolumeController is the component of the events of kube's
// PersistentVolume binder, which listwatch does not run: a claim stays
// Pending on both sides, and kube's binder says so again every 15 s.
const persistentVolumeController = "persistentvolume-controller"

var (
	// A node of the stand-in, and the addresses it gives nodes and pods
	// (podlifecycle's hostIP and podIP).
	nodeName = regexp.MustCompile(`\bnode-\d+\b`)
	hostIP   = regexp.MustCompile(`\b10\.0\.\d+\.\d+\b`)
	podIP    = regexp.MustCompile(`\b10\.244\.\d+\.\d+\b`)
	// kube's event names: the object's name, a dot and the time in hex.
	eventSuffix = regexp.MustCompile(`\.[0-9a-f]{16}$`)
	anyTime     = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`)
)

// snapshot lists the CronJobs, Jobs, pods, events, StatefulSets,
// DaemonSets, ControllerRevisions, PersistentVolumeClaims, ResourceQuotas,
// ReplicaSets, Services, Endpoints, EndpointSlices and
// PodDisruptionBudgets of
// namespace ns and masks them (see the package documentation).
func snapshot(ctx context.Context, c *client.Client, ns string) (map[string]any, error) {
	cronJobs, err := list[*batchv1.CronJob](ctx, c, ns)
	if err != nil {
		return nil, err
	}
	jobs, err := list[*batchv1.Job](ctx, c, ns)
	if err != nil {
		return nil, err
	}
	pods, err := list[*corev1.Pod](ctx, c, ns)
	if err != nil {
		return nil, err
	}
	events, err := list[*corev1.Event](ctx, c, ns)
	if err != nil {
		return nil, err
	}
	events = slices.DeleteFunc(events, func(e *corev1.Event) bool { return e.Source.Component == persistentVolumeController })
	sets, err := list[*appsv1.StatefulSet](ctx, c, ns)
	if err != nil {
		return nil, err
	}
	daemonSets, err := list[*appsv1.DaemonSet](ctx, c, ns)
	if err != nil {
		return nil, err
	}
	revisions, err := list[*appsv1.ControllerRevision](ctx, c, ns)
	if err != nil {
		return nil, err
	}
	claims, err := list[*corev1.PersistentVolumeClaim](ctx, c, ns)
	if err != nil {
		return nil, err
	}
	quotas, err := list[*corev1.ResourceQuota](ctx, c, ns)
	if err != nil {
		return nil, err
	}
	replicaSets, err := list[*appsv1.ReplicaSet](ctx, c, ns)
	if err != nil {
		return nil, err
	}
	services, err := list[*corev1.Service](ctx, c, ns)
	if err != nil {
		return nil, err
	}
	//lint:ignore SA1019 core/v1 Endpoints are compared beside their EndpointSlices.
	endpoints, err := list[*corev1.Endpoints](ctx, c, ns)
	if err != nil {
		return nil, err
	}
	endpointSlices, err := list[*discoveryv1.EndpointSlice](ctx, c, ns)
	if err != nil {
		return nil, err
	}
	budgets, err := list[*policyv1.PodDisruptionBudget](ctx, c, ns)
	if err != nil {
		return nil, err
	}
	kinds := []struct {
		name string
		objs []any
	}{{"cronjobs", anys(cronJobs)}, {"jobs", anys(jobs)}, {"pods", anys(pods)}, {"events", anys(events)}}
	// The kinds of the workloads compared since are there only when
	// there are some, as in the goldens recorded before them.
	for _, k := range []struct {
		name string
		objs []any
	}{{"statefulsets", anys(sets)}, {"daemonsets", anys(daemonSets)}, {"controllerrevisions", anys(revisions)}, {"persistentvolumeclaims", anys(claims)}, {"resourcequotas", anys(quotas)},
		{"replicasets", anys(replicaSets)}, {"services", anys(services)}, {"endpoints", anys(endpoints)}, {"endpointslices", anys(endpointSlices)},
		{"poddisruptionbudgets", anys(budgets)}} {
		if len(k.objs) > 0 {
			kinds = append(kinds, k)
		}
	}
	raw := map[string][]string{}
	var all []string
	for _, k := range kinds {
		raw[k.name] = []string{}
		for _, o := range k.objs {
			b, err := json.Marshal(o)
			if err != nil {
				return nil, err
			}
			raw[k.name] = append(raw[k.name], string(b))
			all = append(all, string(b))
		}
	}
	// The names of Jobs a CronJob made end in the minutes of their
	// scheduled time.
	cronNames := map[string]bool{}
	for _, cj := range cronJobs {
		cronNames[cj.Name] = true
	}
	for _, j := range jobs {
		if ref := metav1.GetControllerOfNoCopy(j); ref != nil && ref.Kind == "CronJob" {
			cronNames[ref.Name] = true
		}
	}
	for _, e := range events {
		if e.InvolvedObject.Kind == "CronJob" {
			cronNames[e.InvolvedObject.Name] = true
		}
	}
	minutes := minutesRewriter(cronNames, all)
	var rewrites []string
	// The stand-in scheduler's events name the host it runs on.
	if host, err := os.Hostname(); err == nil && host != "" {
		rewrites = append(rewrites, `"host":"`+host+`"`, `"host":"<host>"`,
			`"reportingInstance":"default-scheduler-`+host+`"`, `"reportingInstance":"default-scheduler-<host>"`)
	}
	// A Service's cluster IPs are allocated at random from the service
	// range.
	for _, svc := range services {
		for _, ip := range svc.Spec.ClusterIPs {
			if ip != "" && ip != corev1.ClusterIPNone {
				rewrites = append(rewrites, `"`+ip+`"`, `"<clusterIP>"`)
			}
		}
	}
	replacer := strings.NewReplacer(rewrites...)
	rewrite := func(s string) string { return replacer.Replace(minutes(s)) }
	// The pods of a Job, a ReplicaSet or a DaemonSet are named from it with kube's
	// five random characters; once a pod is gone, only its owner's name
	// tells that in the events that name it.
	ownerNames := map[string]bool{}
	for _, j := range jobs {
		ownerNames[rewrite(j.Name)] = true
	}
	for _, rs := range replicaSets {
		ownerNames[rewrite(rs.Name)] = true
	}
	for _, ds := range daemonSets {
		ownerNames[ds.Name] = true
	}
	for _, e := range events {
		if e.InvolvedObject.Kind == "Job" || e.InvolvedObject.Kind == "ReplicaSet" || e.InvolvedObject.Kind == "DaemonSet" {
			ownerNames[rewrite(e.InvolvedObject.Name)] = true
		}
	}
	var podNames []*regexp.Regexp
	for n := range ownerNames {
		podNames = append(podNames, regexp.MustCompile(`\b(`+regexp.QuoteMeta(n)+`)-[bcdfghjklmnpqrstvwxz2456789]{5}\b`))
	}
	m := golden.NewMasker(ns)
	decoded := map[string][]map[string]any{}
	add := func(kind string, objs []string) error {
		decoded[kind] = []map[string]any{}
		for _, o := range objs {
			s := rewrite(o)
			for _, re := range podNames {
				s = re.ReplaceAllString(s, "${1}-"+golden.MaskSuffix)
			}
			s = nodeName.ReplaceAllString(s, "<node>")
			s = hostIP.ReplaceAllString(s, "<hostIP>")
			s = podIP.ReplaceAllString(s, "<podIP>")
			dec := json.NewDecoder(strings.NewReader(s))
			dec.UseNumber()
			var v map[string]any
			if err := dec.Decode(&v); err != nil {
				return err
			}
			if kind == "events" {
				if md, ok := v["metadata"].(map[string]any); ok {
					if n, ok := md["name"].(string); ok {
						md["name"] = eventSuffix.ReplaceAllString(n, ".<time>")
					}
				}
			}
			if kind == "endpointslices" {
				// A slice's generation counts the controller's writes
				// of it, one per batch of pod changes it saw.
				if md, ok := v["metadata"].(map[string]any); ok {
					if _, ok := md["generation"]; ok {
						md["generation"] = generationMask
					}
				}
			}
			if !ownedBy(v, "StatefulSet") {
				// A StatefulSet's pods carry a generateName but are
				// named "<set>-<ordinal>": their names are compared.
				m.Learn(v)
			}
			decoded[kind] = append(decoded[kind], v)
		}
		return nil
	}
	for _, k := range kinds {
		if err := add(k.name, raw[k.name]); err != nil {
			return nil, err
		}
	}
	out := map[string]any{}
	for kind, objs := range decoded {
		masked := make([]any, 0, len(objs))
		for _, o := range objs {
			v := maskTimes(m.Mask(o)).(map[string]any)
			if kind == "events" {
				// The name's object part is masked as a name of its
				// own: the masker takes "." for part of a word.
				if md, ok := v["metadata"].(map[string]any); ok {
					if n, ok := md["name"].(string); ok {
						if obj, ok := strings.CutSuffix(n, ".<time>"); ok {
							md["name"] = m.String(obj) + ".<time>"
						}
					}
				}
			}
			if kind == "endpointslices" {
				if err := sortEndpoints(v); err != nil {
					return nil, err
				}
			}
			masked = append(masked, v)
		}
		if err := sortByJSON(masked); err != nil {
			return nil, err
		}
		out[kind] = masked
	}
	return out, nil
}

// ownedBy reports whether obj's controller is of kind.
func ownedBy(obj map[string]any, kind string) bool {
	md, _ := obj["metadata"].(map[string]any)
	refs, _ := md["ownerReferences"].([]any)
	for _, r := range refs {
		ref, _ := r.(map[string]any)
		if ref["controller"] == true && ref["kind"] == kind {
			return true
		}
	}
	return false
}

// minutesRewriter returns what replaces, in a string, the minutes that
// end the names of the Jobs of the CronJobs named: {{minutes}} for the
// earliest minute found in all, {{minutes+N}} for N minutes after it.
func minutesRewriter(cronJobs map[string]bool, all []string) func(string) string {
	var res []*regexp.Regexp
	var bases []int64
	for name := range cronJobs {
		re := regexp.MustCompile(`\b(` + regexp.QuoteMeta(name) + `)-(\d{7,})\b`)
		base := int64(-1)
		for _, s := range all {
			for _, m := range re.FindAllStringSubmatch(s, -1) {
				if n, err := strconv.ParseInt(m[2], 10, 64); err == nil && (base < 0 || n < base) {
					base = n
				}
			}
		}
		if base >= 0 {
			res, bases = append(res, re), append(bases, base)
		}
	}
	return func(s string) string {
		for i, re := range res {
			s = re.ReplaceAllStringFunc(s, func(m string) string {
				sub := re.FindStringSubmatch(m)
				n, _ := strconv.ParseInt(sub[2], 10, 64)
				if k := n - bases[i]; k > 0 {
					return fmt.Sprintf("%s-{{minutes+%d}}", sub[1], k)
				}
				return sub[1] + "-{{minutes}}"
			})
		}
		return s
	}
}

// sortByJSON orders objs by their JSON.
func sortByJSON(objs []any) error {
	keys := make(map[int]string, len(objs))
	for i, o := range objs {
		b, err := json.Marshal(o)
		if err != nil {
			return err
		}
		keys[i] = string(b)
	}
	idx := make([]int, len(objs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return keys[idx[a]] < keys[idx[b]] })
	sorted := make([]any, len(objs))
	for i, j := range idx {
		sorted[i] = objs[j]
	}
	copy(objs, sorted)
	return nil
}

// maskTimes replaces every RFC 3339 time in v with golden.MaskTimestamp.
func maskTimes(v any) any {
	switch v := v.(type) {
	case string:
		if anyTime.MatchString(v) {
			return golden.MaskTimestamp
		}
		return v
	case []any:
		for i := range v {
			v[i] = maskTimes(v[i])
		}
		return v
	case map[string]any:
		for k := range v {
			v[k] = maskTimes(v[k])
		}
		return v
	}
	return v
}

func list[T cache.Object](ctx context.Context, c *client.Client, ns string) ([]T, error) {
	l, err := client.For[T](c, ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func anys[T any](l []T) []any {
	out := make([]any, len(l))
	for i, o := range l {
		out[i] = o
	}
	return out
}

// shiftedClock is the CronJob controller's clock on listwatch: the real
// time plus a shift, so that a scenario need not wait up to a minute for
// a schedule that kube's run waited for in real time.
type shiftedClock struct {
	shift atomic.Int64 // nanoseconds
}

// Now is the shifted time.
func (c *shiftedClock) Now() time.Time { return time.Now().Add(time.Duration(c.shift.Load())) }

// nearNextMinute moves the CronJob controller's clock, on listwatch, to
// a second before the minute after t: kube's recording waited for that
// minute in real time. It does nothing when recording (r is nil).
func (r *replay) nearNextMinute(t time.Time) {
	if r == nil {
		return
	}
	r.cronClock.advanceTo(t.Truncate(time.Minute).Add(time.Minute - time.Second))
}

// advanceTo shifts the clock so that it reads at least t now.
func (c *shiftedClock) advanceTo(t time.Time) {
	if d := time.Until(t); int64(d) > c.shift.Load() {
		c.shift.Store(int64(d))
	}
}
