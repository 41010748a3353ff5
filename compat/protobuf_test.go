package compat_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestProtobuf drives pods with a clientset that speaks only the
// Kubernetes protobuf encoding (as kube-controller-manager and kubelet
// do): create, get, update, list, watch and delete. The request log shows
// the encoding on the wire both ways, and every object read in protobuf
// equals what the server serves as JSON.
func TestProtobuf(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b, serverOptions{})
			pb := s.clientset(mediaProtobuf)
			truth := s.truthClient()
			ctx := t.Context()
			pods := pb.CoreV1().Pods("default")

			p := pod("proto", map[string]string{"enc": "protobuf"})
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
			p.Spec.NodeName = "n1"
			created, err := pods.Create(ctx, p, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if created.UID == "" || created.ResourceVersion == "" || created.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 250 {
				t.Errorf("created pod lost fields: %+v", created)
			}
			w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion})
			if err != nil {
				t.Fatalf("watch: %v", err)
			}
			defer w.Stop()

			got, err := pods.Get(ctx, "proto", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			asJSON, err := truth.CoreV1().Pods("default").Get(ctx, "proto", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got, asJSON) {
				t.Errorf("protobuf get differs from JSON get:\n%+v\n%+v", got, asJSON)
			}

			got.Labels["step"] = "updated"
			updated, err := pods.Update(ctx, got, metav1.UpdateOptions{})
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			for i := range 3 {
				if _, err := pods.Create(ctx, pod(fmt.Sprintf("more-%d", i), nil), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			list, err := pods.List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			if want := serverVersions(ctx, t, podList(truth.CoreV1().Pods("default"))); versionsOf(ptrs(list.Items)).String() != want.String() {
				t.Errorf("protobuf list %v, JSON list %v", versionsOf(ptrs(list.Items)), want)
			}
			// A pod bound to a node is deleted gracefully (its kubelet
			// confirms); grace period 0 deletes it at once, after writing
			// its deletionTimestamp as every graceful delete does.
			if err := pods.Delete(ctx, "proto", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
				t.Fatalf("delete: %v", err)
			}
			expectEvents(t, w.ResultChan(), append([]wantEvent{
				{watch.Modified, "proto", updated.ResourceVersion},
				{watch.Added, "more-0", ""},
				{watch.Added, "more-1", ""},
				{watch.Added, "more-2", ""},
			}, podDeleted("proto")...))

			// On the wire: protobuf request bodies and responses; the
			// watch as a protobuf stream.
			reqs := s.log.matching(func(r *loggedRequest) bool {
				return r.Agent != truthAgent && strings.HasPrefix(r.Path, "/api/v1/namespaces/default/pods")
			})
			if len(reqs) == 0 {
				t.Fatal("no requests logged")
			}
			for _, r := range reqs {
				want := mediaProtobuf
				if isWatch(&r) {
					want = mediaProtobuf + ";stream=watch"
				}
				if r.Accept != mediaProtobuf || r.ResponseType != want {
					t.Errorf("%s %s?%s: Accept %q, response %q; want %q", r.Method, r.Path, r.Query.Encode(), r.Accept, r.ResponseType, want)
				}
				if (r.Method == "POST" || r.Method == "PUT") && r.ContentType != mediaProtobuf {
					t.Errorf("%s %s: request body %q, want %q", r.Method, r.Path, r.ContentType, mediaProtobuf)
				}
			}
		})
	}
}

func ptrs[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
