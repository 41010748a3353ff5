package v1

import (
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv1 "example.com/guestbook/api/v1"
	webappv2 "example.com/guestbook/api/v2"
)

// TestGuestbookDefaulting creates Guestbooks without an image at either
// version and finds the defaulting webhook's image on them: the API
// server calls the webhook before it validates against the schema,
// which requires one, and calls it at v1 for a request at v2, converting
// the object both ways.
func TestGuestbookDefaulting(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  client.Object
		// image is the created object's image, as the server answered.
		image func(client.Object) string
	}{{
		name:  "created-at-v1",
		obj:   &webappv1.Guestbook{Spec: webappv1.GuestbookSpec{Replicas: 2}},
		image: func(o client.Object) string { return o.(*webappv1.Guestbook).Spec.Image },
	}, {
		name:  "created-at-v2",
		obj:   &webappv2.Guestbook{Spec: webappv2.GuestbookSpec{Size: 2}},
		image: func(o client.Object) string { return o.(*webappv2.Guestbook).Spec.Image },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			tc.obj.SetName("defaulted-" + tc.name)
			tc.obj.SetNamespace("default")
			if err := k8sClient.Create(ctx, tc.obj); err != nil {
				t.Fatal(err)
			}
			if got := tc.image(tc.obj); got != DefaultImage {
				t.Errorf("created without an image: the answer has image %q, want %q", got, DefaultImage)
			}
			var stored webappv1.Guestbook
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(tc.obj), &stored); err != nil {
				t.Fatal(err)
			}
			if want := (webappv1.GuestbookSpec{Image: DefaultImage, Replicas: 2}); stored.Spec != want {
				t.Errorf("read at v1: %+v, want %+v", stored.Spec, want)
			}
		})
	}
}

// TestGuestbookValidation has the validating webhook refuse Guestbooks
// with too many replicas, created or updated at either version, and
// finds its Invalid status as kube-apiserver returns a webhook's
// denial: the webhook's code, and its message after `admission webhook
// "vguestbook-v1.kb.io" denied the request: `.
func TestGuestbookValidation(t *testing.T) {
	ctx := t.Context()
	existing := &webappv1.Guestbook{
		ObjectMeta: metav1.ObjectMeta{Name: "validated-update", Namespace: "default"},
		Spec:       webappv1.GuestbookSpec{Image: "guestbook:v3", Replicas: MaxReplicas},
	}
	if err := k8sClient.Create(ctx, existing); err != nil {
		t.Fatalf("%d replicas, the most allowed: %v", MaxReplicas, err)
	}
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: "default"} }
	for _, tc := range []struct {
		name  string
		write func() error
	}{{
		name: "validated-create-v1",
		write: func() error {
			return k8sClient.Create(ctx, &webappv1.Guestbook{ObjectMeta: meta("validated-create-v1"),
				Spec: webappv1.GuestbookSpec{Image: "guestbook:v3", Replicas: MaxReplicas + 1}})
		},
	}, {
		name: "validated-create-v2",
		write: func() error {
			return k8sClient.Create(ctx, &webappv2.Guestbook{ObjectMeta: meta("validated-create-v2"),
				Spec: webappv2.GuestbookSpec{Image: "guestbook:v3", Size: MaxReplicas + 1}})
		},
	}, {
		name: "validated-update",
		write: func() error {
			update := existing.DeepCopyObject().(*webappv1.Guestbook)
			update.Spec.Replicas = MaxReplicas + 1
			return k8sClient.Update(ctx, update)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.write()
			if !apierrors.IsInvalid(err) {
				t.Fatalf("%d replicas: %v, want 422 Invalid", MaxReplicas+1, err)
			}
			want := fmt.Sprintf(`admission webhook "vguestbook-v1.kb.io" denied the request: Guestbook.webapp.example.com %q is invalid: spec.replicas: Invalid value: %d: must be at most %d`,
				tc.name, MaxReplicas+1, MaxReplicas)
			if err.Error() != want {
				t.Errorf("message\n%s\nwant\n%s", err, want)
			}
		})
	}
	var stored webappv1.Guestbook
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(existing), &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Spec.Replicas != MaxReplicas {
		t.Errorf("after the refused update: %d replicas, want %d", stored.Spec.Replicas, MaxReplicas)
	}
}
