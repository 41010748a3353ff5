// Package v2 holds the webapp.example.com/v2 API: Guestbook, whose
// replicas v2 calls size, with its deep copies written by hand where
// controller-gen would generate them. v1 is the storage version; v2 is
// converted to and from it by the conversion webhook
// (guestbook_conversion.go).
package v2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API's group and version.
var GroupVersion = schema.GroupVersion{Group: "webapp.example.com", Version: "v2"}

// SchemeBuilder registers the API's types; AddToScheme adds them to a
// scheme.
var (
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	AddToScheme   = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Guestbook{}, &GuestbookList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// GuestbookSpec is what the user asks for: a Deployment of Size pods of
// Image.
type GuestbookSpec struct {
	Image string `json:"image"`
	Size  int32  `json:"size,omitempty"`
}

// GuestbookStatus is what the controller reports.
type GuestbookStatus struct {
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`
}

// Guestbook is the Schema for the guestbooks API.
type Guestbook struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              GuestbookSpec   `json:"spec,omitempty"`
	Status            GuestbookStatus `json:"status,omitempty"`
}

// GuestbookList is a list of Guestbooks.
type GuestbookList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Guestbook `json:"items"`
}

// DeepCopyInto copies g into out.
func (g *Guestbook) DeepCopyInto(out *Guestbook) {
	*out = *g
	g.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
}

// DeepCopyObject makes Guestbook a runtime.Object.
func (g *Guestbook) DeepCopyObject() runtime.Object {
	out := new(Guestbook)
	g.DeepCopyInto(out)
	return out
}

// DeepCopyObject makes GuestbookList a runtime.Object.
func (l *GuestbookList) DeepCopyObject() runtime.Object {
	out := &GuestbookList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]Guestbook, len(l.Items))
	for i := range l.Items {
		l.Items[i].DeepCopyInto(&out.Items[i])
	}
	return out
}
