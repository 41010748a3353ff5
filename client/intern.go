package client

import (
	"hash/maphash"
	"maps"
	"reflect"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client/internal/protodecode"
)

// A cache holds tens of thousands of objects that repeat one another: the
// same namespaces, label keys and values, images, node names, policies and
// resource requests in every pod of a workload. Decoding gives each object
// its own copy of each. Objects read for an informer's cache are made to
// share one copy instead: equal strings become one string, and equal small
// maps (annotations, resource lists, node selectors) one map.
//
// Sharing maps is safe because objects in an informer's cache are read-only
// (the mutation detector reports writers); whoever changes one must
// DeepCopy it first, which copies the maps. Strings are immutable anyway.

const (
	// maxInterned is the longest string shared; longer ones are rarely
	// repeated (messages, certificates).
	maxInterned = 128
	// maxInternEntries and maxInternMaps bound the tables: past them they
	// start afresh, so that a stream of unique values cannot grow them
	// without end, nor keep much of what the cache dropped alive.
	maxInternEntries = 1 << 16
	maxInternMaps    = 1 << 14
	// maxSharedMap is the most entries of a map that is shared.
	maxSharedMap = 8
)

// interner holds the canonical copies. One lock per object, not per string:
// an object is interned in a few microseconds.
type interner struct {
	mu      sync.Mutex
	strs    map[string]string
	strMaps map[uint64][]map[string]string
	resMaps map[uint64][]corev1.ResourceList
	nMaps   int
	seed    maphash.Seed
	ownMaps bool // the maps of the object being interned may be written
}

var shared = &interner{
	strs:    map[string]string{},
	strMaps: map[uint64][]map[string]string{},
	resMaps: map[uint64][]corev1.ResourceList{},
	seed:    maphash.MakeSeed(),
}

// internObject makes obj share what it repeats of the objects decoded
// before it. ownMaps tells that obj's maps are its own, fresh from
// decoding, so that their keys and values may be rewritten in place; maps
// the decoder may already have shared with objects now in a cache (see
// jsondecode.Decoder.Share) must not be written to, as they may be read.
func internObject[T cache.Object](obj T, ownMaps bool) {
	in := shared
	in.mu.Lock()
	defer in.mu.Unlock()
	in.object(obj, ownMaps)
}

// internObjects is internObject for each of objs, under one lock: the
// decoders of a list's items, which run at once, would otherwise contend
// for it on every item.
func internObjects[T cache.Object](objs []T, ownMaps bool) {
	in := shared
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, obj := range objs {
		in.object(obj, ownMaps)
	}
}

func (in *interner) object(obj cache.Object, ownMaps bool) {
	in.ownMaps = ownMaps
	if len(in.strs) > maxInternEntries {
		clear(in.strs)
	}
	if in.nMaps > maxInternMaps {
		clear(in.strMaps)
		clear(in.resMaps)
		in.nMaps = 0
	}
	switch o := any(obj).(type) {
	case *corev1.Pod:
		in.pod(o)
		return
	}
	in.meta(obj)
}

func (in *interner) str(s *string) {
	if len(*s) == 0 || len(*s) > maxInterned {
		return
	}
	if c, ok := in.strs[*s]; ok {
		*s = c
		return
	}
	in.strs[*s] = *s
}

func (in *interner) strs8(ss []string) {
	for i := range ss {
		in.str(&ss[i])
	}
}

// strMap returns the canonical map equal to m, m itself when it is the
// first of its contents; a map too large to share keeps its own, with its
// keys and values interned.
func (in *interner) strMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	if len(m) > maxSharedMap {
		if in.ownMaps {
			in.strMapEntries(m)
		}
		return m
	}
	var h uint64
	for k, v := range m {
		// A sum of the entries' hashes: the same whatever the order.
		h += maphash.String(in.seed, k) ^ maphash.String(in.seed, v)*31
	}
	for _, c := range in.strMaps[h] {
		if maps.Equal(c, m) {
			return c
		}
	}
	if in.ownMaps {
		in.strMapEntries(m)
	}
	in.strMaps[h] = append(in.strMaps[h], m)
	in.nMaps++
	return m
}

// strMapEntries interns the keys and values of m in place: assigning to a
// string key that is present replaces the stored key too.
func (in *interner) strMapEntries(m map[string]string) {
	for k, v := range m {
		ck, cv := k, v
		in.str(&ck)
		in.str(&cv)
		m[ck] = cv
	}
}

func quantityEqual(a, b resource.Quantity) bool {
	return a.Format == b.Format && a.Cmp(b) == 0
}

func (in *interner) resList(m corev1.ResourceList) corev1.ResourceList {
	if len(m) == 0 || len(m) > maxSharedMap {
		return m
	}
	var h uint64
	for k, q := range m {
		h += maphash.String(in.seed, string(k)) ^ uint64(q.MilliValue())*31 ^ maphash.String(in.seed, string(q.Format))
	}
	for _, c := range in.resMaps[h] {
		if maps.EqualFunc(c, m, quantityEqual) {
			return c
		}
	}
	in.resMaps[h] = append(in.resMaps[h], m)
	in.nMaps++
	return m
}

