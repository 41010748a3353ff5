package clientonly_test

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

const modulePath = "github.com/listwatch/listwatch"

// program is the consumer: every client-side package of listwatch, used
// as a controller uses them.
const program = `package main

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/informers"
	"github.com/listwatch/listwatch/workqueue"
)

func main() {
	cfg, err := client.LoadConfig(client.LoadOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c, err := client.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx := context.Background()
	f := informers.NewSharedInformerFactory(c, informers.Options{})
	pods := informers.For[*corev1.Pod](f)
	sync := func(ctx context.Context, key string) (controller.Result, error) {
		ns, name, err := cache.SplitMetaNamespaceKey(key)
		if err != nil {
			return controller.Result{}, controller.Terminal(err)
		}
		_, err = client.For[*corev1.Pod](c, ns).Get(ctx, name, metav1.GetOptions{})
		return controller.Result{}, err
	}
	ctrl, err := controller.New("pods", sync, controller.Options{RetryQPS: workqueue.DefaultQPS}, controller.For(pods))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	f.Start(ctx)
	_ = ctrl.Run(ctx)
}
`

// forbidden are what the program must not link: modules (go version -m)
// and packages (go list -deps).
var (
	forbiddenModules  = []string{"go.etcd.io/etcd/server/v3", "k8s.io/kubernetes"}
	forbiddenPackages = []string{modulePath + "/apiserver", modulePath + "/storage/etcd", "go.etcd.io/etcd/server/v3/embed"}
)

