package compat_test

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Foo is k8s.io/sample-controller's custom resource, as a controller-runtime
// user declares it (kubebuilder would generate the deep copies): the
// sample controller keeps a Deployment of spec.replicas pods named
// spec.deploymentName, and reports its available replicas in the status.
type Foo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              FooSpec   `json:"spec"`
	Status            FooStatus `json:"status"`
}

// FooSpec is what the user asks for.
type FooSpec struct {
	DeploymentName string `json:"deploymentName"`
	Replicas       *int32 `json:"replicas"`
}

// FooStatus is what the controller reports.
type FooStatus struct {
	AvailableReplicas int32 `json:"availableReplicas"`
}

// FooList is a list of Foos, which controller-runtime's cache lists.
type FooList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Foo `json:"items"`
}

func (f *Foo) DeepCopyObject() runtime.Object {
	cp := *f
	f.ObjectMeta.DeepCopyInto(&cp.ObjectMeta)
	if f.Spec.Replicas != nil {
		cp.Spec.Replicas = new(*f.Spec.Replicas)
	}
	return &cp
}

func (l *FooList) DeepCopyObject() runtime.Object {
	cp := &FooList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&cp.ListMeta)
	for i := range l.Items {
		cp.Items = append(cp.Items, *l.Items[i].DeepCopyObject().(*Foo))
	}
	return cp
}

var (
	fooGV  = schema.GroupVersion{Group: "samplecontroller.k8s.io", Version: "v1alpha1"}
	fooGVK = fooGV.WithKind("Foo")
	fooGVR = fooGV.WithResource("foos")
)

// fooScheme is client-go's scheme of built-in types with the Foos added.
func fooScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	s.AddKnownTypes(fooGV, &Foo{}, &FooList{})
	metav1.AddToGroupVersion(s, fooGV)
	return s, nil
}
