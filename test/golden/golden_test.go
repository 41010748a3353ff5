package golden

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/apiserver/filters"
	"github.com/listwatch/listwatch/internal/runtest"
	"github.com/listwatch/listwatch/internal/testbackends"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/etcd"
	"github.com/listwatch/listwatch/storage/memory"
)

var updateKnown = flag.Bool("update-known", false, "rewrite testdata/known-divergent.txt from this run's results instead of failing on divergent steps")

const (
	casesDir    = "cases"
	testdataDir = "testdata"
	knownFile   = "known-divergent.txt"
	// token authenticates the runner as the recorder's user: name golden,
	// uid golden-uid, in system:masters (objects such as
	// CertificateSigningRequests record who asked).
	token = "golden-test-token"
)

func TestMain(m *testing.M) {
	os.Exit(testbackends.Run(m))
}

// backends are the storage backends the goldens are replayed on.
var backends = []struct {
	name string
	new  func(t *testing.T) storage.Interface
}{
	{"memory", func(t *testing.T) storage.Interface {
		s := memory.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	}},
	{"etcd", func(t *testing.T) storage.Interface {
		member, err := etcd.StartEmbedded(t.Context(), etcd.EmbeddedConfig{Dir: t.TempDir(), UnsafeNoFsync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := member.Close(); err != nil {
				t.Error(err)
			}
		})
		cfg := member.ClientConfig()
		cfg.Prefix = "/registry"
		s, err := etcd.New(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}},
}

// startServer serves listwatch's API over st on 127.0.0.1 behind the
// filters `listwatch apiserver` has (token authentication among them),
// with the namespace "default" created, as kube-apiserver has it.
func startServer(t *testing.T, st storage.Interface) Target {
	t.Helper()
	api, err := apiserver.New(apiserver.Config{Storage: st})
	if err != nil {
		t.Fatal(err)
	}
	stopAPI := runtest.Start(t, api)
	var tokens filters.TokenFile
	if err := tokens.Add(token, filters.User{Name: "golden", UID: "golden-uid", Groups: []string{"system:masters"}}); err != nil {
		t.Fatal(err)
	}
	shutdown, endWatches := context.WithCancel(context.Background())
	hs := httptest.NewServer(filters.Chain(api.Handler(), filters.Options{
		Authenticator:               &tokens,
		Authorizer:                  api.Authorizer(),
		MaxRequestsInFlight:         filters.DefaultMaxRequestsInFlight,
		MaxMutatingRequestsInFlight: filters.DefaultMaxMutatingRequestsInFlight,
		Shutdown:                    shutdown,
	}))
	tr := http.DefaultTransport.(*http.Transport).Clone()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		endWatches()
		hs.CloseClientConnections()
		hs.Close()
		stopAPI()
	})
	// The steps made as other users need the bootstrap RBAC policy and
	// the authorizer's informers, as kube-apiserver's /readyz does.
	if err := api.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	target := Target{URL: hs.URL, Client: client, Token: token}
	r := &run{t: target}
	ns := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "default"}}
	if code, body, err := r.raw(t.Context(), http.MethodPost, "/api/v1/namespaces", "", ns); err != nil || code != http.StatusCreated && code != http.StatusConflict {
		t.Fatalf("create namespace default: %v", setupError("create", code, body, err))
	}
	return target
}

// goldens reads the golden of every case and checks that each was
// recorded from the case file as it stands; it fails the test for a case
// with no golden, a golden with no case, and a case edited since its
// golden was recorded. The cases returned are those that can be compared.
func goldens(t *testing.T, cases []*Case) map[string]*Record {
	t.Helper()
	out := map[string]*Record{}
	names := map[string]bool{}
	for _, c := range cases {
		names[c.Name] = true
		rec, err := ReadRecord(filepath.Join(testdataDir, c.Name+".json"))
		if err != nil {
			t.Errorf("%s: no golden (record it with hack/record-goldens.sh %s): %v", c.Name, c.Name, err)
			continue
		}
		stale := len(rec.Steps) != len(c.Steps)
		for i := 0; !stale && i < len(c.Steps); i++ {
			stale = rec.Steps[i].Name != c.Steps[i].Name || !c.Steps[i].SameRequest(rec.Steps[i].Request)
		}
		if stale {
			t.Errorf("%s: the case file changed since its golden was recorded; record it again with hack/record-goldens.sh %s", c.Name, c.Name)
			continue
		}
		out[c.Name] = rec
	}
	files, err := filepath.Glob(filepath.Join(testdataDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".json"); !names[name] {
			t.Errorf("%s: golden with no case file %s.yaml; remove it", f, name)
		}
	}
	return out
}

