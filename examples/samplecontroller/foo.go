package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Foo is k8s.io/sample-controller's custom resource (crd.yaml serves it):
// spec.deploymentName names a Deployment of spec.replicas nginx pods, whose
// available replicas go to status.availableReplicas. A plain Go struct:
// the client and the informers decode Foos into it, with no code
// generation; only DeepCopyObject is written by hand.
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

// DeepCopyObject makes Foo a runtime.Object.
func (f *Foo) DeepCopyObject() runtime.Object {
	cp := *f
	f.ObjectMeta.DeepCopyInto(&cp.ObjectMeta)
	if f.Spec.Replicas != nil {
		cp.Spec.Replicas = new(*f.Spec.Replicas)
	}
	return &cp
}

// The Foos' kind and resource.
var (
	fooGVK = schema.GroupVersionKind{Group: "samplecontroller.k8s.io", Version: "v1alpha1", Kind: "Foo"}
	fooGVR = fooGVK.GroupVersion().WithResource("foos")
)
