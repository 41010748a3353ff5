package client

// Whole-path tests of the typed client's writes (create, update, status
// update, the three patch types, delete with preconditions) against
// listwatch's own API server on 127.0.0.1, on both storage backends, with
// protobuf and with JSON responses: what is stored is what Kubernetes
// would store, refusals arrive as the error Kubernetes gives, and every
// successful write returns the object a Get then reads.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/cache"
)

// forEachWriteServer runs f once per storage backend and response
// encoding, each with a server of its own, given the client of its pods in
// namespace "default". Built-in types must have been read as protobuf to
// the end when protobuf was asked for: no refusal may have turned the
// client to JSON.
func forEachWriteServer(t *testing.T, f func(t *testing.T, pods *Resource[*corev1.Pod])) {
	t.Helper()
	for _, b := range backends {
		for _, enc := range []struct {
			name string
			json bool
		}{{"protobuf", false}, {"json", true}} {
			t.Run(b.Name+"/"+enc.name, func(t *testing.T) {
				api := startRealAPI(t, b.New(t), apiserver.WatchCacheConfig{})
				pods := NewResource[*corev1.Pod](api.client(t, false, enc.json), podsGVR, "default")
				f(t, pods)
				if got := pods.jsonOnly.Load(); got != enc.json {
					t.Errorf("after the writes the client reads JSON only: %v, want %v", got, enc.json)
				}
			})
		}
	}
}

// writePod is a pod with two containers, two labels and a finalizer: the
// material the patches below merge into.
func writePod(name string) *corev1.Pod {
	p := newPod(name)
	p.Labels["tier"] = "front"
	p.Finalizers = []string{"example.com/keep"}
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "sidecar", Image: "busybox:1.36"})
	return p
}

// createPod creates writePod(name) and checks what the server returned.
func createPod(t *testing.T, pods *Resource[*corev1.Pod], name string) *corev1.Pod {
	t.Helper()
	p, err := pods.Create(t.Context(), writePod(name), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.UID == "" || p.ResourceVersion == "" || p.CreationTimestamp.IsZero() || p.Status.Phase != corev1.PodPending {
		t.Fatalf("created pod: uid %q resourceVersion %q created %v phase %q", p.UID, p.ResourceVersion, p.CreationTimestamp, p.Status.Phase)
	}
	stored(t, pods, p)
	return p
}

// stored checks that a Get of got's name reads got: the same
// resourceVersion, and the same object.
func stored(t *testing.T, pods *Resource[*corev1.Pod], got *corev1.Pod) {
	t.Helper()
	read, err := pods.Get(t.Context(), got.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after the write: %v", err)
	}
	if read.ResourceVersion != got.ResourceVersion {
		t.Fatalf("the write returned resourceVersion %s, a get reads %s", got.ResourceVersion, read.ResourceVersion)
	}
	if !apiequality.Semantic.DeepEqual(read, got) {
		t.Fatalf("the write returned\n%s\na get reads\n%s", asJSON(got), asJSON(read))
	}
}

// wantObject checks that got is want but for the resourceVersion, which
// must be new.
func wantObject(t *testing.T, before, got, want *corev1.Pod) {
	t.Helper()
	if got.ResourceVersion == before.ResourceVersion {
		t.Fatalf("the write kept resourceVersion %s", got.ResourceVersion)
	}
	want.ResourceVersion = got.ResourceVersion
	// Every write records its field manager's entry (the server's
	// managedfields, tested in apiserver and the goldens): what the write
	// did to the object is what is compared here.
	want.ManagedFields = got.ManagedFields
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", asJSON(got), asJSON(want))
	}
}

