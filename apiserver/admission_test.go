package apiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// newNamespace creates a namespace with the ServiceAccount "default" in
// it, as kube-controller-manager would make it.
func newNamespace(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	ctx := t.Context()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func pod(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

// TestAdmissionReadsOtherObjects runs kube's plugins that read other
// objects through the loopback client, on both backends: each case writes
// what the plugin reads, then creates a pod right away (the plugins must
// see the write at once) and checks what the plugin did.
func TestAdmissionReadsOtherObjects(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, c kubernetes.Interface, ns string)
		pod   func(ns string) *corev1.Pod
		// check looks at the created pod, or the error.
		check func(t *testing.T, p *corev1.Pod, err error)
	}{
		{
			name: "ServiceAccount: default account, token volume and mounts",
			pod:  func(string) *corev1.Pod { return pod("sa") },
			check: func(t *testing.T, p *corev1.Pod, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if p.Spec.ServiceAccountName != "default" || len(p.Spec.Volumes) != 1 ||
					!strings.HasPrefix(p.Spec.Volumes[0].Name, "kube-api-access-") || p.Spec.Volumes[0].Projected == nil ||
					len(p.Spec.Containers[0].VolumeMounts) != 1 ||
					p.Spec.Containers[0].VolumeMounts[0].MountPath != "/var/run/secrets/kubernetes.io/serviceaccount" {
					t.Errorf("spec: %+v", p.Spec)
				}
			},
		},
		{
			name: "ServiceAccount: a missing account is refused",
			pod: func(string) *corev1.Pod {
				return pod("missing-sa", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "missing" })
			},
			check: func(t *testing.T, _ *corev1.Pod, err error) {
				if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `serviceaccount "missing" not found`) {
					t.Errorf("err = %v", err)
				}
			},
		},
		{
			name: "ServiceAccount: no automount",
			setup: func(t *testing.T, c kubernetes.Interface, ns string) {
				no := false
				if _, err := c.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{
					ObjectMeta: metav1.ObjectMeta{Name: "quiet"}, AutomountServiceAccountToken: &no,
				}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			pod: func(string) *corev1.Pod {
				return pod("quiet", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "quiet" })
			},
			check: func(t *testing.T, p *corev1.Pod, err error) {
				if err != nil || len(p.Spec.Volumes) != 0 {
					t.Errorf("pod %v, err %v", p, err)
				}
			},
		},
		{
			name: "Priority: a system class",
			pod: func(string) *corev1.Pod {
				return pod("critical", func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-node-critical" })
			},
			check: func(t *testing.T, p *corev1.Pod, err error) {
				if err != nil || p.Spec.Priority == nil || *p.Spec.Priority != 2000001000 {
					t.Errorf("pod %v, err %v", p, err)
				}
			},
		},
		{
			name: "Priority: a class just created",
			setup: func(t *testing.T, c kubernetes.Interface, ns string) {
				if _, err := c.SchedulingV1().PriorityClasses().Create(t.Context(), &schedulingv1.PriorityClass{
					ObjectMeta: metav1.ObjectMeta{Name: ns + "-high"}, Value: 1000,
				}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			pod: func(ns string) *corev1.Pod {
				return pod("high", func(p *corev1.Pod) { p.Spec.PriorityClassName = ns + "-high" })
			},
			check: func(t *testing.T, p *corev1.Pod, err error) {
				if err != nil || p.Spec.Priority == nil || *p.Spec.Priority != 1000 {
					t.Errorf("pod %v, err %v", p, err)
				}
			},
		},
		{
			name: "LimitRanger: defaults of a LimitRange just created",
			setup: func(t *testing.T, c kubernetes.Interface, ns string) {
				if _, err := c.CoreV1().LimitRanges(ns).Create(t.Context(), &corev1.LimitRange{
					ObjectMeta: metav1.ObjectMeta{Name: "defaults"},
					Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
						Type:           corev1.LimitTypeContainer,
						Default:        corev1.ResourceList{corev1.ResourceCPU: apiresource.MustParse("500m")},
						DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: apiresource.MustParse("100m")},
					}}},
				}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			pod: func(string) *corev1.Pod { return pod("limited") },
			check: func(t *testing.T, p *corev1.Pod, err error) {
				if err != nil {
					t.Fatal(err)
				}
				r := p.Spec.Containers[0].Resources
				if r.Limits.Cpu().String() != "500m" || r.Requests.Cpu().String() != "100m" {
					t.Errorf("resources %+v", r)
				}
			},
		},
		{
			name: "RuntimeClass: overhead of a class just created",
			setup: func(t *testing.T, c kubernetes.Interface, ns string) {
				if _, err := c.NodeV1().RuntimeClasses().Create(t.Context(), &nodev1.RuntimeClass{
					ObjectMeta: metav1.ObjectMeta{Name: ns + "-sandbox"}, Handler: "runsc",
					Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceMemory: apiresource.MustParse("64Mi")}},
				}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			pod: func(ns string) *corev1.Pod {
				return pod("sandboxed", func(p *corev1.Pod) { name := ns + "-sandbox"; p.Spec.RuntimeClassName = &name })
			},
			check: func(t *testing.T, p *corev1.Pod, err error) {
				if err != nil || p.Spec.Overhead.Memory().String() != "64Mi" {
					t.Errorf("pod %v, err %v", p, err)
				}
			},
		},
		{
			name: "ResourceQuota: a quota just created refuses the pod over it",
			setup: func(t *testing.T, c kubernetes.Interface, ns string) {
				q, err := c.CoreV1().ResourceQuotas(ns).Create(t.Context(), &corev1.ResourceQuota{
					ObjectMeta: metav1.ObjectMeta{Name: "none"},
					Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: apiresource.MustParse("0")}},
				}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				// The quota controller's part: the status it has counted.
				q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: apiresource.MustParse("0")}}
				if _, err := c.CoreV1().ResourceQuotas(ns).UpdateStatus(t.Context(), q, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			pod: func(string) *corev1.Pod { return pod("over-quota") },
			check: func(t *testing.T, _ *corev1.Pod, err error) {
				if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: none") {
					t.Errorf("err = %v", err)
				}
			},
		},
	}
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			_, c := startServer(t, b.New(t), Config{})
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					ns := fmt.Sprintf("admission-%d", i)
					newNamespace(t, c, ns)
					if tt.setup != nil {
						tt.setup(t, c, ns)
					}
					got, err := c.CoreV1().Pods(ns).Create(t.Context(), tt.pod(ns), metav1.CreateOptions{})
					tt.check(t, got, err)
				})
			}
		})
	}
}

