package jsondecode

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsjson "sigs.k8s.io/json"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// oracle decodes as the Kubernetes API machinery does: encoding/json with
// case-sensitive keys.
func oracle(data []byte, v any) error {
	return sigsjson.UnmarshalCaseSensitivePreserveInts(data, v)
}

type Inner struct {
	A string `json:"a"`
	B int    `json:"b,omitempty"`
}

type Embedded struct {
	E string `json:"e"`
	X string `json:"x"` // shadowed by Outer.X
}

type Outer struct {
	Inner `json:",inline"`
	*Embedded
	X       string            `json:"x"`
	Skip    string            `json:"-"`
	NoTag   string            //
	Ptr     *Inner            `json:"ptr"`
	List    []Inner           `json:"list"`
	Bytes   []byte            `json:"bytes"`
	Map     map[string]string `json:"map"`
	Nums    map[string]int64  `json:"nums"`
	F32     float32           `json:"f32"`
	U8      uint8             `json:"u8"`
	I8      int8              `json:"i8"`
	Any     any               `json:"any"`
	Arr     [2]int            `json:"arr"`
	Flag    bool              `json:"flag"`
	IOS     intstr.IntOrString
	IOSPtr  *intstr.IntOrString `json:"iosPtr"`
	Time    metav1.Time         `json:"time"`
	TimePtr *metav1.Time        `json:"timePtr"`
	Micro   metav1.MicroTime    `json:"micro"`
	Q       resource.Quantity   `json:"q"`
	Dur     metav1.Duration     `json:"dur"`
	Self    *Outer              `json:"self"`
}

func TestMatchesEncodingJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		into func() any
	}{
		{"inline and embedded", `{"a":"x","b":2,"e":"emb","x":"own","NoTag":"n","Skip":"no"}`, func() any { return new(Outer) }},
		{"nested and pointers", `{"ptr":{"a":"p"},"self":{"ptr":null,"self":{"a":"deep"}},"list":[{"a":"1"},{"a":"2","b":3}],"timePtr":null}`, func() any { return new(Outer) }},
		{"scalars", `{"f32":1.5e3,"u8":255,"i8":-128,"flag":true,"arr":[1,2],"any":{"k":[1,"s",null,true,2.5]}}`, func() any { return new(Outer) }},
		{"bytes and maps", `{"bytes":"aGVsbG8=","map":{"k":"v","e":"","é":"ü"},"nums":{"a":1,"b":-2}}`, func() any { return new(Outer) }},
		{"empty and null", `{"list":[],"map":{},"bytes":null,"ptr":null,"a":null,"flag":null,"IOS":null}`, func() any { return new(Outer) }},
		{"escapes", `{"a":"q\"b\\s\/n\n\t\r\b\f\u00e9\u4e2d\ud83d\ude00 lone\ud800 end","x":"\u0000"}`, func() any { return new(Outer) }},
		{"invalid utf8", "{\"a\":\"\xff\xfe ok\",\"map\":{\"\xc3\":\"\xc3\\n\"}}", func() any { return new(Outer) }},
		{"kubernetes types", `{"IOS":"80%","iosPtr":8080,"time":"2026-01-02T03:04:05Z","micro":"2026-01-02T03:04:05.123456Z","q":"100m","dur":"1m30s"}`, func() any { return new(Outer) }},
		{"int or string int", `{"IOS":42}`, func() any { return new(Outer) }},
		{"duplicate keys", `{"a":"first","a":"second","list":[{"a":"1"}],"list":[{"b":2}],"map":{"k":"1"},"map":{"j":"2"}}`, func() any { return new(Outer) }},
		{"unknown fields", `{"zzz":{"deep":[1,{"x":null}]},"a":"kept","A":"case differs"}`, func() any { return new(Outer) }},
		{"whitespace", " \n\t{ \"a\" : \"x\" , \"list\" : [ { } , { \"b\" : 1 } ] } \r\n", func() any { return new(Outer) }},
		{"pod", podJSON, func() any { return new(corev1.Pod) }},
		{"deployment", `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"d","generation":3},"spec":{"replicas":3,"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":"25%","maxUnavailable":1}},"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"i"}]}}},"status":{"replicas":3,"conditions":[{"type":"Available","status":"True","lastUpdateTime":"2026-01-02T03:04:05Z"}]}}`, func() any { return new(appsv1.Deployment) }},
		{"secret", `{"kind":"Secret","metadata":{"name":"s"},"data":{"k":"dmFsdWU=","e":""},"stringData":{"x":"y"},"type":"Opaque"}`, func() any { return new(corev1.Secret) }},
		{"event", `{"metadata":{"name":"e"},"eventTime":"2026-01-02T03:04:05.000001Z","series":{"count":2,"lastObservedTime":"2026-01-02T03:04:05.500000Z"},"involvedObject":{"kind":"Pod","name":"p"},"count":3}`, func() any { return new(corev1.Event) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, got := tc.into(), tc.into()
			if err := oracle([]byte(tc.in), want); err != nil {
				t.Fatalf("oracle: %v", err)
			}
			if err := Unmarshal([]byte(tc.in), got); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !apiequality.Semantic.DeepEqual(got, want) {
				t.Fatalf("differs from encoding/json:\n got %+v\nwant %+v", got, want)
			}
			var d Decoder
			got2 := tc.into()
			if err := d.Unmarshal([]byte(tc.in), got2); err != nil || !apiequality.Semantic.DeepEqual(got2, want) {
				t.Fatalf("Decoder: %v\n got %+v", err, got2)
			}
		})
	}
}

