package namespace

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// t0 is the clock of the table tests.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newTestController is a controller over api whose informer is not run:
// the table tests call its decisions directly.
func newTestController(t *testing.T, api *fakeAPI, opts Options) *Controller {
	t.Helper()
	if opts.Controller.Logger == nil {
		opts.Controller.Logger = quiet
	}
	inf := cache.NewSharedIndexInformer[*corev1.Namespace](api.namespaces, cache.SharedInformerOptions{
		Reflector: cache.ReflectorOptions{Logger: quiet},
	})
	c, err := New(inf, api, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Queue().ShutDown)
	c.now = api.now
	return c
}

// condition is a status condition as the tests state it.
type condition struct {
	status  corev1.ConditionStatus
	reason  string
	message string
}

// allOK are the conditions of a pass that found nothing wrong.
func allOK() map[corev1.NamespaceConditionType]condition {
	out := map[corev1.NamespaceConditionType]condition{}
	for t, ok := range okConditions {
		out[t] = condition{corev1.ConditionFalse, ok.reason, ok.message}
	}
	return out
}

// okBut is allOK with some conditions replaced.
func okBut(failing map[corev1.NamespaceConditionType]condition) map[corev1.NamespaceConditionType]condition {
	out := allOK()
	for t, c := range failing {
		out[t] = c
	}
	return out
}

