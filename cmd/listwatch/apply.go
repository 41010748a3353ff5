package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/listwatch/listwatch/client"
)

func init() {
	register("apply", "create or update the objects of a YAML or JSON file (-f FILE, or - for stdin)", func(ctx context.Context, args []string) error {
		return runApply(ctx, args, os.Stdin, os.Stdout, os.Stderr)
	})
}

// cliFlags are the connection flags every client command takes.
type cliFlags struct {
	kubeconfig, context, namespace string
}

func (f *cliFlags) add(fs *flag.FlagSet) {
	for _, n := range []string{"n", "namespace"} {
		fs.StringVar(&f.namespace, n, "", "namespace (default: the object's, else the kubeconfig context's)")
	}
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&f.context, "context", "", "kubeconfig context")
}

// connect loads the kubeconfig, makes a client and discovers the server's
// resources; the returned namespace is -n, else the context's.
func (f *cliFlags) connect(ctx context.Context) (*client.Client, string, *resourceMapper, error) {
	cfg, err := client.LoadConfig(client.LoadOptions{Kubeconfig: f.kubeconfig, Context: f.context, Namespace: f.namespace})
	if err != nil {
		return nil, "", nil, err
	}
	c, err := client.New(cfg)
	if err != nil {
		return nil, "", nil, err
	}
	m, err := newResourceMapper(ctx, c)
	if err != nil {
		return nil, "", nil, err
	}
	return c, cfg.Namespace, m, nil
}

// clientCommand is the opening the client commands share: a flag set with the
// connection flags that writes to stderr and prints usage before the
// flags' defaults.
type clientCommand struct {
	fs *flag.FlagSet
	cliFlags
}

func newClientCommand(name, usage string, stderr io.Writer) *clientCommand {
	cmd := &clientCommand{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	cmd.fs.SetOutput(stderr)
	cmd.add(cmd.fs)
	cmd.fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: "+usage)
		cmd.fs.PrintDefaults()
	}
	return cmd
}

// parse parses the flags wherever they are among args and returns the
// positional arguments.
func (cmd *clientCommand) parse(args []string) ([]string, error) {
	return parseInterspersed(cmd.fs, args)
}

// parseInterspersed parses flags wherever they are among args, as kubectl
// does, and returns the positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// resourceMapper resolves kinds and resource names to what the server
// serves, from its discovery documents, so custom resources work like
// built-in ones.
type resourceMapper struct {
	resources []client.APIResource
}

func newResourceMapper(ctx context.Context, c *client.Client) (*resourceMapper, error) {
	res, err := c.ServerResources(ctx)
	if err != nil {
		return nil, fmt.Errorf("discovering the server's resources: %w", err)
	}
	return &resourceMapper{resources: res}, nil
}

// forKind finds the resource of objects of kind gvk.
func (m *resourceMapper) forKind(gvk schema.GroupVersionKind) (client.APIResource, error) {
	for _, r := range m.resources {
		if r.Kind == gvk.Kind && r.GVR.Group == gvk.Group && r.GVR.Version == gvk.Version {
			return r, nil
		}
	}
	return client.APIResource{}, fmt.Errorf("the server serves no kind %q in version %q", gvk.Kind, gvk.GroupVersion())
}

// forName finds a resource by plural, singular, short name or kind, with
// an optional ".group" or ".version.group" suffix, case-insensitively.
func (m *resourceMapper) forName(name string) (client.APIResource, error) {
	name = strings.ToLower(name)
	base, qualifier, _ := strings.Cut(name, ".")
	var found []client.APIResource
	for _, r := range m.resources {
		names := append([]string{r.GVR.Resource, r.Singular, strings.ToLower(r.Kind)}, r.ShortNames...)
		matches := false
		for _, n := range names {
			if n == base {
				matches = true
			}
		}
		if !matches {
			continue
		}
		switch qualifier {
		case "", r.GVR.Group, r.GVR.Version + "." + r.GVR.Group:
			found = append(found, r)
		}
	}
	switch {
	case len(found) == 0:
		return client.APIResource{}, fmt.Errorf("the server doesn't have a resource type %q", name)
	case len(found) > 1 && qualifier == "":
		// A built-in group wins, as kubectl's priority does.
		for _, r := range found {
			if r.GVR.Group == "" {
				return r, nil
			}
		}
		return client.APIResource{}, fmt.Errorf("resource %q is ambiguous: qualify it with its group (%s or %s)", name, found[0].GVR.Group, found[1].GVR.Group)
	}
	return found[0], nil
}

// kindLabel names an object's kind the way kubectl's output does:
// replicationcontroller, widget.example.com.
func kindLabel(r client.APIResource) string {
	k := strings.ToLower(r.Kind)
	if r.GVR.Group != "" {
		k += "." + r.GVR.Group
	}
	return k
}

// readAllManifests reads the objects of every file of paths, in order.
func readAllManifests(paths []string, stdin io.Reader) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, path := range paths {
		o, err := readManifests(path, stdin)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o...)
	}
	return objs, nil
}