// TestClientOnlyProgram builds the consumer from a temporary module that
// requires this tree's module at a pseudo-version, served by a file-based
// GOPROXY: go get, go mod tidy (which loads the tests' dependencies of
// listwatch's packages too, and so fails when the module's requirements
// leave a version to a replace directive), go build, and then checks what
// the binary links.
func TestClientOnlyProgram(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	root := strings.TrimSuffix(run(t, ctx, goBin, "", nil, "env", "GOMOD"), "/go.mod")
	if root == "" || root == "/dev/null" {
		t.Fatal("not in the listwatch module")
	}
	downloads := filepath.Join(run(t, ctx, goBin, "", nil, "env", "GOMODCACHE"), "cache", "download")

	tmp := t.TempDir()
	proxy, modcache, consumer := filepath.Join(tmp, "proxy"), filepath.Join(tmp, "modcache"), filepath.Join(tmp, "consumer")
	version, err := serveModule(root, proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("serving %s as %s@%s", root, modulePath, version)

	env := []string{
		// This tree first; then what this machine downloaded before (so
		// that the test asks the network for little), then the public
		// proxy for the rest.
		"GOPROXY=" + fileURL(proxy) + "," + fileURL(downloads) + ",https://proxy.golang.org",
		"GOMODCACHE=" + modcache,
		"GOFLAGS=-modcacherw -buildvcs=false",
		"GONOSUMDB=" + modulePath, // a version no checksum database has seen
		"GOPRIVATE=", "GONOPROXY=", "GOINSECURE=",
		"GOWORK=off", "GOTOOLCHAIN=local", "GO111MODULE=on",
	}
	if err := os.MkdirAll(consumer, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(consumer, "main.go"), []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	// The checksums listwatch's own module already vouches for, so that
	// the go command asks the checksum database only about the others;
	// the downloads are checked against them all the same.
	sums, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(consumer, "go.sum"), sums, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, goBin, consumer, env, "mod", "init", "example.com/consumer")
	run(t, ctx, goBin, consumer, env, "get", modulePath+"@"+version)
	run(t, ctx, goBin, consumer, env, "mod", "tidy")
	mod, err := os.ReadFile(filepath.Join(consumer, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(mod, []byte("replace")) {
		t.Errorf("the consumer's go.mod has a replace directive:\n%s", mod)
	}
	if !bytes.Contains(mod, []byte(modulePath+" "+version)) {
		t.Errorf("the consumer's go.mod does not require %s %s:\n%s", modulePath, version, mod)
	}
	// -trimpath: the build cache then serves the packages compiled from
	// any module cache, this temporary one included.
	bin := filepath.Join(tmp, "consumer-bin")
	run(t, ctx, goBin, consumer, env, "build", "-trimpath", "-o", bin, ".")

	var linked []string
	for line := range strings.Lines(run(t, ctx, goBin, consumer, env, "version", "-m", bin)) {
		if f := strings.Fields(line); len(f) >= 2 && (f[0] == "dep" || f[0] == "=>") {
			linked = append(linked, f[1])
		}
	}
	if !slices.Contains(linked, modulePath) {
		t.Errorf("the binary does not link %s; it links %v", modulePath, linked)
	}
	for _, m := range forbiddenModules {
		if slices.Contains(linked, m) {
			t.Errorf("the binary links module %s", m)
		}
	}
	deps := strings.Fields(run(t, ctx, goBin, consumer, env, "list", "-deps", "."))
	for _, p := range forbiddenPackages {
		if slices.Contains(deps, p) {
			t.Errorf("the program depends on package %s", p)
		}
	}
	for _, p := range deps {
		if strings.HasPrefix(p, "k8s.io/kubernetes/") || strings.HasPrefix(p, "go.etcd.io/etcd/server/") {
			t.Errorf("the program depends on package %s", p)
		}
	}
}

// run runs the go command in dir with env added, failing the test with its
// output when it fails, and returns its standard output, trimmed.
func run(t *testing.T, ctx context.Context, goBin, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("go %s: %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s%s", strings.Join(args, " "), dir, err, stdout.String(), stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

func fileURL(dir string) string { return "file://" + filepath.ToSlash(dir) }

// serveModule writes the module in root, as it is in the work tree, into
// the GOPROXY layout under proxy, at a pseudo-version named after its
// content, and returns that version.
func serveModule(root, proxy string) (string, error) {
	files, err := moduleFiles(root)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	now := time.Now().UTC()
	version := "v0.0.0-" + now.Format("20060102150405") + "-" + hex.EncodeToString(h.Sum(nil))[:12]

	dir := filepath.Join(proxy, filepath.FromSlash(modulePath), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	info, err := json.Marshal(map[string]any{"Version": version, "Time": now.Format(time.RFC3339)})
	if err != nil {
		return "", err
	}
	for name, data := range map[string][]byte{"list": []byte(version + "\n"), version + ".mod": gomod, version + ".info": info} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return "", err
		}
	}
	return version, writeZip(filepath.Join(dir, version+".zip"), root, modulePath+"@"+version, files)
}

// writeZip writes the module zip: every file under prefix/, as the go
// command expects it.
func writeZip(name, root, prefix string, files []string) (err error) {
	out, err := os.Create(name)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	bw := bufio.NewWriter(out)
	zw := zip.NewWriter(bw)
	for _, f := range files {
		w, err := zw.Create(prefix + "/" + f)
		if err != nil {
			return err
		}
		in, err := os.Open(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return err
		}
		_, err = io.Copy(w, in)
		in.Close()
		if err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// moduleFiles lists the files of the module in root, slash-separated and
// sorted, as a module zip holds them: not those of nested modules (bench,
// compat), vendor directories, or hidden and underscore directories (the
// VCS's, the runtime data of `listwatch up`), nor what the root .gitignore
// names (built binaries, profiles).
func moduleFiles(root string) ([]string, error) {
	ignored, err := gitignore(root)
	if err != nil {
		return nil, err
	}
	var files []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if ignored(rel) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			base := d.Name()
			if strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") || base == "vendor" {
				return fs.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return fs.SkipDir // a module of its own
			}
			return nil
		}
		if d.Type().IsRegular() {
			files = append(files, rel)
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

// gitignore returns the matcher of the root .gitignore's simple patterns:
// "name" or "*.ext" anywhere, "/name" at the root.
func gitignore(root string) (func(rel string) bool, error) {
	b, err := os.ReadFile(filepath.Join(root, ".gitignore"))
	if os.IsNotExist(err) {
		return func(string) bool { return false }, nil
	}
	if err != nil {
		return nil, err
	}
	var patterns []string
	for line := range strings.Lines(string(b)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "!") {
			patterns = append(patterns, line)
		}
	}
	return func(rel string) bool {
		for _, pat := range patterns {
			anchored := strings.HasPrefix(pat, "/")
			pat = strings.TrimSuffix(strings.TrimPrefix(pat, "/"), "/")
			subject := path.Base(rel)
			if anchored || strings.Contains(pat, "/") {
				subject = rel
			}
			if ok, _ := path.Match(pat, subject); ok {
				return true
			}
		}
		return false
	}, nil
}