func TestDeleteNamespace(t *testing.T) {
	const name = "scratch"
	kube := corev1.FinalizerKubernetes
	tenAgo, minuteAgo := t0.Add(-10*time.Second), t0.Add(-time.Minute)
	// content puts one object of each served namespaced resource in the
	// namespace, and others elsewhere that must stay.
	content := func(a *fakeAPI) {
		a.add(podsGVR, &fakeObj{meta: meta(name, "p"), grace: ptr[int64](30)})
		a.add(configmapsGVR, &fakeObj{meta: meta(name, "cm")})
		a.add(secretsGVR, &fakeObj{meta: meta(name, "s")})
		a.add(widgetsGVR, &fakeObj{meta: meta(name, "w")})
		a.add(configmapsGVR, &fakeObj{meta: meta("other", "cm")})
		a.add(nodesGVR, &fakeObj{meta: meta("", "n1")})
	}
	tests := []struct {
		name  string
		ns    *corev1.Namespace // nil: there is none
		setup func(a *fakeAPI)

		wantEstimate int64
		wantErr      string
		// wantLeft lists what remains of each resource; resources not
		// named must be empty, except "other" and cluster-scoped objects,
		// which must stay.
		wantLeft     map[schema.GroupVersionResource][]string
		wantFinalize []string // the finalize calls
		wantGone     bool     // the namespace is gone
		wantConds    map[corev1.NamespaceConditionType]condition
		wantStatus   []string // the status writes, when checked
	}{
		{
			name:     "not being deleted",
			ns:       &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "u"}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{kube}}},
			setup:    content,
			wantLeft: map[schema.GroupVersionResource][]string{podsGVR: {"scratch/p"}, configmapsGVR: {"other/cm", "scratch/cm"}, secretsGVR: {"scratch/s"}, widgetsGVR: {"scratch/w"}},
		},
		{
			name: "gone already",
		},
		{
			name:     "finalized already",
			ns:       deletingNamespace(name, tenAgo, corev1.NamespaceTerminating),
			setup:    content,
			wantLeft: map[schema.GroupVersionResource][]string{podsGVR: {"scratch/p"}, configmapsGVR: {"other/cm", "scratch/cm"}, secretsGVR: {"scratch/s"}, widgetsGVR: {"scratch/w"}},
		},
		{
			name:         "empty",
			ns:           deletingNamespace(name, tenAgo, corev1.NamespaceTerminating, kube),
			wantFinalize: []string{"finalize []"},
			wantGone:     true,
			wantConds:    allOK(),
			wantStatus:   []string{"status Terminating 5 conditions"},
		},
		{
			name:         "content of every namespaced resource deleted, custom resources too",
			ns:           deletingNamespace(name, tenAgo, corev1.NamespaceTerminating, kube),
			setup:        content,
			wantLeft:     map[schema.GroupVersionResource][]string{configmapsGVR: {"other/cm"}},
			wantFinalize: []string{"finalize []"},
			wantGone:     true,
			wantConds:    allOK(),
		},
		{
			name:         "phase set to Terminating",
			ns:           deletingNamespace(name, tenAgo, corev1.NamespaceActive, kube),
			wantFinalize: []string{"finalize []"},
			wantGone:     true,
			wantStatus:   []string{"status Terminating 0 conditions", "status Terminating 5 conditions"},
		},
		{
			name:         "other finalizers kept, sorted and once",
			ns:           deletingNamespace(name, tenAgo, corev1.NamespaceTerminating, "b.example/x", kube, "a.example/y", "a.example/y"),
			wantFinalize: []string{"finalize [a.example/y b.example/x]"},
			wantConds:    allOK(),
		},
		{
			name: "pods in their grace period first: the rest waits",
			ns:   deletingNamespace(name, tenAgo, corev1.NamespaceTerminating, kube),
			setup: func(a *fakeAPI) {
				a.add(podsGVR, &fakeObj{meta: meta(name, "running"), nodeName: "n1", grace: ptr[int64](20), phase: corev1.PodRunning})
				// A terminal pod's grace period does not count.
				a.add(podsGVR, &fakeObj{meta: meta(name, "done"), nodeName: "n1", grace: ptr[int64](60), phase: corev1.PodSucceeded})
				a.add(configmapsGVR, &fakeObj{meta: meta(name, "cm")})
			},
			wantEstimate: 20,
			wantLeft:     map[schema.GroupVersionResource][]string{podsGVR: {"scratch/done", "scratch/running"}, configmapsGVR: {"scratch/cm"}},
			// kube reports no remaining content while it waits for pods.
			wantConds: allOK(),
		},
		{
			name: "pods past their grace period are an error",
			ns:   deletingNamespace(name, minuteAgo, corev1.NamespaceTerminating, kube),
			setup: func(a *fakeAPI) {
				a.add(podsGVR, &fakeObj{meta: meta(name, "running"), nodeName: "n1", grace: ptr[int64](30), phase: corev1.PodRunning})
				a.add(configmapsGVR, &fakeObj{meta: meta(name, "cm")})
			},
			wantErr:  "failed to delete pods for namespace: scratch, err: unexpected items still remain in namespace: scratch for gvr: /v1, Resource=pods",
			wantLeft: map[schema.GroupVersionResource][]string{podsGVR: {"scratch/running"}, configmapsGVR: {"scratch/cm"}},
			wantConds: okBut(map[corev1.NamespaceConditionType]condition{corev1.NamespaceDeletionContentFailure: {corev1.ConditionTrue, "ContentDeletionFailed",
				"Failed to delete all resource types, 1 remaining: failed to delete pods for namespace: scratch, err: unexpected items still remain in namespace: scratch for gvr: /v1, Resource=pods"}}),
		},
		{
			name: "content held by finalizers",
			ns:   deletingNamespace(name, tenAgo, corev1.NamespaceTerminating, kube),
			setup: func(a *fakeAPI) {
				a.add(configmapsGVR, &fakeObj{meta: meta(name, "held", "example.com/hold")})
				a.add(configmapsGVR, &fakeObj{meta: meta(name, "free")})
				a.add(secretsGVR, &fakeObj{meta: meta(name, "held", "example.com/hold", "other.io/x")})
			},
			wantEstimate: finalizerEstimate,
			wantLeft:     map[schema.GroupVersionResource][]string{configmapsGVR: {"scratch/held"}, secretsGVR: {"scratch/held"}},
			wantConds: okBut(map[corev1.NamespaceConditionType]condition{
				corev1.NamespaceContentRemaining: {corev1.ConditionTrue, "SomeResourcesRemain",
					"Some resources are remaining: configmaps. has 1 resource instances, secrets. has 1 resource instances"},
				corev1.NamespaceFinalizersRemaining: {corev1.ConditionTrue, "SomeFinalizersRemain",
					"Some content in the namespace has finalizers remaining: example.com/hold in 2 resource instances, other.io/x in 1 resource instances"},
			}),
		},
		{
			name: "resources that cannot be listed are skipped",
			ns:   deletingNamespace(name, tenAgo, corev1.NamespaceTerminating, kube),
			setup: func(a *fakeAPI) {
				content(a)
				a.listErr[widgetsGVR] = apierrors.NewMethodNotSupported(widgetsGVR.GroupResource(), "list")
				a.listErr[secretsGVR] = apierrors.NewNotFound(secretsGVR.GroupResource(), "")
				// Discovery says configmaps cannot be listed.
				a.served[slices.IndexFunc(a.served, func(r client.APIResource) bool { return r.GVR == configmapsGVR })].Verbs = []string{"delete", "get"}
			},
			wantLeft:     map[schema.GroupVersionResource][]string{configmapsGVR: {"other/cm", "scratch/cm"}, secretsGVR: {"scratch/s"}, widgetsGVR: {"scratch/w"}},
			wantFinalize: []string{"finalize []"},
			wantGone:     true,
		},
		{
			name: "a failed delete keeps the finalizer; the other resources are emptied",
			ns:   deletingNamespace(name, tenAgo, corev1.NamespaceTerminating, kube),
			setup: func(a *fakeAPI) {
				content(a)
				a.deleteErr[configmapsGVR] = apierrors.NewInternalError(errors.New("boom"))
			},
			wantErr:  "Internal error occurred: boom",
			wantLeft: map[schema.GroupVersionResource][]string{configmapsGVR: {"other/cm", "scratch/cm"}},
			wantConds: okBut(map[corev1.NamespaceConditionType]condition{corev1.NamespaceDeletionContentFailure: {corev1.ConditionTrue, "ContentDeletionFailed",
				"Failed to delete all resource types, 1 remaining: Internal error occurred: boom"}}),
		},
		{
			name: "discovery failure",
			ns:   deletingNamespace(name, tenAgo, corev1.NamespaceTerminating, kube),
			setup: func(a *fakeAPI) {
				content(a)
				a.discoveryErr = errors.New("GET /apis: connection refused")
			},
			wantErr:  "connection refused",
			wantLeft: map[schema.GroupVersionResource][]string{podsGVR: {"scratch/p"}, configmapsGVR: {"other/cm", "scratch/cm"}, secretsGVR: {"scratch/s"}, widgetsGVR: {"scratch/w"}},
			wantConds: okBut(map[corev1.NamespaceConditionType]condition{corev1.NamespaceDeletionDiscoveryFailure: {corev1.ConditionTrue, "DiscoveryFailed",
				"GET /apis: connection refused"}}),
		},
		{
			name: "a group version that does not parse",
			ns:   deletingNamespace(name, tenAgo, corev1.NamespaceTerminating, kube),
			setup: func(a *fakeAPI) {
				content(a)
				a.served = append(a.served, client.APIResource{GVR: schema.GroupVersionResource{Group: "bad/group", Version: "v1", Resource: "things"},
					Namespaced: true, Verbs: allVerbs})
			},
			wantErr:  "unexpected GroupVersion string: bad/group/v1",
			wantLeft: map[schema.GroupVersionResource][]string{podsGVR: {"scratch/p"}, configmapsGVR: {"other/cm", "scratch/cm"}, secretsGVR: {"scratch/s"}, widgetsGVR: {"scratch/w"}},
			wantConds: okBut(map[corev1.NamespaceConditionType]condition{corev1.NamespaceDeletionGVParsingFailure: {corev1.ConditionTrue, "GroupVersionParsingFailed",
				"unexpected GroupVersion string: bad/group/v1"}}),
		},
		{
			name:         "finalize retried on conflict",
			ns:           deletingNamespace(name, tenAgo, corev1.NamespaceTerminating, kube),
			setup:        func(a *fakeAPI) { a.finalizeConflicts = 1 },
			wantFinalize: []string{"finalize []", "finalize []"},
			wantGone:     true,
		},
		{
			name: "namespace replaced while retrying",
			ns:   deletingNamespace(name, tenAgo, corev1.NamespaceTerminating, kube),
			setup: func(a *fakeAPI) {
				a.finalizeConflicts = 1
				a.replaceOnConflict = true
			},
			wantErr:      "namespace uid has changed across retries",
			wantFinalize: []string{"finalize []"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newFakeAPI(func() time.Time { return t0 })
			if tt.ns != nil {
				if _, err := api.namespaces.Create(tt.ns); err != nil {
					t.Fatal(err)
				}
			}
			if tt.setup != nil {
				tt.setup(api)
			}
			nodesBefore := api.left(nodesGVR)
			c := newTestController(t, api, Options{})
			estimate, err := c.deleteNamespace(t.Context(), name)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if estimate != tt.wantEstimate {
				t.Errorf("estimate %d, want %d", estimate, tt.wantEstimate)
			}
			for _, gvr := range []schema.GroupVersionResource{podsGVR, configmapsGVR, secretsGVR, widgetsGVR} {
				if got, want := api.left(gvr), tt.wantLeft[gvr]; !slices.Equal(got, want) {
					t.Errorf("%s left: %v, want %v", gvr.Resource, got, want)
				}
			}
			if got := api.left(nodesGVR); !slices.Equal(got, nodesBefore) {
				t.Errorf("cluster-scoped nodes left %v, want %v", got, nodesBefore)
			}
			var finalize, status []string
			for _, w := range api.writes() {
				switch {
				case strings.HasPrefix(w, "finalize"):
					finalize = append(finalize, w)
				case strings.HasPrefix(w, "status"):
					status = append(status, w)
				}
			}
			if !slices.Equal(finalize, tt.wantFinalize) {
				t.Errorf("finalize calls %q, want %q", finalize, tt.wantFinalize)
			}
			if tt.wantStatus != nil && !slices.Equal(status, tt.wantStatus) {
				t.Errorf("status writes %q, want %q", status, tt.wantStatus)
			}
			_, exists := api.namespaces.Get("", name)
			if tt.ns != nil && exists == tt.wantGone {
				t.Errorf("namespace exists: %v, want %v", exists, !tt.wantGone)
			}
			if tt.wantConds != nil {
				st := api.status()
				if st == nil {
					t.Fatal("no status written")
				}
				checkConditions(t, st.Conditions, tt.wantConds)
			} else if tt.ns == nil || tt.ns.DeletionTimestamp == nil || len(tt.ns.Spec.Finalizers) == 0 {
				if len(status) > 0 {
					t.Errorf("status written for a namespace the controller must leave alone: %q", status)
				}
			}
		})
	}
}

