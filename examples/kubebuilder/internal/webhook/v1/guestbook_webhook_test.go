package v1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv1 "example.com/guestbook/api/v1"
	webappv2 "example.com/guestbook/api/v2"
)

// TestGuestbookConversion writes Guestbooks at one version and reads them
// at the other, through the conversion webhook.
func TestGuestbookConversion(t *testing.T) {
	ctx := t.Context()
	atV1 := &webappv1.Guestbook{
		ObjectMeta: metav1.ObjectMeta{Name: "made-at-v1", Namespace: "default"},
		Spec:       webappv1.GuestbookSpec{Image: "guestbook:v3", Replicas: 2},
	}
	if err := k8sClient.Create(ctx, atV1); err != nil {
		t.Fatal(err)
	}
	atV2 := &webappv2.Guestbook{
		ObjectMeta: metav1.ObjectMeta{Name: "made-at-v2", Namespace: "default"},
		Spec:       webappv2.GuestbookSpec{Image: "guestbook:v4", Size: 3},
	}
	if err := k8sClient.Create(ctx, atV2); err != nil {
		t.Fatal(err)
	}
	if atV2.Spec.Size != 3 {
		t.Errorf("created at v2: size %d, want 3", atV2.Spec.Size)
	}

	var v2 webappv2.Guestbook
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(atV1), &v2); err != nil {
		t.Fatal(err)
	}
	if v2.Spec != (webappv2.GuestbookSpec{Image: "guestbook:v3", Size: 2}) {
		t.Errorf("made at v1, read at v2: %+v", v2.Spec)
	}
	var v1 webappv1.Guestbook
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(atV2), &v1); err != nil {
		t.Fatal(err)
	}
	if v1.Spec != (webappv1.GuestbookSpec{Image: "guestbook:v4", Replicas: 3}) {
		t.Errorf("made at v2, read at v1: %+v", v1.Spec)
	}

	// An update at v2 is stored at v1.
	v2.Spec.Size = 5
	if err := k8sClient.Update(ctx, &v2); err != nil {
		t.Fatal(err)
	}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(atV1), &v1); err != nil {
		t.Fatal(err)
	}
	if v1.Spec.Replicas != 5 {
		t.Errorf("updated at v2 to size 5, read at v1: replicas %d", v1.Spec.Replicas)
	}

	var list webappv2.GuestbookList
	if err := k8sClient.List(ctx, &list, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int32{}
	for _, g := range list.Items {
		sizes[g.Name] = g.Spec.Size
	}
	if sizes["made-at-v1"] != 5 || sizes["made-at-v2"] != 3 {
		t.Errorf("listed at v2: sizes %v", sizes)
	}
}
