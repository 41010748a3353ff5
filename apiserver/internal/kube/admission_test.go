package kube

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// notRun are the plugins of kube-apiserver's default set that are not run
// here, with why (admission.go).
var notRun = map[string]string{
	"NamespaceLifecycle":       "the server's own rules",
	"CertificateApproval":      "needs an authorizer",
	"CertificateSigning":       "needs an authorizer",
	"ClusterTrustBundleAttest": "needs an authorizer",
}

// TestAdmissionPluginsAreKubes checks the plugins against kube-apiserver's
// own lists (k8s.io/kubernetes/pkg/kubeapiserver/options: AllOrderedPlugins
// and the default set of DefaultOffAdmissionPlugins): they are its default
// set less notRun, in its order. The package cannot be linked in here (it
// brings kube-apiserver's authenticators and their modules), so its source
// is read from the module cache.
func TestAdmissionPluginsAreKubes(t *testing.T) {
	ordered, defaultOn := kubePluginLists(t)
	var want []string
	for _, name := range ordered {
		if defaultOn[name] && notRun[name] == "" {
			want = append(want, name)
		}
	}
	if got := AdmissionPlugins(); !slices.Equal(got, want) {
		t.Errorf("AdmissionPlugins() =\n%v\nwant kube-apiserver's default set in its order, less those not run:\n%v", got, want)
	}
	for name := range notRun {
		if !defaultOn[name] {
			t.Errorf("%s is not in kube-apiserver's default set any more", name)
		}
	}
}

// kubePluginLists reads kube-apiserver's plugin lists from the source of
// k8s.io/kubernetes/pkg/kubeapiserver/options, resolving each
// pkg.PluginName to the constant's value in pkg's source.
func kubePluginLists(t *testing.T) (ordered []string, defaultOn map[string]bool) {
	t.Helper()
	dirs := goListDirs(t, "k8s.io/kubernetes/pkg/kubeapiserver/options")
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(dirs["k8s.io/kubernetes/pkg/kubeapiserver/options"], "plugins.go"), nil, 0)
	if err != nil {
		t.Skipf("kube-apiserver's source: %v", err)
	}
	imports := map[string]string{}
	var paths []string
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := filepath.Base(p)
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = p
		paths = append(paths, p)
	}
	dirs = goListDirs(t, paths...)
	names := map[string]string{}
	resolve := func(e ast.Expr) string {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "PluginName" {
			t.Fatalf("unexpected element %#v of a plugin list", e)
		}
		pkg := imports[sel.X.(*ast.Ident).Name]
		if n, ok := names[pkg]; ok {
			return n
		}
		names[pkg] = pluginName(t, dirs[pkg])
		return names[pkg]
	}
	defaultOn = map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ValueSpec:
			if len(n.Names) == 1 && n.Names[0].Name == "AllOrderedPlugins" {
				for _, e := range n.Values[0].(*ast.CompositeLit).Elts {
					ordered = append(ordered, resolve(e))
				}
			}
		case *ast.FuncDecl:
			if n.Name.Name != "DefaultOffAdmissionPlugins" {
				return false
			}
			// defaultOnPlugins := sets.New(...)
			ast.Inspect(n, func(n ast.Node) bool {
				as, ok := n.(*ast.AssignStmt)
				if !ok || len(as.Lhs) != 1 || len(as.Rhs) != 1 {
					return true
				}
				if id, ok := as.Lhs[0].(*ast.Ident); !ok || id.Name != "defaultOnPlugins" {
					return true
				}
				if call, ok := as.Rhs[0].(*ast.CallExpr); ok {
					for _, e := range call.Args {
						defaultOn[resolve(e)] = true
					}
				}
				return false
			})
			return false
		}
		return true
	})
	if len(ordered) == 0 || len(defaultOn) == 0 {
		t.Fatal("plugin lists not found in kube-apiserver's source")
	}
	return ordered, defaultOn
}

// pluginName is the value of the constant PluginName in the package of dir.
func pluginName(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if n.Name == "PluginName" && i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
							v, _ := strconv.Unquote(lit.Value)
							return v
						}
					}
				}
			}
		}
	}
	t.Fatalf("no PluginName in %s", dir)
	return ""
}

// goListDirs maps import paths to their source directories.
func goListDirs(t *testing.T, paths ...string) map[string]string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-e", "-f", "{{.ImportPath}} {{.Dir}}"}, paths...)...).Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	dirs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if p, d, ok := strings.Cut(line, " "); ok {
			dirs[p] = d
		}
	}
	return dirs
}

func TestNewAdmission(t *testing.T) {
	tests := []struct {
		name    string
		cfg     AdmissionConfig
		wantErr bool
	}{
		{name: "no client: the plugins that read only the object"},
		{name: "disabling a plugin", cfg: AdmissionConfig{Disabled: []string{"DefaultTolerationSeconds"}}},
		{name: "disabling an unknown plugin", cfg: AdmissionConfig{Disabled: []string{"NoSuchPlugin"}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := NewAdmission(tt.cfg)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err == nil && (a.mutating == nil || a.validating == nil) {
				t.Errorf("chain %+v", a)
			}
		})
	}
}
