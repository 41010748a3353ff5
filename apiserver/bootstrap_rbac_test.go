package apiserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"

	"github.com/listwatch/listwatch/internal/runtest"
	"github.com/listwatch/listwatch/storage"
)

// TestPolicyFastPathStoresWhatTheWritePathStores starts a server whose
// store holds one unrelated cluster role, so that its bootstrap policy is
// reconciled through the write path, and then a server on a fresh store,
// which writes the policy straight to its store from the process's
// templates; the two stores must hold the same objects, but for the uid,
// creationTimestamp and managedFields times each create makes anew.
func TestPolicyFastPathStoresWhatTheWritePathStores(t *testing.T) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			// A server on a fresh store, so that the process has the
			// templates whatever ran before.
			startServer(t, b.New(t), Config{})
			if policyTemplates.Load() == nil {
				t.Fatal("a fresh server kept no templates of the policy")
			}

			const unrelated = "listwatch-test-unrelated"
			reconciled := b.New(t)
			role, err := json.Marshal(&rbacv1.ClusterRole{
				TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
				ObjectMeta: metav1.ObjectMeta{Name: unrelated, UID: "00000000-0000-4000-8000-000000000000"},
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := reconciled.Create(ctx, StorageKey(rbacv1.GroupName, "clusterroles", "", unrelated), role); err != nil {
				t.Fatal(err)
			}
			logs := &recordingHandler{}
			startServer(t, reconciled, Config{Logger: slog.New(logs)})
			if logs.has(policyWrittenMsg) {
				t.Fatal("a store with an RBAC object had the policy written from templates")
			}

			written := b.New(t)
			logs = &recordingHandler{}
			startServer(t, written, Config{Logger: slog.New(logs)})
			if !logs.has(policyWrittenMsg) {
				t.Fatal("a fresh store had the policy reconciled, not written from templates")
			}

			want, got := rbacObjects(t, reconciled), rbacObjects(t, written)
			delete(want, StorageKey(rbacv1.GroupName, "clusterroles", "", unrelated))
			if len(got) < 100 {
				t.Fatalf("%d RBAC objects written, want the whole policy", len(got))
			}
			uids := map[any]bool{}
			for key, obj := range got {
				meta := obj["metadata"].(map[string]any)
				if meta["uid"] == nil || meta["creationTimestamp"] == nil || uids[meta["uid"]] {
					t.Errorf("%s: uid %v, creationTimestamp %v: a uid of its own and a time wanted", key, meta["uid"], meta["creationTimestamp"])
				}
				uids[meta["uid"]] = true
				if w, ok := want[key]; ok && w["metadata"].(map[string]any)["uid"] == meta["uid"] {
					t.Errorf("%s: the same uid on both servers", key)
				}
			}
			if diff := cmp.Diff(normalised(want), normalised(got)); diff != "" {
				t.Errorf("stored policy, written (+) against reconciled (-):\n%s", diff)
			}
		})
	}
}

// rbacObjects are the RBAC objects in st, decoded, by key.
func rbacObjects(t *testing.T, st storage.Interface) map[string]map[string]any {
	t.Helper()
	list, err := st.List(context.Background(), "/registry/"+rbacv1.GroupName+"/", storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, kv := range list.Items {
		var obj map[string]any
		if err := json.Unmarshal(kv.Value, &obj); err != nil {
			t.Fatalf("%s: %v", kv.Key, err)
		}
		out[kv.Key] = obj
	}
	return out
}

// normalised is objs without what every create makes anew: uid,
// creationTimestamp, and the time of each managedFields entry.
func normalised(objs map[string]map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for key, obj := range objs {
		b, _ := json.Marshal(obj)
		var c map[string]any
		_ = json.Unmarshal(b, &c)
		meta := c["metadata"].(map[string]any)
		delete(meta, "uid")
		delete(meta, "creationTimestamp")
		if mf, ok := meta["managedFields"].([]any); ok {
			for _, e := range mf {
				delete(e.(map[string]any), "time")
			}
		}
		out[key] = c
	}
	return out
}

// recordingHandler keeps the messages logged through it, at every level.
type recordingHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordingHandler) has(msg string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.msgs {
		if strings.Contains(m, msg) {
			return true
		}
	}
	return false
}

// TestWritePolicyReconcilesWhatExists writes the policy from the
// templates to a server that holds it already, one role trimmed and one
// binding deleted, as when objects appear between the lists and the
// writes: what exists is reconciled (the role completed), what does not
// is written.
func TestWritePolicyReconcilesWhatExists(t *testing.T) {
	srv, c := startServer(t, backends[0].New(t), Config{})
	ctx := t.Context()
	tmpl := policyTemplates.Load()
	if tmpl == nil {
		t.Fatal("a fresh server kept no templates of the policy")
	}
	const role, binding = "system:aggregate-to-view", "system:basic-user"
	r, err := c.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.Rules = r.Rules[:1]
	if _, err := c.RbacV1().ClusterRoles().Update(ctx, r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.RbacV1().ClusterRoleBindings().Delete(ctx, binding, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	p := bootstrapRBAC()
	reconcile, _ := reconcileJobs(c, p, newListedPolicy())
	if err := srv.writePolicy(ctx, c, p, *tmpl, reconcile); err != nil {
		t.Fatal(err)
	}
	r, err = c.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if covers, _ := rbacvalidation.Covers(r.Rules, policyRole(t, role).Rules); !covers {
		t.Errorf("%s not completed: %d rules", role, len(r.Rules))
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Get(ctx, binding, metav1.GetOptions{}); err != nil {
		t.Errorf("deleted binding not written: %v", err)
	}
}

// TestFreshServersAtOnceShareTheTemplates starts fresh servers at the
// same moment in a process without templates: one makes the policy
// through its write path, the others wait for it and write its objects.
func TestFreshServersAtOnceShareTheTemplates(t *testing.T) {
	saved := policyTemplates.Swap(nil)
	t.Cleanup(func() { policyTemplates.CompareAndSwap(nil, saved) })
	const n = 4
	logs := make([]*recordingHandler, n)
	var wg sync.WaitGroup
	for i := range logs {
		logs[i] = &recordingHandler{}
		st := backends[0].New(t)
		wg.Go(func() {
			// startServer's, with no t.Fatal off the test's goroutine.
			srv, err := New(Config{Storage: st, Logger: slog.New(logs[i])})
			if err != nil {
				t.Error(err)
				return
			}
			runtest.Start(t, srv)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			if err := srv.WaitReady(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	written := 0
	for _, l := range logs {
		if l.has(policyWrittenMsg) {
			written++
		}
	}
	if written != n-1 {
		t.Errorf("%d of %d fresh servers wrote the policy from templates, want all but the one that made them", written, n)
	}
}