func checkConditions(t *testing.T, got []corev1.NamespaceCondition, want map[corev1.NamespaceConditionType]condition) {
	t.Helper()
	var types []corev1.NamespaceConditionType
	for _, c := range got {
		types = append(types, c.Type)
		w, ok := want[c.Type]
		if !ok {
			t.Errorf("unexpected condition %s", c.Type)
			continue
		}
		if c.Status != w.status || c.Reason != w.reason || c.Message != w.message {
			t.Errorf("condition %s: %s %s %q, want %s %s %q", c.Type, c.Status, c.Reason, c.Message, w.status, w.reason, w.message)
		}
		if c.LastTransitionTime.IsZero() {
			t.Errorf("condition %s has no lastTransitionTime", c.Type)
		}
	}
	if !slices.Equal(types, conditionTypes) {
		t.Errorf("conditions %v, want %v in that order", types, conditionTypes)
	}
}

// TestConditionsWrittenOnChange: the status is written when the
// conditions change, not on every pass, and a condition's
// lastTransitionTime moves only with its status.
func TestConditionsWrittenOnChange(t *testing.T) {
	now := t0
	api := newFakeAPI(func() time.Time { return now })
	if _, err := api.namespaces.Create(deletingNamespace("scratch", t0.Add(-time.Second), corev1.NamespaceTerminating, corev1.FinalizerKubernetes)); err != nil {
		t.Fatal(err)
	}
	api.add(configmapsGVR, &fakeObj{meta: meta("scratch", "held", "example.com/hold")})
	c := newTestController(t, api, Options{})
	statusWrites := func() int {
		n := 0
		for _, w := range api.writes() {
			if strings.HasPrefix(w, "status") {
				n++
			}
		}
		return n
	}
	pass := func() int64 {
		t.Helper()
		estimate, err := c.deleteNamespace(t.Context(), "scratch")
		if err != nil {
			t.Fatal(err)
		}
		return estimate
	}
	if e := pass(); e != finalizerEstimate || statusWrites() != 1 {
		t.Fatalf("first pass: estimate %d, %d status writes; want %d, 1", e, statusWrites(), finalizerEstimate)
	}
	first := api.status()
	now = now.Add(time.Minute)
	if e := pass(); e != finalizerEstimate || statusWrites() != 1 {
		t.Fatalf("unchanged pass: estimate %d, %d status writes; want %d, 1", e, statusWrites(), finalizerEstimate)
	}
	api.release(configmapsGVR, "scratch/held")
	now = now.Add(time.Minute)
	if e := pass(); e != 0 || statusWrites() != 2 {
		t.Fatalf("last pass: estimate %d, %d status writes; want 0, 2", e, statusWrites())
	}
	last := api.status()
	checkConditions(t, last.Conditions, allOK())
	for i, c := range last.Conditions {
		moved := !c.LastTransitionTime.Equal(&first.Conditions[i].LastTransitionTime)
		flipped := c.Status != first.Conditions[i].Status
		if moved != flipped {
			t.Errorf("condition %s: status %s→%s, lastTransitionTime %v→%v", c.Type, first.Conditions[i].Status, c.Status,
				first.Conditions[i].LastTransitionTime, c.LastTransitionTime)
		}
	}
	if _, exists := api.namespaces.Get("", "scratch"); exists {
		t.Error("namespace not removed once empty")
	}
}

