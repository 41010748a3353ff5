package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	mutatingpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	validatingpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	webhookinit "k8s.io/apiserver/pkg/admission/plugin/webhook/initializer"
	mutatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/mutating"
	validatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/component-base/compatibility"
	baseversion "k8s.io/component-base/version"

	"k8s.io/kubernetes/pkg/capabilities"
	controlplaneadmission "k8s.io/kubernetes/pkg/controlplane/apiserver/admission"
	"k8s.io/kubernetes/pkg/kubeapiserver/admission/exclusion"
	quotainstall "k8s.io/kubernetes/pkg/quota/v1/install"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/resolver"
	certsubjectrestriction "k8s.io/kubernetes/plugin/pkg/admission/certificates/subjectrestriction"
	"k8s.io/kubernetes/plugin/pkg/admission/defaulttolerationseconds"
	"k8s.io/kubernetes/plugin/pkg/admission/limitranger"
	"k8s.io/kubernetes/plugin/pkg/admission/network/defaultingressclass"
	"k8s.io/kubernetes/plugin/pkg/admission/nodedeclaredfeatures"
	"k8s.io/kubernetes/plugin/pkg/admission/nodetaint"
	"k8s.io/kubernetes/plugin/pkg/admission/podresize"
	"k8s.io/kubernetes/plugin/pkg/admission/podtopologylabels"
	podpriority "k8s.io/kubernetes/plugin/pkg/admission/priority"
	"k8s.io/kubernetes/plugin/pkg/admission/runtimeclass"
	"k8s.io/kubernetes/plugin/pkg/admission/scheduling/podgroupprotection"
	"k8s.io/kubernetes/plugin/pkg/admission/security/podsecurity"
	"k8s.io/kubernetes/plugin/pkg/admission/serviceaccount"
	"k8s.io/kubernetes/plugin/pkg/admission/storage/persistentvolume/resize"
	"k8s.io/kubernetes/plugin/pkg/admission/storage/storageclass/setdefault"
	"k8s.io/kubernetes/plugin/pkg/admission/storage/storageobjectinuseprotection"
)

// Admission: kube-apiserver's own admission plugins, its default set,
// built with what kube-apiserver gives them: a client of the server itself
// (its loopback client) and a client-go informer factory over that client,
// whose informers (one per resource a plugin reads: ServiceAccounts,
// LimitRanges, PriorityClasses, RuntimeClasses, StorageClasses,
// IngressClasses, ResourceQuotas, Namespaces, Nodes) the server starts.
// kube-apiserver runs the mutating plugins on the decoded object before the
// strategy's BeforeCreate or BeforeUpdate, and the validating ones after
// it, before the object is stored; Create and Update do the same.
//
// The admission webhooks (MutatingAdmissionWebhook,
// ValidatingAdmissionWebhook) are kube's plugins with what kube-apiserver
// gives them (webhooks.go): its service resolver through a Service's
// EndpointSlices and its authentication info resolver, and the webhook
// configurations from the same informers. So are the admission policies
// (MutatingAdmissionPolicy, ValidatingAdmissionPolicy), which also get a
// dynamic client and a RESTMapper over the server's discovery, both
// through its loopback client, and its authorizer.
//
// Of the default set, these are not run: NamespaceLifecycle, whose rules
// are the server's own; CertificateApproval, CertificateSigning and
// ClusterTrustBundleAttest, which need an authorizer.

// plugin is one admission plugin of kube-apiserver's default set.
type plugin struct {
	name     string
	register func(*admission.Plugins)
	// reads: the plugin reads other objects (client and informers).
	reads bool
}