// readManifests reads the objects of a YAML or JSON file ("-": stdin):
// several documents separated by ---, or concatenated JSON objects, and
// the items of any List.
func readManifests(path string, stdin io.Reader) ([]*unstructured.Unstructured, error) {
	var r io.Reader
	if path == "-" {
		r = stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		if len(obj) == 0 {
			continue // an empty document, as between two ---
		}
		u := &unstructured.Unstructured{Object: obj}
		if strings.HasSuffix(u.GetKind(), "List") && u.Object["items"] != nil {
			list, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("%s: document %d: %w", path, doc, err)
			}
			for i := range list.Items {
				out = append(out, &list.Items[i])
			}
			continue
		}
		if u.GetAPIVersion() == "" || u.GetKind() == "" {
			return nil, fmt.Errorf("%s: document %d: apiVersion and kind are required", path, doc)
		}
		if u.GetName() == "" {
			return nil, fmt.Errorf("%s: document %d (%s): metadata.name is required", path, doc, u.GetKind())
		}
		out = append(out, u)
	}
}

// target is where one object of a manifest lives.
type target struct {
	res       client.APIResource
	namespace string
	api       *client.Resource[*unstructured.Unstructured]
}

// resolve finds the resource and namespace of obj: the object's own
// namespace, else defaultNS; a namespace given with -n that contradicts
// the object's is an error, as in kubectl.
func resolve(c *client.Client, m *resourceMapper, obj *unstructured.Unstructured, flagNS, defaultNS string) (target, error) {
	res, err := m.forKind(obj.GroupVersionKind())
	if err != nil {
		return target{}, err
	}
	ns := ""
	if res.Namespaced {
		ns = obj.GetNamespace()
		switch {
		case ns == "":
			ns = defaultNS
		case flagNS != "" && flagNS != ns:
			return target{}, fmt.Errorf("%s/%s: the namespace of the object (%s) does not match -n %s", kindLabel(res), obj.GetName(), ns, flagNS)
		}
	}
	return target{res: res, namespace: ns, api: client.NewUnstructured(c, res.GVR, ns)}, nil
}

// resolveRef finds the resource a command line names, in defaultNS when
// it is namespaced.
func resolveRef(c *client.Client, m *resourceMapper, ref objectRef, defaultNS string) (target, error) {
	res, err := m.forName(ref.resource)
	if err != nil {
		return target{}, err
	}
	ns := ""
	if res.Namespaced {
		ns = defaultNS
	}
	return target{res: res, namespace: ns, api: client.NewUnstructured(c, res.GVR, ns)}, nil
}

func runApply(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := newClientCommand("apply", "listwatch apply -f FILE|- [-n ns] [--kubeconfig path] [--context name]", stderr)
	var files stringList
	cmd.fs.Var(&files, "f", "file of objects to apply, YAML or JSON (- for stdin); repeatable")
	pos, err := cmd.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 || len(files) == 0 {
		cmd.fs.Usage()
		return errors.New("want -f FILE and no other arguments")
	}
	objs, err := readAllManifests(files, stdin)
	if err != nil {
		return err
	}
	c, defaultNS, m, err := cmd.connect(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, obj := range objs {
		result, label, err := applyOne(ctx, c, m, obj, cmd.namespace, defaultNS)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(stdout, "%s/%s %s\n", label, obj.GetName(), result)
	}
	return errors.Join(errs...)
}

// applyOne creates obj, or merges it into the live object: fields the
// file sets replace the live ones, others (status, what controllers and
// the server filled in) stay. It reports created, configured or
// unchanged.
func applyOne(ctx context.Context, c *client.Client, m *resourceMapper, obj *unstructured.Unstructured, flagNS, defaultNS string) (result, label string, err error) {
	t, err := resolve(c, m, obj, flagNS, defaultNS)
	if err != nil {
		return "", "", err
	}
	label = kindLabel(t.res)
	name := obj.GetName()
	obj = obj.DeepCopy()
	if t.res.Namespaced {
		obj.SetNamespace(t.namespace)
	}
	live, err := t.api.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := t.api.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return "", label, fmt.Errorf("creating %s/%s: %w", label, name, err)
		}
		return "created", label, nil
	}
	if err != nil {
		return "", label, fmt.Errorf("reading %s/%s: %w", label, name, err)
	}
	// The file's resourceVersion, if any, is from another time: the
	// merge applies to whatever is live.
	unstructured.RemoveNestedField(obj.Object, "metadata", "resourceVersion")
	patch, err := json.Marshal(obj.Object)
	if err != nil {
		return "", label, err
	}
	updated, err := t.api.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return "", label, fmt.Errorf("updating %s/%s: %w", label, name, err)
	}
	if updated.GetResourceVersion() == live.GetResourceVersion() || sameObject(live, updated) {
		return "unchanged", label, nil
	}
	return "configured", label, nil
}

// sameObject reports whether a write changed nothing a user set: a server
// that bumps the resourceVersion of a no-op write still reports
// "unchanged".
func sameObject(a, b *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) []byte {
		cp := u.DeepCopy()
		for _, f := range []string{"resourceVersion", "managedFields", "generation"} {
			unstructured.RemoveNestedField(cp.Object, "metadata", f)
		}
		b, _ := json.Marshal(cp.Object)
		return b
	}
	return bytes.Equal(strip(a), strip(b))
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