func TestConditionsApply(t *testing.T) {
	later := t0.Add(time.Hour)
	okStatus := func() corev1.NamespaceStatus {
		var st corev1.NamespaceStatus
		newConditions(t0).apply(&st)
		return st
	}
	tests := []struct {
		name        string
		status      corev1.NamespaceStatus
		record      func(c *conditions)
		wantChanged bool
		// wantMoved lists the conditions whose lastTransitionTime moves.
		wantMoved []corev1.NamespaceConditionType
		want      map[corev1.NamespaceConditionType]condition
	}{
		{name: "all added to an empty status", wantChanged: true, wantMoved: conditionTypes, want: allOK()},
		{name: "nothing changes", status: okStatus(), want: allOK()},
		{
			name: "a failure flips its condition", status: okStatus(),
			record:      func(c *conditions) { c.deleteFailed(errors.New("b")); c.deleteFailed(errors.New("a")) },
			wantChanged: true, wantMoved: []corev1.NamespaceConditionType{corev1.NamespaceDeletionContentFailure},
			want: okBut(map[corev1.NamespaceConditionType]condition{corev1.NamespaceDeletionContentFailure: {corev1.ConditionTrue, "ContentDeletionFailed",
				"Failed to delete all resource types, 2 remaining: a, b"}}),
		},
		{
			name: "a new message with the same status keeps the time",
			status: func() corev1.NamespaceStatus {
				var st corev1.NamespaceStatus
				c := newConditions(t0)
				c.discoveryFailed(errors.New("first"))
				c.apply(&st)
				return st
			}(),
			record:      func(c *conditions) { c.discoveryFailed(errors.New("second")) },
			wantChanged: true,
			want:        okBut(map[corev1.NamespaceConditionType]condition{corev1.NamespaceDeletionDiscoveryFailure: {corev1.ConditionTrue, "DiscoveryFailed", "second"}}),
		},
		{
			name: "content totals, zero counts left out", status: okStatus(),
			record: func(c *conditions) {
				c.contentTotals(map[schema.GroupVersionResource]int{widgetsGVR: 2, podsGVR: 1, secretsGVR: 0}, map[string]int{"x/y": 3, "z": 0})
			},
			wantChanged: true, wantMoved: []corev1.NamespaceConditionType{corev1.NamespaceContentRemaining, corev1.NamespaceFinalizersRemaining},
			want: okBut(map[corev1.NamespaceConditionType]condition{
				corev1.NamespaceContentRemaining: {corev1.ConditionTrue, "SomeResourcesRemain",
					"Some resources are remaining: pods. has 1 resource instances, widgets.example.dev has 2 resource instances"},
				corev1.NamespaceFinalizersRemaining: {corev1.ConditionTrue, "SomeFinalizersRemain",
					"Some content in the namespace has finalizers remaining: x/y in 3 resource instances"},
			}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := *tt.status.DeepCopy()
			c := newConditions(later)
			if tt.record != nil {
				tt.record(c)
			}
			if changed := c.apply(&st); changed != tt.wantChanged {
				t.Errorf("changed %v, want %v", changed, tt.wantChanged)
			}
			checkConditions(t, st.Conditions, tt.want)
			for _, cond := range st.Conditions {
				moved := cond.LastTransitionTime.Time.Equal(later)
				if want := slices.Contains(tt.wantMoved, cond.Type); moved != want {
					t.Errorf("condition %s: lastTransitionTime moved %v, want %v", cond.Type, moved, want)
				}
			}
		})
	}
}