func asJSON(p *corev1.Pod) string {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// apiError is the refusal a write must meet: the apierrors predicate that
// recognizes it, and the code and reason Kubernetes answers with.
type apiError struct {
	is     func(error) bool
	code   int32
	reason metav1.StatusReason
}

var (
	errInvalid       = apiError{apierrors.IsInvalid, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid}
	errBadRequest    = apiError{apierrors.IsBadRequest, http.StatusBadRequest, metav1.StatusReasonBadRequest}
	errConflict      = apiError{apierrors.IsConflict, http.StatusConflict, metav1.StatusReasonConflict}
	errAlreadyExists = apiError{apierrors.IsAlreadyExists, http.StatusConflict, metav1.StatusReasonAlreadyExists}
	errNotFound      = apiError{apierrors.IsNotFound, http.StatusNotFound, metav1.StatusReasonNotFound}
	errUnsupported   = apiError{apierrors.IsUnsupportedMediaType, http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType}
)

func (want apiError) check(t *testing.T, err error) {
	t.Helper()
	var se *StatusError
	if !errors.As(err, &se) {
		t.Fatalf("got %v (%T), want a %d %s StatusError", err, err, want.code, want.reason)
	}
	if !want.is(err) || se.ErrStatus.Code != want.code || apierrors.ReasonForError(err) != want.reason {
		t.Fatalf("got %v, code %d reason %s; want %d %s", err, se.ErrStatus.Code, apierrors.ReasonForError(err), want.code, want.reason)
	}
}

// Each patch type changes the stored object as kube-apiserver does, and
// nothing else: JSON patch operations, merge patch (null removes, lists
// are replaced), strategic merge patch (lists merged by their key, or as
// sets); on the main resource status is kept, on /status only status
// changes; a patch naming the current resourceVersion applies.
func TestAPIServerWritePatch(t *testing.T) {
	tests := []struct {
		name   string
		pt     types.PatchType
		status bool   // patch /status
		prep   string // a merge patch of /status applied first
		patch  string // $RV: the resourceVersion before the patch
		want   func(p *corev1.Pod)
	}{
		{
			name:  "json patch adds a label",
			pt:    types.JSONPatchType,
			patch: `[{"op":"add","path":"/metadata/labels/team","value":"blue"}]`,
			want:  func(p *corev1.Pod) { p.Labels["team"] = "blue" },
		},
		{
			// A change of a pod's spec moves its generation, as kube's
			// pod strategy does.
			name:  "json patch replaces a field",
			pt:    types.JSONPatchType,
			patch: `[{"op":"replace","path":"/spec/containers/1/image","value":"busybox:1.37"}]`,
			want: func(p *corev1.Pod) {
				p.Spec.Containers[1].Image = "busybox:1.37"
				p.Generation++
			},
		},
		{
			name:  "json patch test passes then remove",
			pt:    types.JSONPatchType,
			patch: `[{"op":"test","path":"/metadata/labels/tier","value":"front"},{"op":"remove","path":"/metadata/labels/tier"}]`,
			want:  func(p *corev1.Pod) { delete(p.Labels, "tier") },
		},
		{
			name:  "merge patch sets a label and removes one with null",
			pt:    types.MergePatchType,
			patch: `{"metadata":{"labels":{"tier":null,"team":"blue"}}}`,
			want: func(p *corev1.Pod) {
				delete(p.Labels, "tier")
				p.Labels["team"] = "blue"
			},
		},
		{
			name:  "merge patch replaces a list",
			pt:    types.MergePatchType,
			patch: `{"metadata":{"finalizers":["example.com/other"]}}`,
			want:  func(p *corev1.Pod) { p.Finalizers = []string{"example.com/other"} },
		},
		{
			name:  "merge patch naming the current resourceVersion",
			pt:    types.MergePatchType,
			patch: `{"metadata":{"resourceVersion":"$RV","labels":{"team":"blue"}}}`,
			want:  func(p *corev1.Pod) { p.Labels["team"] = "blue" },
		},
		{
			name:  "strategic merge patch merges containers by name",
			pt:    types.StrategicMergePatchType,
			patch: `{"spec":{"containers":[{"name":"sidecar","image":"busybox:1.37"}]}}`,
			want: func(p *corev1.Pod) {
				p.Spec.Containers[1].Image = "busybox:1.37"
				p.Generation++
			},
		},
		{
			// Without $setElementOrder, new items come before the stored
			// ones (apimachinery's strategic merge, as kube-apiserver's).
			name:  "strategic merge patch adds to a set",
			pt:    types.StrategicMergePatchType,
			patch: `{"metadata":{"finalizers":["example.com/other"]}}`,
			want:  func(p *corev1.Pod) { p.Finalizers = []string{"example.com/other", "example.com/keep"} },
		},
		{
			name:  "strategic merge patch adds to a set in the order given",
			pt:    types.StrategicMergePatchType,
			patch: `{"metadata":{"$setElementOrder/finalizers":["example.com/keep","example.com/other"],"finalizers":["example.com/other"]}}`,
			want:  func(p *corev1.Pod) { p.Finalizers = []string{"example.com/keep", "example.com/other"} },
		},
		{
			name:  "strategic merge patch removes a label with null",
			pt:    types.StrategicMergePatchType,
			patch: `{"metadata":{"labels":{"tier":null}}}`,
			want:  func(p *corev1.Pod) { delete(p.Labels, "tier") },
		},
		{
			name:  "patch of the main resource keeps status",
			pt:    types.MergePatchType,
			patch: `{"metadata":{"labels":{"team":"blue"}},"status":{"phase":"Running"}}`,
			want:  func(p *corev1.Pod) { p.Labels["team"] = "blue" },
		},
		{
			// podIPs follows podIP (kube's conversion of a v1 pod).
			name:   "merge patch of status changes status only",
			pt:     types.MergePatchType,
			status: true,
			patch:  `{"spec":{"activeDeadlineSeconds":30},"status":{"phase":"Running","podIP":"10.0.0.7"}}`,
			want: func(p *corev1.Pod) {
				p.Status.Phase = corev1.PodRunning
				p.Status.PodIP = "10.0.0.7"
				p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.7"}}
			},
		},
		{
			name:   "json patch of status changes status only",
			pt:     types.JSONPatchType,
			status: true,
			patch:  `[{"op":"add","path":"/status/podIP","value":"10.0.0.7"},{"op":"replace","path":"/spec/containers/0/image","value":"nginx:1.28"}]`,
			want: func(p *corev1.Pod) {
				p.Status.PodIP = "10.0.0.7"
				p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.7"}}
			},
		},
		{
			name:   "strategic merge patch of status merges conditions by type",
			pt:     types.StrategicMergePatchType,
			status: true,
			prep:   `{"status":{"conditions":[{"type":"PodScheduled","status":"True"}]}}`,
			patch:  `{"spec":{"containers":[{"name":"c","image":"nginx:1.28"}]},"status":{"conditions":[{"type":"Ready","status":"True"}]}}`,
			want: func(p *corev1.Pod) {
				p.Status.Conditions = append([]corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}, p.Status.Conditions...)
			},
		},
	}
	forEachWriteServer(t, func(t *testing.T, pods *Resource[*corev1.Pod]) {
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				before := createPod(t, pods, fmt.Sprintf("patch-%d", i))
				if tt.prep != "" {
					var err error
					if before, err = pods.Patch(t.Context(), before.Name, types.MergePatchType, []byte(tt.prep), metav1.PatchOptions{}, "status"); err != nil {
						t.Fatal(err)
					}
				}
				var sub []string
				if tt.status {
					sub = []string{"status"}
				}
				patch := strings.ReplaceAll(tt.patch, "$RV", before.ResourceVersion)
				got, err := pods.Patch(t.Context(), before.Name, tt.pt, []byte(patch), metav1.PatchOptions{}, sub...)
				if err != nil {
					t.Fatal(err)
				}
				want := before.DeepCopy()
				tt.want(want)
				wantObject(t, before, got, want)
				stored(t, pods, got)
			})
		}
	})
}

