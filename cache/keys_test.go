package cache

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// testPod builds a pod with the given namespace, name and labels, given as
// "k=v" pairs.
func testPod(ns, name string, labels ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if len(labels) > 0 {
		p.Labels = map[string]string{}
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			p.Labels[k] = v
		}
	}
	return p
}

// testPodRV is testPod with a resourceVersion, so tests can tell versions of
// one object apart.
func testPodRV(ns, name, rv string, labels ...string) *corev1.Pod {
	p := testPod(ns, name, labels...)
	p.ResourceVersion = rv
	return p
}

func TestKey_MetaNamespaceKeyFunc(t *testing.T) {
	for _, tc := range []struct {
		name    string
		obj     metav1.Object
		want    string
		wantErr bool
	}{
		{name: "namespaced", obj: testPod("ns", "p"), want: "ns/p"},
		{name: "cluster-scoped", obj: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, want: "node-1"},
		{name: "no name", obj: testPod("ns", ""), wantErr: true},
		{name: "no name no namespace", obj: testPod("", ""), wantErr: true},
		{name: "nil interface", obj: nil, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MetaNamespaceKeyFunc(tc.obj)
			if tc.wantErr {
				if !errors.Is(err, ErrNoName) {
					t.Fatalf("MetaNamespaceKeyFunc = %q, %v; want error wrapping ErrNoName", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("MetaNamespaceKeyFunc = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestKey_TypedNilObjectIsAnErrorNotAPanic(t *testing.T) {
	var p *corev1.Pod
	if _, err := metaKey(p); !errors.Is(err, ErrNoName) {
		t.Fatalf("metaKey(typed nil) = %v, want ErrNoName", err)
	}
	var u *unstructured.Unstructured
	if _, err := metaKey(u); !errors.Is(err, ErrNoName) {
		t.Fatalf("metaKey(typed nil unstructured) = %v, want ErrNoName", err)
	}
}

func TestKey_Unstructured(t *testing.T) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.com/v1")
	u.SetKind("Widget")
	u.SetNamespace("team-a")
	u.SetName("w1")
	if got, err := metaKey(u); err != nil || got != "team-a/w1" {
		t.Fatalf("key = %q, %v; want team-a/w1", got, err)
	}
	u.SetNamespace("")
	if got, err := metaKey(u); err != nil || got != "w1" {
		t.Fatalf("cluster-scoped key = %q, %v; want w1", got, err)
	}
}

func TestKey_SplitMetaNamespaceKey(t *testing.T) {
	for _, tc := range []struct {
		key      string
		ns, name string
		wantErr  bool
	}{
		{key: "ns/name", ns: "ns", name: "name"},
		{key: "name", name: "name"},
		{key: "kube-system/coredns-5d78c9869d-abcde", ns: "kube-system", name: "coredns-5d78c9869d-abcde"},
		{key: "", wantErr: true},
		{key: "/", wantErr: true},
		{key: "/name", wantErr: true},
		{key: "ns/", wantErr: true},
		{key: "a/b/c", wantErr: true},
		{key: "a//b", wantErr: true},
		{key: "//", wantErr: true},
	} {
		t.Run(tc.key, func(t *testing.T) {
			ns, name, err := SplitMetaNamespaceKey(tc.key)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("Split(%q) = %q, %q, nil; want error", tc.key, ns, name)
				}
				if ns != "" || name != "" {
					t.Fatalf("Split(%q) returned %q, %q with its error; want empty", tc.key, ns, name)
				}
				return
			}
			if err != nil || ns != tc.ns || name != tc.name {
				t.Fatalf("Split(%q) = %q, %q, %v; want %q, %q", tc.key, ns, name, err, tc.ns, tc.name)
			}
		})
	}
}

func TestKey_RoundTrip(t *testing.T) {
	for _, obj := range []metav1.Object{
		testPod("default", "web-0"),
		testPod("a", "b"),
		testPod("", "cluster-thing"),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}},
	} {
		key, err := MetaNamespaceKeyFunc(obj)
		if err != nil {
			t.Fatalf("key of %s/%s: %v", obj.GetNamespace(), obj.GetName(), err)
		}
		ns, name, err := SplitMetaNamespaceKey(key)
		if err != nil || ns != obj.GetNamespace() || name != obj.GetName() {
			t.Fatalf("Split(%q) = %q, %q, %v; want %q, %q", key, ns, name, err, obj.GetNamespace(), obj.GetName())
		}
	}
}

// joinKey is what MetaNamespaceKeyFunc does, for the fuzz property.
func joinKey(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func FuzzSplitMetaNamespaceKey(f *testing.F) {
	for _, s := range []string{"", "name", "ns/name", "/", "/x", "x/", "a/b/c", "a//b", "ns/na me", "ünï/cödé"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		ns, name, err := SplitMetaNamespaceKey(key)
		if err != nil {
			if ns != "" || name != "" {
				t.Fatalf("Split(%q) failed but returned %q, %q", key, ns, name)
			}
			return
		}
		// Whatever splits joins back to the same key...
		if got := joinKey(ns, name); got != key {
			t.Fatalf("Split(%q) = %q, %q, which joins to %q", key, ns, name, got)
		}
		if name == "" || strings.Contains(name, "/") || strings.Contains(ns, "/") {
			t.Fatalf("Split(%q) = %q, %q: empty name or a slash left in a part", key, ns, name)
		}
		// ...and the key of an object with that namespace and name splits
		// back to them.
		k, err := MetaNamespaceKeyFunc(testPod(ns, name))
		if err != nil || k != key {
			t.Fatalf("MetaNamespaceKeyFunc(%q, %q) = %q, %v; want %q", ns, name, k, err, key)
		}
	})
}