func TestRequeueAfter(t *testing.T) {
	for _, tt := range []struct {
		estimate int64
		want     time.Duration
	}{
		{1, time.Second},
		{2, 2 * time.Second},
		{finalizerEstimate, 8 * time.Second},
		{30, 16 * time.Second},
	} {
		if got := requeueAfter(tt.estimate); got != tt.want {
			t.Errorf("requeueAfter(%d) = %v, want %v", tt.estimate, got, tt.want)
		}
	}
}

func TestDeletableResources(t *testing.T) {
	got, err := deletableResources(defaultServed)
	if err != nil {
		t.Fatal(err)
	}
	want := map[schema.GroupVersionResource]bool{podsGVR: true, configmapsGVR: true, secretsGVR: true, widgetsGVR: true}
	if len(got) != len(want) {
		t.Errorf("deletable %v, want %v", got, want)
	}
	for gvr, listable := range want {
		if l, ok := got[gvr]; !ok || l != listable {
			t.Errorf("%s: deletable %v listable %v, want listable %v", gvr, ok, l, listable)
		}
	}
}

func TestEnqueue(t *testing.T) {
	deleting := deletingNamespace("gone", t0, corev1.NamespaceTerminating, corev1.FinalizerKubernetes)
	active := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "live"}}
	tests := []struct {
		name                 string
		grace                time.Duration
		ns                   *corev1.Namespace
		wantQueued, wantWait int
	}{
		{"active namespaces are not queued", 0, active, 0, 0},
		{"deleted ones wait for the grace period", 0, deleting, 0, 1},
		{"or are queued at once without one", -1, deleting, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestController(t, newFakeAPI(time.Now), Options{DeletionGracePeriod: tt.grace})
			c.enqueue(tt.ns)
			if got := c.Queue().Len(); got != tt.wantQueued {
				t.Errorf("queued %d, want %d", got, tt.wantQueued)
			}
			if got := c.Queue().Waiting(); got != tt.wantWait {
				t.Errorf("waiting %d, want %d", got, tt.wantWait)
			}
		})
	}
}