// admissionPlugins are the plugins run, in kube-apiserver's order
// (k8s.io/kubernetes/pkg/kubeapiserver/options.AllOrderedPlugins, which
// the tests check this against).
var admissionPlugins = []plugin{
	{limitranger.PluginName, limitranger.Register, true},
	{serviceaccount.PluginName, serviceaccount.Register, true},
	{nodetaint.PluginName, nodetaint.Register, false},
	{podsecurity.PluginName, podsecurity.Register, true},
	{podpriority.PluginName, podpriority.Register, true},
	{defaulttolerationseconds.PluginName, defaulttolerationseconds.Register, false},
	{setdefault.PluginName, setdefault.Register, true},
	{storageobjectinuseprotection.PluginName, storageobjectinuseprotection.Register, false},
	{podgroupprotection.PluginName, podgroupprotection.Register, false},
	{resize.PluginName, resize.Register, true},
	{runtimeclass.PluginName, runtimeclass.Register, true},
	{certsubjectrestriction.PluginName, certsubjectrestriction.Register, false},
	{defaultingressclass.PluginName, defaultingressclass.Register, true},
	{podtopologylabels.PluginName, podtopologylabels.Register, true},
	{nodedeclaredfeatures.PluginName, nodedeclaredfeatures.Register, true},
	{podresize.PluginName, podresize.Register, true},
	{mutatingpolicy.PluginName, mutatingpolicy.Register, true},
	{mutatingwebhook.PluginName, mutatingwebhook.Register, true},
	{validatingpolicy.PluginName, validatingpolicy.Register, true},
	{validatingwebhook.PluginName, validatingwebhook.Register, true},
	{resourcequota.PluginName, resourcequota.Register, true},
}

// AdmissionPlugins returns the names of the plugins NewAdmission can run,
// in the order they run.
func AdmissionPlugins() []string {
	names := make([]string, len(admissionPlugins))
	for i, p := range admissionPlugins {
		names[i] = p.name
	}
	return names
}

// AdmissionConfig is what NewAdmission needs.
type AdmissionConfig struct {
	// Client is the server's client of itself, and Informers an informer
	// factory over it, which the caller starts once NewAdmission has
	// returned (the plugins register the informers they read) and stops
	// after Stop. With no Client, only the plugins that read nothing but
	// the object run.
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
	// Served reports whether the server serves a resource (kube-apiserver's
	// enabled resources): quota evaluates only those.
	Served func(schema.GroupVersionResource) bool
	// Disabled names plugins not to run, as kube-apiserver's
	// --disable-admission-plugins.
	Disabled []string
	// Stop ends the plugins' own goroutines (ResourceQuota's evaluator).
	Stop <-chan struct{}
	// Fresh, when set, is called before the plugins run on a write: it
	// returns once the informers hold what the plugins should see.
	Fresh func(ctx context.Context)
	// Authorizer is the server's, which the webhooks' matchConditions
	// reach as their authorizer variable; nil for none.
	Authorizer authorizer.Authorizer
	// Loopback is the configuration of Client, which the webhooks use to
	// call a webhook served by the server itself (the Service
	// default/kubernetes), as kube-apiserver's do.
	Loopback *rest.Config
}

// Admission is a chain of kube-apiserver's admission plugins; the zero
// value is not usable, get one from NewAdmission. Give it to Create and
// Update in Request.Admission.
type Admission struct {
	mutating   admission.MutationInterface
	validating admission.ValidationInterface
	fresh      func(ctx context.Context)
	// policies are the strategies of the admission policies and their
	// bindings, which check writes with the server's authorizer
	// (policies.go).
	policies map[schema.GroupResource]entry
}

// NoAdmission runs no plugin: the admission of the writes kube-apiserver's
// storages make within another (an eviction's update and delete of its
// pod).
var NoAdmission = &Admission{}