// A patch that cannot apply is refused with the error kube-apiserver
// gives, and the object stays as it was: a failing JSON patch test or an
// operation on a missing path is 422 Invalid; a body that is not a patch
// of its type is 400 BadRequest; a stale resourceVersion in the patch is
// 409 Conflict; a missing object is 404 NotFound, whatever the type; a
// patch type the server does not know is 415, which says nothing about
// protobuf responses.
func TestAPIServerWritePatchRefused(t *testing.T) {
	tests := []struct {
		name    string
		missing bool // patch an object that does not exist
		pt      types.PatchType
		status  bool
		patch   string // $STALE: a resourceVersion the object had before
		want    apiError
	}{
		{name: "json patch test fails", pt: types.JSONPatchType,
			patch: `[{"op":"test","path":"/metadata/labels/app","value":"db"},{"op":"add","path":"/metadata/labels/team","value":"blue"}]`, want: errInvalid},
		{name: "json patch test of status fails", pt: types.JSONPatchType, status: true,
			patch: `[{"op":"test","path":"/status/phase","value":"Running"},{"op":"replace","path":"/status/phase","value":"Failed"}]`, want: errInvalid},
		{name: "json patch removes a missing path", pt: types.JSONPatchType,
			patch: `[{"op":"remove","path":"/metadata/labels/absent"}]`, want: errInvalid},
		{name: "json patch is not a list", pt: types.JSONPatchType,
			patch: `{"op":"add","path":"/metadata/labels/team","value":"blue"}`, want: errBadRequest},
		{name: "json patch malformed", pt: types.JSONPatchType, patch: `[{"op":"add",`, want: errBadRequest},
		{name: "merge patch malformed", pt: types.MergePatchType, patch: `{"metadata":`, want: errBadRequest},
		{name: "strategic merge patch malformed", pt: types.StrategicMergePatchType, patch: `{"metadata":`, want: errBadRequest},
		{name: "strategic merge patch is not an object", pt: types.StrategicMergePatchType, patch: `["a"]`, want: errBadRequest},
		{name: "merge patch naming a stale resourceVersion", pt: types.MergePatchType,
			patch: `{"metadata":{"resourceVersion":"$STALE","labels":{"team":"blue"}}}`, want: errConflict},
		{name: "json patch of a missing object", missing: true, pt: types.JSONPatchType,
			patch: `[{"op":"add","path":"/metadata/labels/team","value":"blue"}]`, want: errNotFound},
		{name: "merge patch of a missing object", missing: true, pt: types.MergePatchType,
			patch: `{"metadata":{"labels":{"team":"blue"}}}`, want: errNotFound},
		{name: "strategic merge patch of a missing object", missing: true, pt: types.StrategicMergePatchType,
			patch: `{"metadata":{"labels":{"team":"blue"}}}`, want: errNotFound},
		{name: "status patch of a missing object", missing: true, pt: types.MergePatchType, status: true,
			patch: `{"status":{"phase":"Running"}}`, want: errNotFound},
		{name: "unknown patch type", pt: "application/yaml", patch: `metadata: {}`, want: errUnsupported},
	}
	forEachWriteServer(t, func(t *testing.T, pods *Resource[*corev1.Pod]) {
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				name := fmt.Sprintf("refused-%d", i)
				var cur *corev1.Pod
				stale := ""
				if !tt.missing {
					created := createPod(t, pods, name)
					stale = created.ResourceVersion
					var err error
					cur, err = pods.Patch(t.Context(), name, types.MergePatchType, []byte(`{"metadata":{"labels":{"gen":"2"}}}`), metav1.PatchOptions{})
					if err != nil {
						t.Fatal(err)
					}
				}
				var sub []string
				if tt.status {
					sub = []string{"status"}
				}
				patch := strings.ReplaceAll(tt.patch, "$STALE", stale)
				got, err := pods.Patch(t.Context(), name, tt.pt, []byte(patch), metav1.PatchOptions{}, sub...)
				if err == nil {
					t.Fatalf("patch applied: %s", asJSON(got))
				}
				tt.want.check(t, err)
				if tt.missing {
					_, err := pods.Get(t.Context(), name, metav1.GetOptions{})
					errNotFound.check(t, err)
					return
				}
				stored(t, pods, cur) // unchanged
			})
		}
	})
}