func TestRemainingFinalizers(t *testing.T) {
	kube := corev1.FinalizerKubernetes
	tests := []struct {
		in, want []corev1.FinalizerName
	}{
		{[]corev1.FinalizerName{kube}, []corev1.FinalizerName{}},
		{[]corev1.FinalizerName{"z", kube, "a", "z"}, []corev1.FinalizerName{"a", "z"}},
		{nil, []corev1.FinalizerName{}},
	}
	for _, tt := range tests {
		got := remainingFinalizers(tt.in, kube)
		if got == nil || !slices.Equal(got, tt.want) {
			t.Errorf("remainingFinalizers(%v) = %#v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestRun runs the controller on its informer in a bubble of fake time: a
// namespace is handled after the grace period, content held by a finalizer
// makes it wait kube's estimate, and once the content is gone the
// namespace is finalized away.
func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newFakeAPI(time.Now)
		inf := cache.NewSharedIndexInformer[*corev1.Namespace](api.namespaces, cache.SharedInformerOptions{
			Reflector: cache.ReflectorOptions{Logger: quiet},
		})
		c, err := New(inf, api, Options{Controller: controller.Options{Logger: quiet}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() { inf.Run(ctx) })
		wg.Go(func() { _ = c.Run(ctx) })
		defer func() { cancel(); wg.Wait() }()

		api.add(configmapsGVR, &fakeObj{meta: meta("scratch", "held", "example.com/hold")})
		api.add(secretsGVR, &fakeObj{meta: meta("scratch", "s")})
		if _, err := api.namespaces.Create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "live"}}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := api.namespaces.Create(deletingNamespace("scratch", start, corev1.NamespaceTerminating, corev1.FinalizerKubernetes)); err != nil {
			t.Fatal(err)
		}
		at := func(d time.Duration) {
			time.Sleep(time.Until(start.Add(d)))
			synctest.Wait()
		}
		at(DefaultDeletionGracePeriod - time.Millisecond)
		if len(api.writes()) != 0 {
			t.Fatalf("acted before the grace period: %q", api.writes())
		}
		at(DefaultDeletionGracePeriod + time.Millisecond)
		if left := api.left(secretsGVR); len(left) != 0 {
			t.Fatalf("secrets left after the first pass: %v", left)
		}
		if st := api.status(); st == nil || find(st.Conditions, corev1.NamespaceContentRemaining).Status != corev1.ConditionTrue {
			t.Fatalf("no ContentRemaining condition: %+v", st)
		}
		// The status write is an update of the namespace, handled after
		// the grace period again: a second pass at 10s, which finds the
		// held content, writes nothing new, and asks for a look after
		// half the finalizers' estimate.
		at(2*DefaultDeletionGracePeriod + time.Millisecond)
		if want := []string{"delete configmaps scratch/held", "delete secrets scratch/s", "status Terminating 5 conditions",
			"delete configmaps scratch/held"}; !slices.Equal(api.writes(), want) {
			t.Fatalf("writes after the second pass %q, want %q", api.writes(), want)
		}
		api.release(configmapsGVR, "scratch/held")
		third := 2*DefaultDeletionGracePeriod + requeueAfter(finalizerEstimate)
		at(third - time.Millisecond)
		if _, ok := api.namespaces.Get("", "scratch"); !ok {
			t.Fatal("namespace finalized before its requeue")
		}
		at(third + time.Millisecond)
		if _, ok := api.namespaces.Get("", "scratch"); ok {
			t.Fatalf("namespace not finalized after its requeue; writes %q", api.writes())
		}
		if _, ok := api.namespaces.Get("", "live"); !ok {
			t.Fatal("an active namespace was touched")
		}
	})
}