func TestRejectsWhatEncodingJSONRejects(t *testing.T) {
	for _, in := range []string{
		``, ` `, `{`, `{"a"`, `{"a":`, `{"a":"x"`, `{"a":"x",}`, `{"a" "x"}`, `{a:"x"}`, `{"a":"x"}}`, `{"a":"x"} {}`,
		`{"a":'x'}`, `{"list":[1,]}`, `{"list":[{"a":"x"}`, `{"b":01}`, `{"b":1.}`, `{"b":-}`, `{"b":1e}`, `{"b":+1}`,
		`{"a":"bad \x escape"}`, "{\"a\":\"ctl \x01\"}", `{"a":"\u12"}`, `{"zzz":[tru]}`, `{"zzz":nul}`, `{"a":1}`,
		`{"b":"1"}`, `{"b":1.5}`, `{"u8":256}`, `{"i8":-129}`, `{"u8":-1}`, `{"f32":1e39}`, `{"flag":"true"}`, `{"list":{}}`,
		`{"map":[]}`, `{"map":{"k":1}}`, `{"bytes":"not base64!"}`, `{"time":"yesterday"}`, `{"time":5}`, `{"q":"1.2.3"}`,
		`{"ptr":"x"}`, `[]`, `"str"`, `null x`, `{"IOS":true}`, `{"IOS":1.5}`, `{"zzz":"\ud800\u"}`,
	} {
		var want, got Outer
		oerr := oracle([]byte(in), &want)
		err := Unmarshal([]byte(in), &got)
		if (err == nil) != (oerr == nil) {
			t.Errorf("%q: got error %v, encoding/json %v", in, err, oerr)
		}
	}
}

func TestDeepNestingIsRefused(t *testing.T) {
	in := `{"zzz":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`
	var o Outer
	if err := Unmarshal([]byte(in), &o); err == nil {
		t.Fatal("20000 levels: no error")
	}
	self := strings.Repeat(`{"self":`, 20000) + "null" + strings.Repeat("}", 20000)
	if err := Unmarshal([]byte(self), &o); err == nil {
		t.Fatal("20000 levels of a recursive type: no error")
	}
}

func TestBadTarget(t *testing.T) {
	var o Outer
	if err := Unmarshal([]byte(`{}`), o); err == nil {
		t.Fatal("non-pointer: no error")
	}
	if err := Unmarshal([]byte(`{}`), (*Outer)(nil)); err == nil {
		t.Fatal("nil pointer: no error")
	}
}

// Interned strings are equal to what they stand for, and shared.
func TestDecoderInterns(t *testing.T) {
	var d Decoder
	var a, b corev1.Pod
	in := `{"metadata":{"namespace":"default","labels":{"app":"web"}}}`
	if err := d.Unmarshal([]byte(in), &a); err != nil {
		t.Fatal(err)
	}
	if err := d.Unmarshal([]byte(in), &b); err != nil {
		t.Fatal(err)
	}
	if a.Namespace != "default" || b.Labels["app"] != "web" {
		t.Fatalf("got %+v", b.ObjectMeta)
	}
	if unsafeData(a.Namespace) != unsafeData(b.Namespace) {
		t.Fatal("namespace not shared between objects")
	}
}

func unsafeData(s string) uintptr { return reflect.ValueOf(&s).Elem().Pointer() }

