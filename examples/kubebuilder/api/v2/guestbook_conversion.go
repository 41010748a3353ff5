package v2

import (
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	webappv1 "example.com/guestbook/api/v1"
)

// ConvertTo converts g to the hub, v1: size is v1's replicas.
func (g *Guestbook) ConvertTo(hub conversion.Hub) error {
	dst := hub.(*webappv1.Guestbook)
	dst.ObjectMeta = g.ObjectMeta
	dst.Spec = webappv1.GuestbookSpec{Image: g.Spec.Image, Replicas: g.Spec.Size}
	dst.Status = webappv1.GuestbookStatus{AvailableReplicas: g.Status.AvailableReplicas}
	return nil
}

// ConvertFrom converts the hub, v1, to g.
func (g *Guestbook) ConvertFrom(hub conversion.Hub) error {
	src := hub.(*webappv1.Guestbook)
	g.ObjectMeta = src.ObjectMeta
	g.Spec = GuestbookSpec{Image: src.Spec.Image, Size: src.Spec.Replicas}
	g.Status = GuestbookStatus{AvailableReplicas: src.Status.AvailableReplicas}
	return nil
}
