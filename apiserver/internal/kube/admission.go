package kube

import (
	"context"
	"fmt"
	"io"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/authentication/user"
	utilfeature "k8s.io/apiserver/pkg/util/feature"

	"k8s.io/kubernetes/pkg/capabilities"
	certsubjectrestriction "k8s.io/kubernetes/plugin/pkg/admission/certificates/subjectrestriction"
	"k8s.io/kubernetes/plugin/pkg/admission/defaulttolerationseconds"
	"k8s.io/kubernetes/plugin/pkg/admission/nodetaint"
	"k8s.io/kubernetes/plugin/pkg/admission/scheduling/podgroupprotection"
	"k8s.io/kubernetes/plugin/pkg/admission/storage/storageobjectinuseprotection"
)

// Admission: kube-apiserver's own admission plugins, those of its default
// set that need nothing but the object they admit (no client, informer,
// authorizer or configuration). kube-apiserver runs the mutating ones on the
// decoded object before the strategy's BeforeCreate or BeforeUpdate, and the
// validating ones after it, before the object is stored; Create and Update
// do the same.
//
// The rest of the default set reads other objects through client-go
// informers (ServiceAccount, Priority, LimitRanger, RuntimeClass,
// ResourceQuota, PodSecurity, DefaultStorageClass, DefaultIngressClass,
// PersistentVolumeClaimResize, PodTopologyLabels, ...), needs an authorizer
// (CertificateApproval, CertificateSigning, ClusterTrustBundleAttest) or
// calls out (the webhooks and admission policies), and is not run;
// NamespaceLifecycle's rules are the server's own.

// admissionPlugins are the plugins run, in kube-apiserver's order
// (k8s.io/kubernetes/pkg/kubeapiserver/options.AllOrderedPlugins).
var admissionPlugins = []string{
	nodetaint.PluginName,                    // TaintNodesByCondition
	defaulttolerationseconds.PluginName,     // DefaultTolerationSeconds
	storageobjectinuseprotection.PluginName, // StorageObjectInUseProtection
	podgroupprotection.PluginName,           // PodGroupProtection
	certsubjectrestriction.PluginName,       // CertificateSubjectRestriction
}

// admissionChain is the plugins above as kube-apiserver chains them,
// initialised by k8s.io/apiserver's plugin initializer with only the
// feature gates to give. It is built on first use, not when the package
// loads: building it logs through klog, which a program sends to its own
// logger first (and a CLI command that serves nothing never builds it).
var admissionChain = sync.OnceValues(func() (admission.Interface, error) {
	plugins := admission.NewPlugins()
	nodetaint.Register(plugins)
	defaulttolerationseconds.Register(plugins)
	storageobjectinuseprotection.Register(plugins)
	podgroupprotection.Register(plugins)
	certsubjectrestriction.Register(plugins)
	init := initializer.New(nil, nil, nil, nil, utilfeature.DefaultFeatureGate, nil, nil, nil)
	chain, err := plugins.NewFromPlugins(admissionPlugins, noPluginConfig{}, init, nil)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("kube: admission plugins: %w", err))
	}
	return chain, nil
})

// noPluginConfig gives every plugin no configuration file.
type noPluginConfig struct{}

func (noPluginConfig) ConfigFor(string) (io.Reader, error) { return nil, nil }

var admissionObjects = admission.NewObjectInterfacesFromScheme(scheme)

func init() {
	// kube-apiserver --allow-privileged, as a kubeadm cluster runs it (the
	// goldens' cluster): privileged containers pass pod validation.
	capabilities.Setup(true, 0)
}

// attributes describes a write of obj (internal; old is the stored object
// of an update) to the plugins, as kube-apiserver's handlers do.
func (k *Rules) attributes(req Request, obj, old runtime.Object) admission.Attributes {
	op, opts := admission.Create, runtime.Object(&metav1.CreateOptions{})
	if old != nil {
		op, opts = admission.Update, &metav1.UpdateOptions{}
	}
	var u user.Info
	if req.User.Name != "" {
		u = &user.DefaultInfo{Name: req.User.Name, UID: req.User.UID, Groups: req.User.Groups}
	}
	return admission.NewAttributesRecord(obj, old, k.gvk, req.Namespace, req.Name, k.gvr, req.Subresource, op, opts, false, u)
}

// admit runs the mutating plugins on obj, in place.
func (k *Rules) admit(ctx context.Context, req Request, obj, old runtime.Object) error {
	chain, err := admissionChain()
	if err != nil {
		return err
	}
	a := k.attributes(req, obj, old)
	m, ok := chain.(admission.MutationInterface)
	if !ok || !m.Handles(a.GetOperation()) {
		return nil
	}
	return m.Admit(ctx, a, admissionObjects)
}

// validate runs the validating plugins on obj.
func (k *Rules) validate(ctx context.Context, req Request, obj, old runtime.Object) error {
	chain, err := admissionChain()
	if err != nil {
		return err
	}
	a := k.attributes(req, obj, old)
	v, ok := chain.(admission.ValidationInterface)
	if !ok || !v.Handles(a.GetOperation()) {
		return nil
	}
	return v.Validate(ctx, a, admissionObjects)
}
