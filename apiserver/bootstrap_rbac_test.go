package apiserver

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/apiserver/bootstrap"
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
			if !policyTemplates.Made() {
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
			srv, _ := startServer(t, reconciled, Config{})
			if srv.startup.PolicyWritten() {
				t.Fatal("a store with an RBAC object had the policy written from templates")
			}

			written := b.New(t)
			srv, _ = startServer(t, written, Config{})
			if !srv.startup.PolicyWritten() {
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

// TestFreshServersAtOnceShareTheTemplates starts fresh servers at the
// same moment in a process without templates: one makes the policy
// through its write path, the others wait for it and write its objects.
func TestFreshServersAtOnceShareTheTemplates(t *testing.T) {
	saved := policyTemplates
	policyTemplates = new(bootstrap.Templates)
	t.Cleanup(func() { policyTemplates = saved })
	const n = 4
	srvs := make([]*Server, n)
	var wg sync.WaitGroup
	for i := range srvs {
		st := backends[0].New(t)
		wg.Go(func() {
			// startServer's, with no t.Fatal off the test's goroutine.
			srv, err := New(Config{Storage: st})
			if err != nil {
				t.Error(err)
				return
			}
			srvs[i] = srv
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
	for _, srv := range srvs {
		if srv != nil && srv.startup.PolicyWritten() {
			written++
		}
	}
	if written != n-1 {
		t.Errorf("%d of %d fresh servers wrote the policy from templates, want all but the one that made them", written, n)
	}
}