// meta interns what every object's metadata repeats.
func (in *interner) meta(obj cache.Object) {
	if ns := obj.GetNamespace(); ns != "" {
		in.str(&ns)
		obj.SetNamespace(ns)
	}
	if l := obj.GetLabels(); len(l) > 0 {
		obj.SetLabels(in.strMap(l))
	}
	if a := obj.GetAnnotations(); len(a) > 0 {
		obj.SetAnnotations(in.strMap(a))
	}
	refs := obj.GetOwnerReferences()
	for i := range refs {
		r := &refs[i]
		in.str(&r.APIVersion)
		in.str(&r.Kind)
		in.str(&r.Name)
		uid := string(r.UID)
		in.str(&uid)
		r.UID = types.UID(uid)
	}
	in.strs8(obj.GetFinalizers())
}

func (in *interner) pod(p *corev1.Pod) {
	in.meta(p)
	in.str(&p.GenerateName)
	s := &p.Spec
	for i := range s.Volumes {
		v := &s.Volumes[i]
		in.str(&v.Name)
		if v.ConfigMap != nil {
			in.str(&v.ConfigMap.Name)
		}
		if v.Secret != nil {
			in.str(&v.Secret.SecretName)
		}
		if v.PersistentVolumeClaim != nil {
			in.str(&v.PersistentVolumeClaim.ClaimName)
		}
	}
	for i := range s.InitContainers {
		in.container(&s.InitContainers[i])
	}
	for i := range s.Containers {
		in.container(&s.Containers[i])
	}
	in.str((*string)(&s.RestartPolicy))
	in.str((*string)(&s.DNSPolicy))
	in.str(&s.NodeName)
	in.str(&s.ServiceAccountName)
	in.str(&s.DeprecatedServiceAccount)
	in.str(&s.SchedulerName)
	in.str(&s.PriorityClassName)
	s.NodeSelector = in.strMap(s.NodeSelector)
	for i := range s.Tolerations {
		t := &s.Tolerations[i]
		in.str(&t.Key)
		in.str((*string)(&t.Operator))
		in.str(&t.Value)
		in.str((*string)(&t.Effect))
	}
	st := &p.Status
	in.str((*string)(&st.Phase))
	for i := range st.Conditions {
		c := &st.Conditions[i]
		in.str((*string)(&c.Type))
		in.str((*string)(&c.Status))
		in.str(&c.Reason)
		in.str(&c.Message)
	}
	in.str(&st.HostIP)
	for i := range st.HostIPs {
		in.str(&st.HostIPs[i].IP)
	}
	in.str((*string)(&st.QOSClass))
	for i := range st.InitContainerStatuses {
		in.containerStatus(&st.InitContainerStatuses[i])
	}
	for i := range st.ContainerStatuses {
		in.containerStatus(&st.ContainerStatuses[i])
	}
}

func (in *interner) container(c *corev1.Container) {
	in.str(&c.Name)
	in.str(&c.Image)
	in.strs8(c.Command)
	in.strs8(c.Args)
	in.str(&c.WorkingDir)
	for i := range c.Ports {
		in.str(&c.Ports[i].Name)
		in.str((*string)(&c.Ports[i].Protocol))
	}
	for i := range c.Env {
		e := &c.Env[i]
		in.str(&e.Name)
		in.str(&e.Value)
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			in.str(&e.ValueFrom.FieldRef.APIVersion)
			in.str(&e.ValueFrom.FieldRef.FieldPath)
		}
	}
	c.Resources.Requests = in.resList(c.Resources.Requests)
	c.Resources.Limits = in.resList(c.Resources.Limits)
	for i := range c.VolumeMounts {
		in.str(&c.VolumeMounts[i].Name)
		in.str(&c.VolumeMounts[i].MountPath)
	}
	in.str(&c.TerminationMessagePath)
	in.str((*string)(&c.TerminationMessagePolicy))
	in.str((*string)(&c.ImagePullPolicy))
}

func (in *interner) containerStatus(c *corev1.ContainerStatus) {
	in.str(&c.Name)
	in.str(&c.Image)
	in.str(&c.ImageID)
	if w := c.State.Waiting; w != nil {
		in.str(&w.Reason)
	}
	if t := c.State.Terminated; t != nil {
		in.str(&t.Reason)
	}
	if t := c.LastTerminationState.Terminated; t != nil {
		in.str(&t.Reason)
	}
}

// Resource requirements are the largest thing pods repeat: three small maps
// of quantities per pod. Decoded as a whole and shared afterwards, each
// pod's copies would be garbage made only to be thrown away, which a sync
// of many pods pays for in peak heap. So the decoding of the pods bound for
// a cache (protodecode) looks up the encoded bytes of each container's
// resources, and gives the container the value decoded before for the same
// bytes.

// maxResourceMemo bounds the resource requirements remembered.
const maxResourceMemo = 4096

// resourcesMemo shares the resource requirements of the containers of the
// objects bound for a cache, those of lists and of watch events.
var resourcesMemo = func() *protodecode.Memo {
	m, err := protodecode.NewMemo(reflect.TypeFor[corev1.ResourceRequirements](), maxResourceMemo)
	if err != nil {
		panic(err) // a ResourceRequirements is a struct with DeepCopyInto
	}
	return m
}()
