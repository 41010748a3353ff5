package serviceaccount

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/controller"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeAPI creates accounts in an in-memory source the controller's
// informer watches, failing the first creates with fail.
type fakeAPI struct {
	accounts *cachetest.Source[*corev1.ServiceAccount]
	mu       sync.Mutex
	fail     []error
	creates  []string
}

func (f *fakeAPI) Create(_ context.Context, sa *corev1.ServiceAccount) (*corev1.ServiceAccount, error) {
	f.mu.Lock()
	f.creates = append(f.creates, sa.Namespace+"/"+sa.Name)
	var err error
	if len(f.fail) > 0 {
		err, f.fail = f.fail[0], f.fail[1:]
	}
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return f.accounts.Create(sa)
}

func (f *fakeAPI) created() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.creates)
}

func namespace(name string, phase corev1.NamespacePhase) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NamespaceStatus{Phase: phase}}
}

func account(ns, name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func terminating(ns string) error {
	err := apierrors.NewForbidden(corev1.Resource("serviceaccounts"), "default", fmt.Errorf("namespace %s is being terminated", ns))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: corev1.NamespaceTerminatingCause})
	return err
}

func TestController(t *testing.T) {
	tests := []struct {
		name       string
		namespaces []*corev1.Namespace
		accounts   []*corev1.ServiceAccount
		names      []string
		fail       []error
		// then runs once the controller has settled, before it settles
		// again.
		then func(api *fakeAPI)
		// wantAccounts are the accounts that must come to exist;
		// wantCreates the creates asked, in any order.
		wantAccounts []string
		wantCreates  []string
	}{
		{
			name:         "an active namespace gets the default account",
			namespaces:   []*corev1.Namespace{namespace("a", corev1.NamespaceActive)},
			wantAccounts: []string{"a/default"},
			wantCreates:  []string{"a/default"},
		},
		{
			name:         "an account that exists is left alone",
			namespaces:   []*corev1.Namespace{namespace("a", corev1.NamespaceActive)},
			accounts:     []*corev1.ServiceAccount{account("a", "default")},
			wantAccounts: []string{"a/default"},
		},
		{
			name:       "a terminating namespace gets none",
			namespaces: []*corev1.Namespace{namespace("a", corev1.NamespaceTerminating)},
		},
		{
			name:         "several names",
			namespaces:   []*corev1.Namespace{namespace("a", corev1.NamespaceActive), namespace("b", corev1.NamespaceActive)},
			names:        []string{"default", "builder"},
			wantAccounts: []string{"a/builder", "a/default", "b/builder", "b/default"},
			wantCreates:  []string{"a/builder", "a/default", "b/builder", "b/default"},
		},
		{
			name:         "a deleted account comes back",
			namespaces:   []*corev1.Namespace{namespace("a", corev1.NamespaceActive)},
			accounts:     []*corev1.ServiceAccount{account("a", "default")},
			then:         func(api *fakeAPI) { _, _ = api.accounts.Delete("a", "default") },
			wantAccounts: []string{"a/default"},
			wantCreates:  []string{"a/default"},
		},
		{
			name:         "a failed create is retried",
			namespaces:   []*corev1.Namespace{namespace("a", corev1.NamespaceActive)},
			fail:         []error{apierrors.NewInternalError(errors.New("etcd is down"))},
			wantAccounts: []string{"a/default"},
			wantCreates:  []string{"a/default", "a/default"},
		},
		{
			name:        "a namespace terminating meanwhile is not retried",
			namespaces:  []*corev1.Namespace{namespace("a", corev1.NamespaceActive)},
			fail:        []error{terminating("a")},
			wantCreates: []string{"a/default"},
		},
		{
			name:        "an account created meanwhile is not retried",
			namespaces:  []*corev1.Namespace{namespace("a", corev1.NamespaceActive)},
			fail:        []error{apierrors.NewAlreadyExists(corev1.Resource("serviceaccounts"), "default")},
			wantCreates: []string{"a/default"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// In a synctest bubble: the controller has settled when every
			// goroutine is blocked with every retry's delay passed.
			synctest.Test(t, func(t *testing.T) {
				nss := cachetest.New[*corev1.Namespace]()
				for _, ns := range tt.namespaces {
					if _, err := nss.Create(ns); err != nil {
						t.Fatal(err)
					}
				}
				api := &fakeAPI{accounts: cachetest.New[*corev1.ServiceAccount](), fail: tt.fail}
				for _, sa := range tt.accounts {
					if _, err := api.accounts.Create(sa); err != nil {
						t.Fatal(err)
					}
				}
				opts := cache.SharedInformerOptions{Reflector: cache.ReflectorOptions{Logger: quiet}}
				nsInf := cache.NewSharedIndexInformer[*corev1.Namespace](nss, opts)
				saInf := cache.NewSharedIndexInformer[*corev1.ServiceAccount](api.accounts, opts)
				c, err := New(nsInf, saInf, api, Options{Names: tt.names, Controller: controller.Options{
					Logger: quiet, RetryBaseDelay: time.Millisecond, RetryMaxDelay: 10 * time.Millisecond,
				}})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				var wg sync.WaitGroup
				defer func() { cancel(); wg.Wait() }()
				wg.Go(func() { nsInf.Run(ctx) })
				wg.Go(func() { saInf.Run(ctx) })
				wg.Go(func() { _ = c.Run(ctx) })
				settle := func() {
					time.Sleep(time.Second)
					synctest.Wait()
				}
				settle()
				if tt.then != nil {
					tt.then(api)
					settle()
				}
				var got []string
				for _, sa := range api.accounts.Items() {
					got = append(got, sa.Namespace+"/"+sa.Name)
				}
				slices.Sort(got)
				creates := api.created()
				slices.Sort(creates)
				if !slices.Equal(got, tt.wantAccounts) || !slices.Equal(creates, tt.wantCreates) {
					t.Fatalf("accounts %v (want %v), creates %v (want %v)", got, tt.wantAccounts, creates, tt.wantCreates)
				}
			})
		})
	}
}

func TestNewRequiresItsParts(t *testing.T) {
	nsInf := cache.NewSharedIndexInformer[*corev1.Namespace](cachetest.New[*corev1.Namespace](), cache.SharedInformerOptions{})
	if _, err := New(nsInf, nil, &fakeAPI{}, Options{}); err == nil {
		t.Error("New accepted no service account informer")
	}
}