func FuzzUnmarshalMatchesEncodingJSON(f *testing.F) {
	f.Add([]byte(podJSON))
	f.Add([]byte(`{"a":"x","IOS":"1","list":[{"a":"\u00e9"}],"time":"2026-01-02T03:04:05Z","q":"1Gi","map":{"k":"v"}}`))
	f.Add([]byte(`{"self":{"self":{"ptr":{"b":1}}},"bytes":"AAEC","any":[1,{"x":null}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var want, got Outer
		oerr := oracle(data, &want)
		err := Unmarshal(data, &got)
		if (err == nil) != (oerr == nil) {
			t.Fatalf("%q: error %v, encoding/json %v", data, err, oerr)
		}
		if err == nil && !apiequality.Semantic.DeepEqual(got, want) {
			t.Fatalf("%q: differs:\n got %+v\nwant %+v", data, got, want)
		}
		var wp, gp corev1.Pod
		oerr = oracle(data, &wp)
		err = Unmarshal(data, &gp)
		if (err == nil) != (oerr == nil) {
			t.Fatalf("pod %q: error %v, encoding/json %v", data, err, oerr)
		}
		if err == nil && !apiequality.Semantic.DeepEqual(gp, wp) {
			t.Fatalf("pod %q: differs", data)
		}
	})
}

const podJSON = `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-0","generateName":"web-","namespace":"default","uid":"8c2f6b1e","resourceVersion":"12","creationTimestamp":"2026-01-02T03:04:05Z","labels":{"app":"web"},"annotations":{"a":"b"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web","uid":"5f1e","controller":true,"blockOwnerDeletion":true}],"managedFields":[{"manager":"kcm","operation":"Update","apiVersion":"v1","time":"2026-01-02T03:04:05Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:app":{}}}}}]},"spec":{"volumes":[{"name":"v","projected":{"sources":[{"serviceAccountToken":{"expirationSeconds":3607,"path":"token"}}],"defaultMode":420}}],"containers":[{"name":"web","image":"img:1","ports":[{"containerPort":8080,"protocol":"TCP"}],"resources":{"limits":{"memory":"256Mi"},"requests":{"cpu":"100m","memory":"128Mi"}},"readinessProbe":{"httpGet":{"path":"/healthz","port":8080,"scheme":"HTTP"},"timeoutSeconds":1,"periodSeconds":10},"imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"nodeName":"node-1","tolerations":[{"key":"k","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}],"priority":0,"enableServiceLinks":true},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-01-02T03:04:05Z"}],"hostIP":"10.0.0.1","podIP":"10.244.0.1","podIPs":[{"ip":"10.244.0.1"}],"startTime":"2026-01-02T03:04:05Z","containerStatuses":[{"name":"web","state":{"running":{"startedAt":"2026-01-02T03:04:05Z"}},"lastState":{},"ready":true,"restartCount":0,"image":"img:1","imageID":"sha","containerID":"containerd://1","started":true}],"qosClass":"Burstable"}}`

func TestSkipManagedFields(t *testing.T) {
	var want corev1.Pod
	if err := oracle([]byte(podJSON), &want); err != nil {
		t.Fatal(err)
	}
	if len(want.ManagedFields) == 0 {
		t.Fatal("the test pod has no managedFields")
	}
	want.ManagedFields = nil
	d := Decoder{SkipManagedFields: true}
	var got corev1.Pod
	if err := d.Unmarshal([]byte(podJSON), &got); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
}

// With Share, values spelled alike share one decoded value (maps included),
// decode as without it, and values spelled differently do not share.
func TestDecoderShares(t *testing.T) {
	d := Decoder{Share: true}
	var plain, a, b, c corev1.Pod
	if err := Unmarshal([]byte(podJSON), &plain); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*corev1.Pod{&a, &b} {
		if err := d.Unmarshal([]byte(podJSON), p); err != nil {
			t.Fatal(err)
		}
		if !apiequality.Semantic.DeepEqual(*p, plain) {
			t.Fatalf("shared decoding differs:\n%+v\n%+v", *p, plain)
		}
	}
	other := strings.Replace(podJSON, `"labels":{"app":"web"}`, `"labels":{"app":"db"}`, 1)
	if err := d.Unmarshal([]byte(other), &c); err != nil {
		t.Fatal(err)
	}
	mapPtr := func(m any) uintptr { return reflect.ValueOf(m).Pointer() }
	if mapPtr(a.Labels) != mapPtr(b.Labels) || mapPtr(a.Annotations) != mapPtr(b.Annotations) ||
		mapPtr(a.Spec.Containers[0].Resources.Requests) != mapPtr(b.Spec.Containers[0].Resources.Requests) {
		t.Error("values spelled alike not shared")
	}
	if mapPtr(a.Labels) == mapPtr(c.Labels) || c.Labels["app"] != "db" {
		t.Errorf("different labels shared: %v", c.Labels)
	}
	// Without Share, nothing is.
	var e, f corev1.Pod
	var plainDec Decoder
	for _, p := range []*corev1.Pod{&e, &f} {
		if err := plainDec.Unmarshal([]byte(podJSON), p); err != nil {
			t.Fatal(err)
		}
	}
	if mapPtr(e.Labels) == mapPtr(f.Labels) {
		t.Error("maps shared without Share")
	}
}

// A Decoder whose table of interned strings fills up empties it and goes
// on decoding every string right.
func TestDecoderInternTableRefills(t *testing.T) {
	var d Decoder
	for i := range 3*maxIntern + 5 {
		var got struct{ S, T string }
		in := fmt.Sprintf(`{"S":"s-%d","T":"same"}`, i)
		if err := d.Unmarshal([]byte(in), &got); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("s-%d", i); got.S != want || got.T != "same" {
			t.Fatalf("decoded %q, %q; want %q, %q", got.S, got.T, want, "same")
		}
		if len(d.intern) > maxIntern+2 {
			t.Fatalf("table of %d strings, more than %d", len(d.intern), maxIntern)
		}
	}
}
