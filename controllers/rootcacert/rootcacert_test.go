package rootcacert

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
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

const ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

// fakeAPI writes ConfigMaps into an in-memory source the controller's
// informer watches, failing the first writes with fail.
type fakeAPI struct {
	configMaps *cachetest.Source[*corev1.ConfigMap]
	mu         sync.Mutex
	fail       []error
	writes     int
}

func (f *fakeAPI) next() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	if len(f.fail) == 0 {
		return nil
	}
	err := f.fail[0]
	f.fail = f.fail[1:]
	return err
}

func (f *fakeAPI) Create(_ context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	if err := f.next(); err != nil {
		return nil, err
	}
	return f.configMaps.Create(cm)
}

func (f *fakeAPI) Update(_ context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	if err := f.next(); err != nil {
		return nil, err
	}
	return f.configMaps.Update(cm)
}

func (f *fakeAPI) writeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes
}

func published(ns string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ConfigMapName, Annotations: map[string]string{DescriptionAnnotation: Description}},
		Data:       map[string]string{DataKey: ca},
	}
}

func TestController(t *testing.T) {
	tests := []struct {
		name       string
		configMaps []*corev1.ConfigMap
		fail       []error
		// then changes the world once the controller has synced.
		then func(api *fakeAPI)
		// want is the ConfigMap kube-root-ca.crt of namespace "a" in the
		// end (nil: none); wantWrites the creates and updates asked (after
		// then, when there is one).
		want       *corev1.ConfigMap
		wantWrites int
	}{
		{name: "published into a new namespace", want: published("a"), wantWrites: 1},
		{name: "one already published is left alone", configMaps: []*corev1.ConfigMap{published("a")}, want: published("a")},
		{
			name: "other data is put back",
			configMaps: []*corev1.ConfigMap{{
				ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: ConfigMapName, Labels: map[string]string{"kept": "yes"}},
				Data:       map[string]string{DataKey: "stale", "extra": "x"},
			}},
			want: func() *corev1.ConfigMap {
				cm := published("a")
				cm.Labels = map[string]string{"kept": "yes"}
				return cm
			}(),
			wantWrites: 1,
		},
		{
			name:       "an edit is undone",
			configMaps: []*corev1.ConfigMap{published("a")},
			then: func(api *fakeAPI) {
				cm := published("a")
				cm.Data[DataKey] = "tampered"
				_, _ = api.configMaps.Update(cm)
			},
			want:       published("a"),
			wantWrites: 1,
		},
		{
			name:       "a delete is undone",
			configMaps: []*corev1.ConfigMap{published("a")},
			then:       func(api *fakeAPI) { _, _ = api.configMaps.Delete("a", ConfigMapName) },
			want:       published("a"),
			wantWrites: 1,
		},
		{
			name: "other ConfigMaps are not looked at",
			then: func(api *fakeAPI) {
				_, _ = api.configMaps.Create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "other"}})
			},
			want: published("a"),
		},
		{
			name:       "a failed create is retried",
			fail:       []error{apierrors.NewServiceUnavailable("try again")},
			want:       published("a"),
			wantWrites: 2,
		},
		{
			name:       "a namespace gone meanwhile is not retried",
			fail:       []error{apierrors.NewNotFound(corev1.Resource("namespaces"), "a")},
			wantWrites: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runPublisherCase(t, tt.configMaps, tt.fail, tt.then, tt.want, tt.wantWrites) })
		})
	}
}

// runPublisherCase runs the controller over namespace "a" and
// configMaps, its first writes failing with fail, applies then once the
// ConfigMap is published, and checks that the controller settles on want
// after wantWrites writes (then's own not counted). In a synctest bubble:
// settling is every goroutine blocked with every retry's delay passed.
func runPublisherCase(t *testing.T, configMaps []*corev1.ConfigMap, fail []error, then func(*fakeAPI), want *corev1.ConfigMap, wantWrites int) {
	nss := cachetest.New[*corev1.Namespace]()
	if _, err := nss.Create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}); err != nil {
		t.Fatal(err)
	}
	api := &fakeAPI{configMaps: cachetest.New[*corev1.ConfigMap](), fail: fail}
	for _, cm := range configMaps {
		if _, err := api.configMaps.Create(cm); err != nil {
			t.Fatal(err)
		}
	}
	nsInf := cache.NewSharedIndexInformer[*corev1.Namespace](nss, cache.SharedInformerOptions{Reflector: cache.ReflectorOptions{Logger: quiet}})
	cmInf := cache.NewSharedIndexInformer[*corev1.ConfigMap](api.configMaps, cache.SharedInformerOptions{Reflector: cache.ReflectorOptions{Logger: quiet}})
	c, err := New(nsInf, cmInf, api, []byte(ca), Options{Controller: controller.Options{
		Logger: quiet, RetryBaseDelay: time.Millisecond, RetryMaxDelay: 10 * time.Millisecond,
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() { nsInf.Run(ctx) })
	wg.Go(func() { cmInf.Run(ctx) })
	wg.Go(func() { _ = c.Run(ctx) })
	settle := func() {
		time.Sleep(time.Second)
		synctest.Wait()
	}
	settle()
	if then != nil {
		// The change comes after the controller's first pass, once the
		// ConfigMap is published: the writes of that pass are counted
		// before it.
		if got, _ := api.configMaps.Get("a", ConfigMapName); !same(got, published("a")) {
			t.Fatalf("ConfigMap %+v not published before the change", got)
		}
		before := api.writeCount()
		then(api)
		wantWrites += before
		settle()
	}
	if got, _ := api.configMaps.Get("a", ConfigMapName); !same(got, want) || api.writeCount() != wantWrites {
		t.Fatalf("ConfigMap %+v (want %+v), %d writes (want %d)", got, want, api.writeCount(), wantWrites)
	}
}

// same compares what the controller owns of a ConfigMap, and its labels.
func same(got, want *corev1.ConfigMap) bool {
	if got == nil || want == nil {
		return got == want
	}
	return maps.Equal(got.Data, want.Data) && maps.Equal(got.Annotations, want.Annotations) && maps.Equal(got.Labels, want.Labels)
}

func TestNewRequiresARootCA(t *testing.T) {
	nsInf := cache.NewSharedIndexInformer[*corev1.Namespace](cachetest.New[*corev1.Namespace](), cache.SharedInformerOptions{})
	cmInf := cache.NewSharedIndexInformer[*corev1.ConfigMap](cachetest.New[*corev1.ConfigMap](), cache.SharedInformerOptions{})
	if _, err := New(nsInf, cmInf, &fakeAPI{}, nil, Options{}); err == nil {
		t.Error("New accepted no root CA")
	}
	if _, err := New(nsInf, cmInf, &fakeAPI{}, []byte(ca), Options{}); err != nil {
		t.Error(errors.Unwrap(err))
	}
}