// Create and update against the stored object: a name taken is 409
// AlreadyExists; a stale resourceVersion is 409 Conflict, on the main
// resource and on /status; an update keeps status and the metadata the
// server owns; an update without a resourceVersion is unconditional for
// pods; an update that changes nothing keeps the resourceVersion; a status
// update changes status only; a missing object is 404 NotFound.
func TestAPIServerWriteCreateUpdate(t *testing.T) {
	tests := []struct {
		name string
		// write is sent given the stored object (a copy) and a
		// resourceVersion it had before.
		write   func(ctx context.Context, pods *Resource[*corev1.Pod], cur *corev1.Pod, stale string) (*corev1.Pod, error)
		want    func(p *corev1.Pod) // the object then stored; nil: unchanged
		same    bool                // the write changes nothing: same resourceVersion
		wantErr *apiError
	}{
		{
			name: "create of an existing name",
			write: func(ctx context.Context, pods *Resource[*corev1.Pod], cur *corev1.Pod, _ string) (*corev1.Pod, error) {
				p := writePod(cur.Name)
				p.Labels["other"] = "yes"
				return pods.Create(ctx, p, metav1.CreateOptions{})
			},
			wantErr: &errAlreadyExists,
		},
		{
			name: "update with a stale resourceVersion",
			write: func(ctx context.Context, pods *Resource[*corev1.Pod], cur *corev1.Pod, stale string) (*corev1.Pod, error) {
				cur.ResourceVersion = stale
				cur.Labels["team"] = "blue"
				return pods.Update(ctx, cur, metav1.UpdateOptions{})
			},
			wantErr: &errConflict,
		},
		{
			name: "update",
			write: func(ctx context.Context, pods *Resource[*corev1.Pod], cur *corev1.Pod, _ string) (*corev1.Pod, error) {
				cur.Labels["team"] = "blue"
				cur.Spec.Containers[1].Image = "busybox:1.37"
				return pods.Update(ctx, cur, metav1.UpdateOptions{})
			},
			want: func(p *corev1.Pod) {
				p.Labels["team"] = "blue"
				p.Spec.Containers[1].Image = "busybox:1.37"
				p.Generation++ // the spec changed
			},
		},
		{
			name: "update keeps status and the server's metadata",
			write: func(ctx context.Context, pods *Resource[*corev1.Pod], cur *corev1.Pod, _ string) (*corev1.Pod, error) {
				cur.Labels["team"] = "blue"
				cur.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7"}
				cur.UID = ""
				cur.CreationTimestamp = metav1.Time{}
				return pods.Update(ctx, cur, metav1.UpdateOptions{})
			},
			want: func(p *corev1.Pod) { p.Labels["team"] = "blue" },
		},
		{
			name: "update without a resourceVersion",
			write: func(ctx context.Context, pods *Resource[*corev1.Pod], cur *corev1.Pod, _ string) (*corev1.Pod, error) {
				cur.ResourceVersion = ""
				cur.Labels["team"] = "blue"
				return pods.Update(ctx, cur, metav1.UpdateOptions{})
			},
			want: func(p *corev1.Pod) { p.Labels["team"] = "blue" },
		},
		{
			name: "update that changes nothing",
			write: func(ctx context.Context, pods *Resource[*corev1.Pod], cur *corev1.Pod, _ string) (*corev1.Pod, error) {
				return pods.Update(ctx, cur, metav1.UpdateOptions{})
			},
			same: true,
		},
		{
			name: "update of a missing object",
			write: func(ctx context.Context, pods *Resource[*corev1.Pod], cur *corev1.Pod, _ string) (*corev1.Pod, error) {
				// Without the uid: one in the body is a precondition,
				// which a missing object fails with a 409 (see below).
				cur.Name, cur.UID = "absent", ""
				return pods.Update(ctx, cur, metav1.UpdateOptions{})
			},
			wantErr: &errNotFound,
		},
		{
			name: "update of a missing object naming a uid",
			write: func(ctx context.Context, pods *Resource[*corev1.Pod], cur *corev1.Pod, _ string) (*corev1.Pod, error) {
				// An update creates no pod, so kube-apiserver answers
				// NotFound before looking at the uid (test/golden:
				// core-pods update-missing-with-uid).
				cur.Name = "absent"
				return pods.Update(ctx, cur, metav1.UpdateOptions{})
			},
			wantErr: &errNotFound,
		},
		{
			name: "update status changes status and metadata, not spec",
			write: func(ctx context.Context, pods *Resource[*corev1.Pod], cur *corev1.Pod, _ string) (*corev1.Pod, error) {
				cur.Status.Phase = corev1.PodRunning
				cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
				cur.Spec.Containers[0].Image = "nginx:1.28"
				cur.Spec.ActiveDeadlineSeconds = ptr(int64(30))
				// The pod status strategy stores metadata from the write
				// (but ownerReferences and deletionTimestamp): the
				// finalizers go.
				cur.Finalizers = nil
				return pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			},
			want: func(p *corev1.Pod) {
				p.Status.Phase = corev1.PodRunning
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
				p.Finalizers = nil
			},
		},
		{
			name: "update status with a stale resourceVersion",
			write: func(ctx context.Context, pods *Resource[*corev1.Pod], cur *corev1.Pod, stale string) (*corev1.Pod, error) {
				cur.ResourceVersion = stale
				cur.Status.Phase = corev1.PodRunning
				return pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			},
			wantErr: &errConflict,
		},
		{
			name: "update status of a missing object",
			write: func(ctx context.Context, pods *Resource[*corev1.Pod], cur *corev1.Pod, _ string) (*corev1.Pod, error) {
				cur.Name, cur.UID = "absent", ""
				cur.Status.Phase = corev1.PodRunning
				return pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			},
			wantErr: &errNotFound,
		},
	}
	forEachWriteServer(t, func(t *testing.T, pods *Resource[*corev1.Pod]) {
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				name := fmt.Sprintf("update-%d", i)
				stale := createPod(t, pods, name).ResourceVersion
				cur, err := pods.Patch(t.Context(), name, types.MergePatchType, []byte(`{"metadata":{"labels":{"gen":"2"}}}`), metav1.PatchOptions{})
				if err != nil {
					t.Fatal(err)
				}
				got, err := tt.write(t.Context(), pods, cur.DeepCopy(), stale)
				switch {
				case tt.wantErr != nil:
					if err == nil {
						t.Fatalf("write accepted: %s", asJSON(got))
					}
					tt.wantErr.check(t, err)
					stored(t, pods, cur) // unchanged
					return
				case err != nil:
					t.Fatal(err)
				case tt.same:
					if !apiequality.Semantic.DeepEqual(got, cur) {
						t.Fatalf("a write that changes nothing returned\n%s\nwant\n%s", asJSON(got), asJSON(cur))
					}
				default:
					want := cur.DeepCopy()
					tt.want(want)
					wantObject(t, cur, got, want)
				}
				stored(t, pods, got)
			})
		}
	})
}