// TestResourceQuotaCharges checks that an admitted pod is charged to its
// namespace's quota: the plugin writes status.used through the loopback
// client.
func TestResourceQuotaCharges(t *testing.T) {
	_, c := startServer(t, backends[0].New(t), Config{})
	ctx := t.Context()
	newNamespace(t, c, "quota")
	q, err := c.CoreV1().ResourceQuotas("quota").Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: apiresource.MustParse("1")}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: apiresource.MustParse("0")}}
	if _, err := c.CoreV1().ResourceQuotas("quota").UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Pods("quota").Create(ctx, pod("first"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	q, err = c.CoreV1().ResourceQuotas("quota").Get(ctx, "pods", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if used := q.Status.Used[corev1.ResourcePods]; used.String() != "1" {
		t.Errorf("status.used.pods = %s, want 1", used.String())
	}
	if _, err := c.CoreV1().Pods("quota").Create(ctx, pod("second"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("second pod: %v, want Forbidden", err)
	}
}

func TestDisableAdmissionPlugins(t *testing.T) {
	tests := []struct {
		name     string
		disabled []string
		// wantErr: New refuses the configuration.
		wantErr bool
		// wantAccount is the pod's serviceAccountName.
		wantAccount string
	}{
		{name: "kube's default set", wantAccount: "default"},
		{name: "without ServiceAccount", disabled: []string{"ServiceAccount"}},
		{name: "an unknown plugin", disabled: []string{"NoSuchPlugin"}, wantErr: true},
		{name: "a plugin not run", disabled: []string{"AlwaysPullImages"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := backends[0].New(t)
			if tt.wantErr {
				if _, err := New(Config{Storage: st, DisableAdmissionPlugins: tt.disabled}); err == nil {
					t.Fatal("New accepted it")
				}
				return
			}
			_, c := startServer(t, st, Config{DisableAdmissionPlugins: tt.disabled})
			newNamespace(t, c, "ns")
			p, err := c.CoreV1().Pods("ns").Create(t.Context(), pod("p"), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Spec.ServiceAccountName != tt.wantAccount {
				t.Errorf("serviceAccountName %q, want %q", p.Spec.ServiceAccountName, tt.wantAccount)
			}
		})
	}
}

// TestLoopbackIdentity checks who the loopback client is: a
// CertificateSigningRequest records its requester.
func TestLoopbackIdentity(t *testing.T) {
	_, c := startServer(t, backends[0].New(t), Config{})
	csr, err := c.CertificatesV1().CertificateSigningRequests().Create(t.Context(), &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "who"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    testCSR(t),
			SignerName: "example.com/signer",
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if csr.Spec.Username != "system:apiserver" || !slices.Contains(csr.Spec.Groups, "system:masters") || !slices.Contains(csr.Spec.Groups, "system:authenticated") {
		t.Errorf("requester %q %v", csr.Spec.Username, csr.Spec.Groups)
	}
}

// testCSR is a PEM certificate request for CN=test.
func testCSR(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "test"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}
