package disruption

import (
	"context"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/resources"
)

// REST is the Client over listwatch's REST client.
type REST struct {
	c    *client.Client
	pdbs *client.Resource[*policyv1.PodDisruptionBudget]
	pods *client.Resource[*corev1.Pod]
}

var _ Client = (*REST)(nil)

// NewClient returns the controller's API access through c.
func NewClient(c *client.Client) *REST {
	return &REST{c: c, pdbs: client.For[*policyv1.PodDisruptionBudget](c, ""), pods: client.For[*corev1.Pod](c, "")}
}

// UpdatePDBStatus writes the budget's status subresource.
func (r *REST) UpdatePDBStatus(ctx context.Context, pdb *policyv1.PodDisruptionBudget) (*policyv1.PodDisruptionBudget, error) {
	return r.pdbs.Namespace(pdb.Namespace).UpdateStatus(ctx, pdb, metav1.UpdateOptions{})
}

// UpdatePodStatus writes the pod's status subresource.
func (r *REST) UpdatePodStatus(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	return r.pods.Namespace(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
}

// ResourceFor maps gvk to its resource: a built-in kind from the resource
// registry, any other from the server's discovery.
func (r *REST) ResourceFor(ctx context.Context, gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	if res, ok := resources.Builtin.ForKind(gvk); ok {
		return res.GVR(), nil
	}
	list, err := r.c.ServerResourcesForGroupVersion(ctx, gvk.GroupVersion())
	if err == nil {
		for _, res := range list.APIResources {
			if res.Kind == gvk.Kind && !strings.Contains(res.Name, "/") {
				return gvk.GroupVersion().WithResource(res.Name), nil
			}
		}
	}
	return schema.GroupVersionResource{}, &apimeta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
}

// GetScale reads the scale subresource of namespace/name of gvr.
func (r *REST) GetScale(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*autoscalingv1.Scale, error) {
	var scale autoscalingv1.Scale
	if err := client.NewMetadata(r.c, gvr, namespace).GetSubresource(ctx, name, "scale", &scale); err != nil {
		return nil, err
	}
	return &scale, nil
}

// ServesScale reports whether discovery lists gvr's scale subresource as
// an autoscaling/v1 Scale.
func (r *REST) ServesScale(ctx context.Context, gvr schema.GroupVersionResource) (bool, error) {
	list, err := r.c.ServerResourcesForGroupVersion(ctx, gvr.GroupVersion())
	if err != nil {
		return false, err
	}
	for _, res := range list.APIResources {
		if res.Name == gvr.Resource+"/scale" && res.Group == autoscalingv1.GroupName && res.Version == "v1" && res.Kind == "Scale" {
			return true, nil
		}
	}
	return false, nil
}