// Delete with preconditions: a wrong UID or resourceVersion is 409
// Conflict and the object stays as it was; the right ones (or none) delete
// it, and a Get is then 404 NotFound, as is the delete of a missing object.
func TestAPIServerWriteDelete(t *testing.T) {
	tests := []struct {
		name    string
		missing bool
		// pre gives the preconditions, given the stored object and a
		// resourceVersion it had before.
		pre     func(cur *corev1.Pod, stale string) *metav1.Preconditions
		wantErr *apiError
	}{
		{
			name: "wrong uid",
			pre: func(*corev1.Pod, string) *metav1.Preconditions {
				return &metav1.Preconditions{UID: ptr(types.UID("00000000-0000-0000-0000-000000000000"))}
			},
			wantErr: &errConflict,
		},
		{
			name: "stale resourceVersion",
			pre: func(cur *corev1.Pod, stale string) *metav1.Preconditions {
				return &metav1.Preconditions{UID: &cur.UID, ResourceVersion: &stale}
			},
			wantErr: &errConflict,
		},
		{
			name: "right uid, wrong resourceVersion",
			pre: func(cur *corev1.Pod, _ string) *metav1.Preconditions {
				return &metav1.Preconditions{UID: &cur.UID, ResourceVersion: ptr(cur.ResourceVersion + "0")}
			},
			wantErr: &errConflict,
		},
		{
			name: "right uid and resourceVersion",
			pre: func(cur *corev1.Pod, _ string) *metav1.Preconditions {
				return &metav1.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion}
			},
		},
		{
			name: "right uid",
			pre:  func(cur *corev1.Pod, _ string) *metav1.Preconditions { return &metav1.Preconditions{UID: &cur.UID} },
		},
		{
			name: "no preconditions",
			pre:  func(*corev1.Pod, string) *metav1.Preconditions { return nil },
		},
		{
			name:    "missing object",
			missing: true,
			pre:     func(*corev1.Pod, string) *metav1.Preconditions { return nil },
			wantErr: &errNotFound,
		},
	}
	forEachWriteServer(t, func(t *testing.T, pods *Resource[*corev1.Pod]) {
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				name := fmt.Sprintf("delete-%d", i)
				cur, stale := &corev1.Pod{}, ""
				if !tt.missing {
					p := newPod(name) // no finalizer: a delete removes it at once
					created, err := pods.Create(t.Context(), p, metav1.CreateOptions{})
					if err != nil {
						t.Fatal(err)
					}
					stale = created.ResourceVersion
					if cur, err = pods.Patch(t.Context(), name, types.MergePatchType, []byte(`{"metadata":{"labels":{"gen":"2"}}}`), metav1.PatchOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				err := pods.Delete(t.Context(), name, metav1.DeleteOptions{Preconditions: tt.pre(cur, stale)})
				if tt.wantErr != nil {
					tt.wantErr.check(t, err)
					if !tt.missing {
						stored(t, pods, cur) // unchanged
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				_, err = pods.Get(t.Context(), name, metav1.GetOptions{})
				errNotFound.check(t, err)
				err = pods.Delete(t.Context(), name, metav1.DeleteOptions{})
				errNotFound.check(t, err)
			})
		}
	})
}