// NewAdmission builds the plugins of cfg, initialised as kube-apiserver
// initialises them (k8s.io/apiserver's initializer, with kube's quota
// configuration).
func NewAdmission(cfg AdmissionConfig) (*Admission, error) {
	reads := cfg.Client != nil && cfg.Informers != nil
	plugins := admission.NewPlugins()
	var names []string
	for _, p := range admissionPlugins {
		if (p.reads && !reads) || slices.Contains(cfg.Disabled, p.name) {
			continue
		}
		p.register(plugins)
		names = append(names, p.name)
	}
	if err := CheckAdmissionPlugins(cfg.Disabled); err != nil {
		return nil, err
	}
	stop := cfg.Stop
	if stop == nil {
		stop = make(chan struct{})
	}
	a := &Admission{fresh: cfg.Fresh}
	var dynamicClient dynamic.Interface
	var mapper meta.RESTMapper
	authz := cfg.Authorizer
	if reads {
		// What kube-apiserver gives the admission policies: a dynamic
		// client and a RESTMapper over its own discovery, both through
		// its loopback client, and its authorizer (one that allows
		// everything for a server that authorizes nothing).
		if cfg.Loopback == nil {
			return nil, errors.New("kube: admission reading objects needs the loopback configuration")
		}
		var err error
		if dynamicClient, err = dynamic.NewForConfig(cfg.Loopback); err != nil {
			return nil, fmt.Errorf("kube: dynamic client: %w", err)
		}
		mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cfg.Client.Discovery()))
		if authz == nil {
			authz = authorizerfactory.NewAlwaysAllowAuthorizer()
		}
		resolve, err := resolver.NewDiscoveryResourceResolver(cfg.Client.Discovery())
		if err != nil {
			return nil, fmt.Errorf("kube: resource resolver: %w", err)
		}
		a.policies = policyEntries(authz, resolve, cfg.Client)
	}
	inits := admission.PluginInitializers{
		initializer.New(cfg.Client, dynamicClient, cfg.Informers, authz, utilfeature.DefaultFeatureGate, effectiveVersion, stop, mapper),
	}
	if reads {
		quota, err := quotainstall.NewQuotaConfigurationForAdmission(cfg.Informers, servedResources(cfg.Served))
		if err != nil {
			return nil, fmt.Errorf("kube: quota configuration: %w", err)
		}
		services, auth, err := WebhookResolvers(cfg.Informers, cfg.Loopback)
		if err != nil {
			return nil, err
		}
		inits = append(inits,
			webhookinit.NewPluginInitializer(auth, services),
			controlplaneadmission.NewPluginInitializer(quota, exclusion.Excluded()))
	}
	chain, err := plugins.NewFromPlugins(names, noPluginConfig{}, inits, nil)
	if err != nil {
		return nil, fmt.Errorf("kube: admission plugins: %w", err)
	}
	a.mutating, _ = chain.(admission.MutationInterface)
	a.validating, _ = chain.(admission.ValidationInterface)
	return a, nil
}

// CheckAdmissionPlugins reports the names in disabled that are not
// plugins NewAdmission runs.
func CheckAdmissionPlugins(disabled []string) error {
	var unknown []string
	for _, d := range disabled {
		if !slices.ContainsFunc(admissionPlugins, func(p plugin) bool { return p.name == d }) {
			unknown = append(unknown, d)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("kube: admission plugins %q are not run (known: %v)", unknown, AdmissionPlugins())
	}
	return nil
}

// effectiveVersion is kube-apiserver's at its binary version (PodSecurity
// checks pods against the policies of that version).
var effectiveVersion = compatibility.NewEffectiveVersionFromString(baseversion.DefaultKubeBinaryVersion, "", "")

// servedResources is kube-apiserver's APIResourceConfigSource for a
// server serving what served reports (everything when nil).
type servedResources func(schema.GroupVersionResource) bool

func (s servedResources) ResourceEnabled(gvr schema.GroupVersionResource) bool {
	return s == nil || s(gvr)
}

func (s servedResources) AnyResourceForGroupEnabled(string) bool { return true }

func (s servedResources) ResourceExplicitlyEnabled(gvr schema.GroupVersionResource) bool {
	return s.ResourceEnabled(gvr)
}

func (s servedResources) VersionExplicitlyEnabled(schema.GroupVersion) bool { return false }

// noPluginConfig gives every plugin no configuration file.
type noPluginConfig struct{}

func (noPluginConfig) ConfigFor(string) (io.Reader, error) { return nil, nil }

// objectOnly is the chain of the plugins that read nothing but the
// object, for a Request with no Admission. It is built on first use, not
// when the package loads: building it logs through klog, which a program
// sends to its own logger first.
var objectOnly = sync.OnceValues(func() (*Admission, error) {
	a, err := NewAdmission(AdmissionConfig{})
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return a, nil
})

var admissionObjects = admission.NewObjectInterfacesFromScheme(scheme)

// equivalentObjects are kube's scheme's ObjectInterfaces with the
// server's equivalent resources (SetEquivalents).
type equivalentObjects struct {
	admission.ObjectInterfaces
	equivalents runtime.EquivalentResourceMapper
}

func (o equivalentObjects) GetEquivalentResourceMapper() runtime.EquivalentResourceMapper {
	return o.equivalents
}

// SetEquivalents tells the rules which resources the server serves are
// the same objects as theirs at other versions (autoscaling/v1 and v2
// horizontal pod autoscalers), as kube-apiserver's registry of equivalent
// resources does: a webhook with matchPolicy Equivalent registered for
// one is called for writes of the others, with the object converted. Call
// it before the rules are used.
func (k *Rules) SetEquivalents(m runtime.EquivalentResourceMapper) {
	k.objects = equivalentObjects{ObjectInterfaces: admissionObjects, equivalents: m}
}

// admissionObjects are what admission converts the rules' objects with.
func (k *Rules) admissionObjects() admission.ObjectInterfaces {
	if k.objects == nil {
		return admissionObjects
	}
	return k.objects
}

func init() {
	// kube-apiserver --allow-privileged, as a kubeadm cluster runs it (the
	// goldens' cluster): privileged containers pass pod validation.
	capabilities.Setup(true, 0)
}

// chain is the admission of req.
func (req Request) chain() (*Admission, error) {
	if req.Admission != nil {
		return req.Admission, nil
	}
	return objectOnly()
}

// attributesOf describes a write of obj, of kind gvk, to resource gvr
// (old is the stored object of an update), as kube-apiserver's handlers
// do: with the write's options (meta.k8s.io/v1 CreateOptions or
// UpdateOptions, which webhooks receive) and its user.
func attributesOf(req Request, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource, obj, old runtime.Object) admission.Attributes {
	var dryRun []string
	if req.DryRun {
		dryRun = []string{metav1.DryRunAll}
	}
	optionsKind := metav1.SchemeGroupVersion.WithKind("CreateOptions")
	o := req.Options
	op, opts := admission.Create, runtime.Object(&metav1.CreateOptions{DryRun: dryRun, FieldManager: o.FieldManager, FieldValidation: o.FieldValidation})
	if old != nil {
		optionsKind = metav1.SchemeGroupVersion.WithKind("UpdateOptions")
		op, opts = admission.Update, &metav1.UpdateOptions{DryRun: dryRun, FieldManager: o.FieldManager, FieldValidation: o.FieldValidation}
	}
	opts.GetObjectKind().SetGroupVersionKind(optionsKind)
	// A request nobody authenticated (a server run without
	// authentication) is anonymous, as kube-apiserver has it.
	u := &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}
	if req.User.Name != "" {
		u = &user.DefaultInfo{Name: req.User.Name, UID: req.User.UID, Groups: req.User.Groups}
	}
	return admission.NewAttributesRecord(obj, old, gvk, req.Namespace, req.Name, gvr, req.Subresource, op, opts, req.DryRun, u)
}

