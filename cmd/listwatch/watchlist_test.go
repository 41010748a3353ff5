package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/informers"
)

// The server the streaming-list test runs against when not `up`:
// hack/watchlist-kube.sh starts a real kube-apiserver and sets these.
const (
	// externalKubeconfigEnv names a kubeconfig of a server to test.
	externalKubeconfigEnv = "LISTWATCH_TEST_KUBECONFIG"
	// externalWatchListEnv says whether that server has streaming lists
	// on ("true") or off ("false", --feature-gates=WatchList=false).
	externalWatchListEnv = "LISTWATCH_TEST_WATCHLIST"
)

// TestInformerStartsWithAStreamingList: an informer made the default way
// fills its cache from a streaming list, with no LIST request in the
// server's apiserver_request_total; against a server with streaming lists
// off (--feature-gates=WatchList=false) its one watch is refused with 422
// and it lists instead. Run against `up` here, and against a real
// kube-apiserver v1.37 by hack/watchlist-kube.sh.
func TestInformerStartsWithAStreamingList(t *testing.T) {
	type target struct {
		name       string
		kubeconfig func(t *testing.T) string
		watchList  bool
		// controllers says the server runs a controller-manager, whose
		// garbage collector watches every resource.
		controllers bool
	}
	var targets []target
	if path := os.Getenv(externalKubeconfigEnv); path != "" {
		on, err := strconv.ParseBool(os.Getenv(externalWatchListEnv))
		if err != nil {
			t.Fatalf("%s=%q: want true or false", externalWatchListEnv, os.Getenv(externalWatchListEnv))
		}
		targets = append(targets, target{"external", func(*testing.T) string { return path }, on, false})
	} else {
		for _, on := range []bool{true, false} {
			targets = append(targets, target{fmt.Sprintf("up/WatchList=%v", on), func(t *testing.T) string {
				u := startUp(t, upConfig{Dir: t.TempDir(), StorageBackend: backendMemory, DisableWatchList: !on})
				t.Cleanup(func() {
					if err := u.stop(); err != nil {
						t.Error(err)
					}
				})
				return u.kubeconfig
			}, on, true})
		}
	}
	for _, tc := range targets {
		t.Run(tc.name, func(t *testing.T) {
			kubeconfig := tc.kubeconfig(t)
			cfg, err := client.LoadConfig(client.LoadOptions{Kubeconfig: kubeconfig})
			if err != nil {
				t.Fatal(err)
			}
			c, err := client.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.CloseIdleConnections)
			ctx := t.Context()
			ns := fmt.Sprintf("watchlist-%d", time.Now().UnixNano())
			namespaces := client.NewResource[*corev1.Namespace](c, corev1.SchemeGroupVersion.WithResource("namespaces"), "")
			if _, err := namespaces.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = namespaces.Delete(context.WithoutCancel(ctx), ns, metav1.DeleteOptions{}) })
			// Pod templates: nothing else in a cluster lists or watches them,
			// so the counts below are this informer's alone.
			templates := client.NewResource[*corev1.PodTemplate](c, corev1.SchemeGroupVersion.WithResource("podtemplates"), ns)
			const n = 7
			for i := range n {
				tpl := &corev1.PodTemplate{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t%d", i)},
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
						Containers: []corev1.Container{{Name: "main", Image: "busybox"}},
					}},
				}
				if _, err := templates.Create(ctx, tpl, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			metrics, base := kubeClient(t, kubeconfig)
			before := podTemplateRequests(t, metrics, base)
			if tc.controllers {
				// The garbage collector's own watch of pod templates, and its
				// list where streaming is off, come first.
				deadline := time.Now().Add(30 * time.Second)
				for before.open["WATCH"] < 1 {
					if time.Now().After(deadline) {
						t.Fatalf("the garbage collector's watch of pod templates did not open: %+v", before)
					}
					time.Sleep(20 * time.Millisecond)
					before = podTemplateRequests(t, metrics, base)
				}
			}

			f := informers.NewSharedInformerFactory(c, informers.Options{Namespace: ns})
			inf := informers.For[*corev1.PodTemplate](f)
			f.Start(ctx)
			t.Cleanup(f.Shutdown)
			if synced := f.WaitForCacheSync(ctx); !synced[corev1.SchemeGroupVersion.WithResource("podtemplates")] {
				t.Fatalf("informer did not sync: %v", synced)
			}
			if got := len(inf.GetStore().List()); got != n {
				t.Fatalf("cache holds %d pod templates, want %d", got, n)
			}

			after := podTemplateRequests(t, metrics, base)
			delta := func(verb, code string) int {
				k := verb + " " + code
				return after.total[k] - before.total[k]
			}
			t.Logf("pod template requests during the sync: %+v (before %+v)", after, before)
			// A watch is counted in apiserver_request_total when it ends;
			// while open, in apiserver_longrunning_requests.
			if d := after.open["WATCH"] - before.open["WATCH"]; d != 1 {
				t.Errorf("%d more watches open, want the informer's one", d)
			}
			if d := delta("LIST", "200"); tc.watchList && d != 0 {
				t.Errorf("%d LIST requests, want none: the cache must come from a streaming list", d)
			}
			if tc.watchList {
				return
			}
			if d := delta("WATCH", "422"); d != 1 {
				t.Errorf("%d WATCH requests answered 422, want the refused streaming list", d)
			}
			if d := delta("LIST", "200"); d != 1 {
				t.Errorf("%d LIST requests, want the fallback's one", d)
			}
		})
	}
}

// requestMetric matches a sample of apiserver_request_total or
// apiserver_longrunning_requests, in kube's label set or listwatch's
// smaller one.
var requestMetric = regexp.MustCompile(`^(apiserver_request_total|apiserver_longrunning_requests)\{(.*)\} ([0-9.e+]+)$`)

// requests are a server's request metrics for one resource.
type requests struct {
	// total is apiserver_request_total by "VERB code".
	total map[string]int
	// open is apiserver_longrunning_requests by verb.
	open map[string]int
}

// podTemplateRequests scrapes the server's /metrics for its request
// metrics of pod templates.
func podTemplateRequests(t *testing.T, c *http.Client, base string) requests {
	t.Helper()
	resp, err := c.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	out := requests{total: map[string]int{}, open: map[string]int{}}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := requestMetric.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(m[2], ",") {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = strings.Trim(v, `"`)
		}
		if labels["resource"] != "podtemplates" || labels["subresource"] != "" {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		if m[1] == "apiserver_request_total" {
			out.total[labels["verb"]+" "+labels["code"]] += int(v)
		} else {
			out.open[labels["verb"]] += int(v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