// readKnown reads the known-divergent step IDs: one per line, # comments.
func readKnown(t *testing.T) map[string]bool {
	t.Helper()
	known := map[string]bool{}
	f, err := os.Open(filepath.Join(testdataDir, knownFile))
	if errors.Is(err, os.ErrNotExist) {
		return known
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			known[line] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return known
}

func writeKnown(ids map[string]bool) error {
	var b strings.Builder
	b.WriteString("# Golden steps (case:step) on which listwatch's answer differs from kube-apiserver's\n")
	b.WriteString("# on at least one storage backend. The test fails when a step not listed here\n")
	b.WriteString("# differs; `go test ./test/golden -update-known` rewrites this file.\n")
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		b.WriteString(id)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(testdataDir, knownFile), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", knownFile, err)
	}
	return nil
}

// remask masks a golden answer again with the fixed rules, so that a rule
// added since the recording applies to old goldens too.
func remask(r Response) Response {
	m := NewMasker("")
	r.Body = m.Mask(r.Body)
	r.Text = m.String(r.Text)
	return r
}

func TestGolden(t *testing.T) {
	cases, err := LoadCases(casesDir)
	if err != nil {
		t.Fatal(err)
	}
	recorded := goldens(t, cases)
	known := readKnown(t)
	divergent := map[string]bool{}
	ran := 0
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			target := startServer(t, b.new(t))
			began := time.Now()
			var steps, match, knownDiv int
			for _, c := range cases {
				rec, err := Run(t.Context(), target, c)
				if err != nil {
					if t.Context().Err() != nil {
						t.Fatal(err)
					}
					// The steps run all the same, and are compared.
					t.Logf("%v", err)
				}
				g := recorded[c.Name]
				if g == nil {
					continue
				}
				for i, s := range rec.Steps {
					id := ID(c.Name, s.Name)
					steps++
					want := remask(g.Steps[i].Response)
					diff := Diff(want, s.Response)
					if s.Request.Warnings {
						diff = append(diff, DiffWarnings(want.Warnings, s.Response.Warnings)...)
					}
					if len(diff) == 0 {
						match++
						if known[id] {
							t.Logf("known-divergent %s now matches kube-apiserver on %s: take it off %s (-update-known)", id, b.name, knownFile)
						}
						continue
					}
					divergent[id] = true
					if known[id] {
						knownDiv++
						continue
					}
					if !*updateKnown {
						t.Errorf("%s differs from %s:\n  %s %s\n  kube:      %s\n  listwatch: %s\n  %s",
							id, g.Server, s.Request.Method, s.Request.Path, Summary(want), Summary(s.Response), strings.Join(diff, "\n  "))
					}
				}
			}
			t.Logf("golden: %d steps, %d match, %d known-divergent (%s, %v)", steps, match, knownDiv, b.name, time.Since(began).Round(time.Millisecond))
			ran++
		})
	}
	if *updateKnown {
		if ran != len(backends) {
			t.Fatalf("-update-known needs every backend's results; %d of %d ran", ran, len(backends))
		}
		if err := writeKnown(divergent); err != nil {
			t.Fatal(err)
		}
		added, removed := 0, 0
		for id := range divergent {
			if !known[id] {
				added++
			}
		}
		for id := range known {
			if !divergent[id] {
				removed++
			}
		}
		t.Logf("%s: %d steps (%d added, %d removed)", knownFile, len(divergent), added, removed)
	}
}