// admitObject runs the mutating plugins on obj, in place: a write of req
// to resource gvr of kind gvk, whose objects o converts.
//
// kube-apiserver's handler runs them before its storage fills in a new
// object's uid and creationTimestamp: the plugins see a new object without
// them, and what they set there is replaced.
func (req Request) admitObject(ctx context.Context, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource, o admission.ObjectInterfaces, obj, old runtime.Object) error {
	chain, err := req.chain()
	if err != nil {
		return err
	}
	if chain.fresh != nil {
		chain.fresh(ctx)
	}
	a := attributesOf(req, gvk, gvr, obj, old)
	if chain.mutating == nil || !chain.mutating.Handles(a.GetOperation()) {
		return nil
	}
	if old == nil {
		if m, err := meta.Accessor(obj); err == nil {
			uid, created := m.GetUID(), m.GetCreationTimestamp()
			m.SetUID("")
			m.SetCreationTimestamp(metav1.Time{})
			defer func() {
				m.SetUID(uid)
				m.SetCreationTimestamp(created)
			}()
		}
	}
	return chain.mutating.Admit(ctx, a, o)
}

// validateObject runs the validating plugins on obj.
func (req Request) validateObject(ctx context.Context, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource, o admission.ObjectInterfaces, obj, old runtime.Object) error {
	chain, err := req.chain()
	if err != nil {
		return err
	}
	a := attributesOf(req, gvk, gvr, obj, old)
	if chain.validating == nil || !chain.validating.Handles(a.GetOperation()) {
		return nil
	}
	return chain.validating.Validate(ctx, a, o)
}

// admit runs the mutating plugins on obj, in place.
func (k *Rules) admit(ctx context.Context, req Request, obj, old runtime.Object) error {
	return req.admitObject(ctx, k.gvk, k.gvr, k.admissionObjects(), obj, old)
}

// validate runs the validating plugins on obj.
func (k *Rules) validate(ctx context.Context, req Request, obj, old runtime.Object) error {
	return req.validateObject(ctx, k.gvk, k.gvr, k.admissionObjects(), obj, old)
}

