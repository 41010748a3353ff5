package kubeadapt

import (
	"fmt"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clientcache "k8s.io/client-go/tools/cache"

	"github.com/listwatch/listwatch/cache/cachetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a client-go handler that notes what it is told.
type recorder struct{ got []string }

func (r *recorder) OnAdd(obj any, initial bool) {
	r.got = append(r.got, fmt.Sprintf("add %s %v", obj.(*corev1.Service).Name, initial))
}
func (r *recorder) OnUpdate(_, cur any) {
	r.got = append(r.got, "update "+cur.(*corev1.Service).Name)
}
func (r *recorder) OnDelete(obj any) {
	switch o := obj.(type) {
	case *corev1.Service:
		r.got = append(r.got, "delete "+o.Name)
	case clientcache.DeletedFinalStateUnknown:
		r.got = append(r.got, fmt.Sprintf("delete unknown %s %s", o.Key, o.Obj.(*corev1.Service).Name))
	default:
		r.got = append(r.got, fmt.Sprintf("delete %T", obj))
	}
}

func svc(name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": name}}}
}

// TestInformer: client-go handlers registered through the adapter get
// listwatch's notifications, a delete whose final state is unknown as
// client-go's DeletedFinalStateUnknown; removed, they get none.
func TestInformer(t *testing.T) {
	fake := cachetest.NewInformer(svc("a"))
	inf := ServiceInformer{Inf: fake}
	var r recorder
	reg, err := inf.Informer().AddEventHandler(&r)
	if err != nil {
		t.Fatal(err)
	}
	if !reg.HasSynced() || !inf.Informer().HasSynced() {
		t.Error("not synced")
	}
	steps := []struct {
		name string
		do   func() error
		want string
	}{
		{"add", func() error { return fake.Add(svc("b")) }, "add b false"},
		{"update", func() error { return fake.Update(svc("b")) }, "update b"},
		{"delete", func() error { return fake.Delete(svc("b"), false) }, "delete b"},
		{"delete, final state unknown", func() error { return fake.Delete(svc("a"), true) }, "delete unknown ns/a a"},
	}
	for _, st := range steps {
		before := len(r.got)
		if err := st.do(); err != nil {
			t.Fatal(err)
		}
		if got := r.got[before:]; len(got) != 1 || got[0] != st.want {
			t.Errorf("%s: told %v, want [%s]", st.name, got, st.want)
		}
	}
	if r.got[0] != "add a true" {
		t.Errorf("first notification %q, want the initial list's add of a", r.got[0])
	}
	if err := inf.Informer().RemoveEventHandler(reg); err != nil {
		t.Fatal(err)
	}
	if fake.Handlers() != 0 {
		t.Errorf("%d handlers after removal", fake.Handlers())
	}
	if err := inf.Informer().RemoveEventHandler(nil); err == nil {
		t.Error("removing a registration of no adapter succeeded")
	}
}

// TestListers: the typed listers read the informer's cache.
func TestListers(t *testing.T) {
	fake := cachetest.NewInformer(svc("a"), svc("b"))
	l := ServiceInformer{Inf: fake}.Lister()
	tests := []struct {
		name string
		list func() (int, error)
		want int
	}{
		{"all", func() (int, error) { s, err := l.List(labels.Everything()); return len(s), err }, 2},
		{"namespace, selected", func() (int, error) {
			s, err := l.Services("ns").List(labels.SelectorFromSet(labels.Set{"app": "a"}))
			return len(s), err
		}, 1},
		{"other namespace", func() (int, error) { s, err := l.Services("other").List(labels.Everything()); return len(s), err }, 0},
	}
	for _, tt := range tests {
		if n, err := tt.list(); err != nil || n != tt.want {
			t.Errorf("%s: %d, %v; want %d", tt.name, n, err, tt.want)
		}
	}
	if s, err := l.Services("ns").Get("b"); err != nil || s.Name != "b" {
		t.Errorf("Get: %v, %v", s, err)
	}
}