// recordedWrites is a WriteRecorder that keeps what it is told.
type recordedWrites struct {
	mu   sync.Mutex
	objs []cache.Object
}

func (r *recordedWrites) RecordWrite(_ schema.GroupResource, obj cache.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.objs = append(r.objs, obj)
}

// TestAPIServerWriteDeleteRecorded: a delete the server answers with the
// object is recorded as a write: a pod that a finalizer keeps, with its
// deletionTimestamp and the resourceVersion it is stored at; a pod
// deleted at once, with a resourceVersion.
func TestAPIServerWriteDeleteRecorded(t *testing.T) {
	forEachWriteServer(t, func(t *testing.T, pods *Resource[*corev1.Pod]) {
		rec := &recordedWrites{}
		ctx := WithWriteRecorder(t.Context(), rec)
		if _, err := pods.Create(t.Context(), writePod("kept"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := pods.Delete(ctx, "kept", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		stored, err := pods.Get(t.Context(), "kept", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.objs) != 1 || rec.objs[0].GetName() != "kept" || rec.objs[0].GetDeletionTimestamp() == nil || rec.objs[0].GetResourceVersion() != stored.ResourceVersion {
			t.Fatalf("recorded %v, want the pod kept by its finalizer at resourceVersion %s", rec.objs, stored.ResourceVersion)
		}
		if _, err := pods.Patch(t.Context(), "kept", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}

		rec.objs = nil
		if _, err := pods.Create(t.Context(), newPod("gone"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := pods.Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if len(rec.objs) != 1 || rec.objs[0].GetName() != "gone" || rec.objs[0].GetResourceVersion() == "" {
			t.Fatalf("recorded %v, want the pod deleted at once", rec.objs)
		}
	})
}