// AdmissionStage runs one stage of admission on a write's object (old is
// the stored object of an update, nil on create).
type AdmissionStage func(ctx context.Context, obj, old runtime.Object) error

// CustomAdmission returns the two stages of admission of req's write to
// gvr, a custom resource of kind gvk whose objects (unstructured) o
// converts, creates and defaults: the mutating plugins, run before the
// strategy, and the validating ones, run after it, as kube-apiserver's
// handlers and storage run them for custom resources.
func (req Request) CustomAdmission(gvk schema.GroupVersionKind, gvr schema.GroupVersionResource, o admission.ObjectInterfaces) (admit, validate AdmissionStage) {
	admit = func(ctx context.Context, obj, old runtime.Object) error {
		return req.admitObject(ctx, gvk, gvr, o, obj, old)
	}
	validate = func(ctx context.Context, obj, old runtime.Object) error {
		return req.validateObject(ctx, gvk, gvr, o, obj, old)
	}
	return admit, validate
}

// DeleteAdmission is the admission of one delete, as kube-apiserver runs
// it: the mutating plugins once, with no object, before the object is
// read (its delete handler), and the validating ones on the stored object
// each time the delete is about to remove it or mark it as deleting (its
// storage). The zero value admits everything.
type DeleteAdmission struct {
	req  Request
	gvk  schema.GroupVersionKind
	gvr  schema.GroupVersionResource
	o    admission.ObjectInterfaces
	opts *metav1.DeleteOptions
	// object is the stored object as the plugins see it.
	object func(*unstructured.Unstructured) (runtime.Object, error)
}

// DeleteAdmission is the admission of req's delete with opts of an object
// of the resource, which the plugins see as its internal type.
func (k *Rules) DeleteAdmission(req Request, opts *metav1.DeleteOptions) DeleteAdmission {
	return DeleteAdmission{req: req, gvk: k.gvk, gvr: k.gvr, o: k.admissionObjects(), opts: opts, object: k.internal}
}

// CustomDeleteAdmission is the admission of req's delete with opts of a
// custom resource of gvr, kind gvk, whose objects o converts: the plugins
// see the object as it is stored.
func (req Request) CustomDeleteAdmission(gvk schema.GroupVersionKind, gvr schema.GroupVersionResource, o admission.ObjectInterfaces, opts *metav1.DeleteOptions) DeleteAdmission {
	return DeleteAdmission{req: req, gvk: gvk, gvr: gvr, o: o, opts: opts,
		object: func(u *unstructured.Unstructured) (runtime.Object, error) { return u, nil }}
}

// attributes describes the delete of old (nil for the handler's
// admission, which has none).
func (d DeleteAdmission) attributes(old runtime.Object) admission.Attributes {
	opts := d.opts.DeepCopy()
	if opts == nil {
		opts = &metav1.DeleteOptions{}
	}
	opts.GetObjectKind().SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("DeleteOptions"))
	a := attributesOf(d.req, d.gvk, d.gvr, nil, old)
	return admission.NewAttributesRecord(nil, old, d.gvk, d.req.Namespace, d.req.Name, d.gvr, d.req.Subresource,
		admission.Delete, opts, d.req.DryRun, a.GetUserInfo())
}

// context carries the warning recorder of d's request.
func (d DeleteAdmission) context(ctx context.Context) context.Context {
	if d.req.Warn != nil {
		ctx = warning.WithWarningRecorder(ctx, warnFunc(d.req.Warn))
	}
	return ctx
}

// Admit runs the mutating plugins on the delete, with no object.
func (d DeleteAdmission) Admit(ctx context.Context) error {
	if d.object == nil {
		return nil
	}
	chain, err := d.req.chain()
	if err != nil || chain.mutating == nil || !chain.mutating.Handles(admission.Delete) {
		return err
	}
	if chain.fresh != nil {
		chain.fresh(ctx)
	}
	return chain.mutating.Admit(d.context(ctx), d.attributes(nil), d.o)
}

// Validate runs the validating plugins on the delete of cur, as stored.
func (d DeleteAdmission) Validate(ctx context.Context, cur *unstructured.Unstructured) error {
	if d.object == nil {
		return nil
	}
	chain, err := d.req.chain()
	if err != nil || chain.validating == nil || !chain.validating.Handles(admission.Delete) {
		return err
	}
	old, err := d.object(cur)
	if err != nil {
		return err
	}
	return chain.validating.Validate(d.context(ctx), d.attributes(old), d.o)
}
