package controller

import (
	"errors"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv1 "example.com/guestbook/api/v1"
)

func TestGuestbook(t *testing.T) {
	ctx := t.Context()
	gb := &webappv1.Guestbook{
		ObjectMeta: metav1.ObjectMeta{Name: "guestbook", Namespace: "default"},
		Spec:       webappv1.GuestbookSpec{Image: "guestbook:v3", Replicas: 2},
	}
	if err := k8sClient.Create(ctx, gb); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(gb)

	eventually(t, "the Deployment exists, controlled by the Guestbook", func() error {
		var d appsv1.Deployment
		if err := k8sClient.Get(ctx, key, &d); err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(&d); ref == nil || ref.UID != gb.UID {
			return fmt.Errorf("controller %v", ref)
		}
		return nil
	})
	eventually(t, "the Guestbook's status says 2 available", func() error {
		var got webappv1.Guestbook
		if err := k8sClient.Get(ctx, key, &got); err != nil {
			return err
		}
		if got.Status.AvailableReplicas != 2 {
			return fmt.Errorf("%d available", got.Status.AvailableReplicas)
		}
		return nil
	})

	if err := k8sClient.Delete(ctx, gb); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the garbage collector deleted the Deployment", func() error {
		err := k8sClient.Get(ctx, key, &appsv1.Deployment{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errors.Join(errors.New("still there"), err)
	})
}

func TestGuestbookValidation(t *testing.T) {
	gb := &webappv1.Guestbook{ObjectMeta: metav1.ObjectMeta{Name: "no-image", Namespace: "default"}}
	if err := k8sClient.Create(t.Context(), gb); !apierrors.IsInvalid(err) {
		t.Fatalf("a Guestbook without an image: %v, want 422 Invalid from the CRD's schema", err)
	}
}
