package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/resources"
)

func init() {
	register("get", "print resources as a table, JSON or YAML, and watch them (-w)", func(ctx context.Context, args []string) error {
		return runGet(ctx, args, os.Stdout, os.Stderr)
	})
}

// getTarget is one resource `listwatch get` reads.
type getTarget struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
}

// qualifiedKind is how kubectl names a resource's objects when it shows
// several resources at once: kind, lower case, dot group ("deployment.apps").
func (t getTarget) qualifiedKind() string {
	k := strings.ToLower(t.kind)
	if t.gvr.Group != "" {
		k += "." + t.gvr.Group
	}
	return k
}

// versionRE matches a Kubernetes API version: v1, v2beta3, v1alpha1.
var versionRE = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)

// resourceName holds what a resource is called by: its plural, singular,
// kind (lower case, as kubectl takes it too) and short names, and the
// categories it is in.
type resourceName struct {
	gvr                    schema.GroupVersionResource
	kind, singular         string
	shortNames, categories []string
	namespaced             bool
}

func (r resourceName) target() getTarget {
	return getTarget{gvr: r.gvr, kind: r.kind, namespaced: r.namespaced}
}

// matches reports whether name (lower case, without group or version)
// names r.
func (r resourceName) matches(name string) bool {
	return name == r.gvr.Resource || name == r.singular || name == strings.ToLower(r.kind) || slices.Contains(r.shortNames, name)
}

// registryNames are the built-in resources' names, from the registry.
func registryNames() []resourceName {
	var out []resourceName
	for _, r := range resources.Builtin.All() {
		out = append(out, resourceName{gvr: r.GVR(), kind: r.GVK.Kind, singular: r.Singular, shortNames: r.ShortNames,
			categories: r.Categories, namespaced: r.Namespaced})
	}
	return out
}

// discoveryNames are the names of every resource the server serves, from
// its discovery documents (custom resources among them).
func discoveryNames(ctx context.Context, c *client.Client) ([]resourceName, error) {
	served, err := c.ServerResources(ctx)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	out := make([]resourceName, 0, len(served))
	for _, s := range served {
		out = append(out, resourceName{gvr: s.GVR, kind: s.Kind, singular: s.Singular, shortNames: s.ShortNames,
			categories: s.Categories, namespaced: s.Namespaced})
	}
	return out, nil
}

// resolveGet finds the resources arg names, as kubectl does: a resource's
// plural, singular, kind or short name, "resource.group" or
// "resource.version.group", or a category ("all") standing for every
// resource in it. The built-in resources are found in the registry; any
// other (custom resources, and the custom members of a category) in the
// server's discovery, asked only when the registry does not settle it.
func resolveGet(ctx context.Context, c *client.Client, arg string) ([]getTarget, error) {
	name := strings.ToLower(arg)
	var group, version string
	if res, rest, ok := strings.Cut(name, "."); ok {
		name, group = res, rest
		if v, g, ok := strings.Cut(rest, "."); ok && versionRE.MatchString(v) {
			version, group = v, g
		}
	}
	direct := func(names []resourceName) (getTarget, bool) {
		for _, r := range names {
			if r.matches(name) && (group == "" || r.gvr.Group == group) && (version == "" || r.gvr.Version == version) {
				return r.target(), true
			}
		}
		return getTarget{}, false
	}
	inCategory := func(names []resourceName) []getTarget {
		var out []getTarget
		for _, r := range names {
			if group == "" && slices.Contains(r.categories, name) {
				out = append(out, r.target())
			}
		}
		return out
	}
	builtin := registryNames()
	if t, ok := direct(builtin); ok {
		return []getTarget{t}, nil
	}
	found := inCategory(builtin)
	served, err := discoveryNames(ctx, c)
	switch {
	case err != nil && len(found) > 0:
		// The category's built-in members are enough to go on with.
		return found, nil
	case err != nil && version != "" && group != "":
		// Named in full: the server need not tell what it is.
		gvr := schema.GroupVersionResource{Group: group, Version: version, Resource: name}
		return []getTarget{{gvr: gvr, namespaced: !client.IsClusterScoped(gvr)}}, nil
	case err != nil:
		return nil, fmt.Errorf("unknown resource %q: %w", arg, err)
	}
	if len(found) == 0 {
		if t, ok := direct(served); ok {
			return []getTarget{t}, nil
		}
	}
	for _, t := range inCategory(served) {
		if _, isBuiltin := resources.Lookup(t.gvr); !isBuiltin {
			found = append(found, t)
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("unknown resource %q: the server doesn't have a resource type %q", arg, arg)
	}
	return found, nil
}

// getOptions are the flags of `listwatch get`.
type getOptions struct {
	namespace, output, kubeconfig, context, selector string
	allNamespaces, watch                             bool
}

// parseGetArgs parses flags wherever they are among the arguments, as
// kubectl does, and returns the positional ones.
func parseGetArgs(args []string, stderr io.Writer) (getOptions, []string, error) {
	var o getOptions
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: listwatch get <resource> [name] [-n ns | -A] [-l selector] [-w] [-o json|yaml|wide] [--kubeconfig path] [--context name]")
		fs.PrintDefaults()
	}
	for _, n := range []string{"n", "namespace"} {
		fs.StringVar(&o.namespace, n, "", "namespace (default: the kubeconfig context's)")
	}
	for _, n := range []string{"A", "all-namespaces"} {
		fs.BoolVar(&o.allNamespaces, n, false, "list across all namespaces")
	}
	for _, n := range []string{"w", "watch"} {
		fs.BoolVar(&o.watch, n, false, "after listing, watch for changes")
	}
	for _, n := range []string{"o", "output"} {
		fs.StringVar(&o.output, n, "", "output format: json, yaml or wide")
	}
	for _, n := range []string{"l", "selector"} {
		fs.StringVar(&o.selector, n, "", "label selector")
	}
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&o.context, "context", "", "kubeconfig context")
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return o, nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	switch o.output {
	case "", "wide", "json", "yaml":
	default:
		return o, nil, fmt.Errorf("unknown output format %q (json, yaml or wide)", o.output)
	}
	if len(pos) < 1 || len(pos) > 2 {
		fs.Usage()
		return o, nil, errors.New("want a resource and at most one name")
	}
	return o, pos, nil
}

func runGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, pos, err := parseGetArgs(args, stderr)
	if err != nil {
		return err
	}
	cfg, err := client.LoadConfig(client.LoadOptions{Kubeconfig: o.kubeconfig, Context: o.context, Namespace: o.namespace})
	if err != nil {
		return err
	}
	c, err := client.New(cfg)
	if err != nil {
		return err
	}
	targets, err := resolveGet(ctx, c, pos[0])
	if err != nil {
		return err
	}
	g := &getter{c: c, o: o, namespace: cfg.Namespace, stdout: stdout, stderr: stderr}
	if len(pos) == 2 {
		g.name = pos[1]
	}
	if len(targets) > 1 && (g.name != "" || o.watch) {
		return fmt.Errorf("%q stands for %d resources: a name, and -w, take one resource", pos[0], len(targets))
	}
	if o.output == "json" || o.output == "yaml" {
		return g.objects(ctx, targets)
	}
	return g.tables(ctx, targets)
}

// getter runs one `listwatch get`.
type getter struct {
	c              *client.Client
	o              getOptions
	namespace      string // the kubeconfig's, or -n
	name           string // the object asked for, if one
	stdout, stderr io.Writer
}

// namespaceOf is the namespace t is read in: "" for every namespace.
func (g *getter) namespaceOf(t getTarget) string {
	if g.o.allNamespaces || !t.namespaced {
		return ""
	}
	return g.namespace
}

// tweak sets the selectors of every list and watch.
func (g *getter) tweak(lo *metav1.ListOptions) {
	lo.LabelSelector = g.o.selector
	if g.name != "" {
		lo.FieldSelector = "metadata.name=" + g.name
	}
}

// noneFound tells that nothing matched, as kubectl does.
func (g *getter) noneFound(targets []getTarget) {
	ns := ""
	if len(targets) > 0 {
		ns = g.namespaceOf(targets[0])
	}
	if ns == "" {
		fmt.Fprintln(g.stderr, "No resources found")
	} else {
		fmt.Fprintf(g.stderr, "No resources found in %s namespace.\n", ns)
	}
}

// tables prints the Tables the server prints the targets as: kubectl get's
// view. Column definitions of priority 0 are shown, every one with -o
// wide; NAMESPACE comes first with -A; several resources (a category) are
// shown one table after another, the names prefixed with their kind.
func (g *getter) tables(ctx context.Context, targets []getTarget) error {
	var printers []*tablePrinter
	var tables []*metav1.Table
	rows := 0
	for _, t := range targets {
		p := &tablePrinter{out: g.stdout, wide: g.o.output == "wide", allNS: g.o.allNamespaces && t.namespaced}
		if len(targets) > 1 {
			p.prefix = t.qualifiedKind() + "/"
		}
		tr := client.NewTables(g.c, t.gvr, g.namespaceOf(t))
		var tbl *metav1.Table
		var err error
		if g.name != "" && !g.o.watch {
			tbl, err = tr.Get(ctx, g.name)
		} else {
			tbl, err = listTable(ctx, tr, g.tweak)
		}
		if err != nil {
			return err
		}
		printers, tables = append(printers, p), append(tables, tbl)
		rows += len(tbl.Rows)
	}
	if rows == 0 && !g.o.watch {
		g.noneFound(targets)
		return nil
	}
	blank := false
	for i, tbl := range tables {
		if len(tbl.Rows) == 0 && !g.o.watch {
			continue
		}
		if blank {
			fmt.Fprintln(g.stdout)
		}
		if err := printers[i].print(tbl); err != nil {
			return err
		}
		blank = true
	}
	if !g.o.watch {
		return nil
	}
	t := targets[0]
	tr := client.NewTables(g.c, t.gvr, g.namespaceOf(t))
	open := func(ctx context.Context, rv string) (eventStream[client.TableEvent], error) {
		opts := metav1.ListOptions{ResourceVersion: rv}
		g.tweak(&opts)
		return tr.Watch(ctx, opts)
	}
	p := printers[0]
	return watchFrom(ctx, tables[0].ResourceVersion, open, func(ev client.TableEvent, rv string) (string, error) {
		switch {
		case ev.Type == cache.EventError:
			return rv, watchError(ev.Status)
		case ev.Table == nil: // a bookmark
			return rv, nil
		}
		return tableVersion(ev.Table, rv), p.print(ev.Table)
	})
}

// listTable reads every page of a collection's Table: the rows of all of
// them under the first page's columns and resourceVersion.
func listTable(ctx context.Context, tr *client.Tables, tweak func(*metav1.ListOptions)) (*metav1.Table, error) {
	var all *metav1.Table
	for cont := ""; ; {
		opts := metav1.ListOptions{Limit: 500, Continue: cont}
		tweak(&opts)
		tbl, err := tr.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		if all == nil {
			all = tbl
		} else {
			all.Rows = append(all.Rows, tbl.Rows...)
		}
		if cont = tbl.Continue; cont == "" {
			all.Continue = ""
			return all, nil
		}
	}
}

// eventStream is an open watch: a Table watch (client.TableWatcher) or
// an object watch (cache.Watcher), whose events are E.
type eventStream[E any] interface {
	Next() (E, error)
	Stop()
}

// watchFrom prints every change from resourceVersion rv on, as handle
// prints each event of the watches open opens, and returns what
// resourceVersion it brings the watch to. When the server ends a watch
// it resumes from there, until ctx is done: then it returns nil at once,
// the stream stopped rather than left to notice. An ERROR event, or a
// failure other than ctx's, ends it with that error.
func watchFrom[E any](ctx context.Context, rv string, open func(ctx context.Context, rv string) (eventStream[E], error),
	handle func(ev E, rv string) (string, error)) error {
	for ctx.Err() == nil {
		w, err := open(ctx, rv)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		stop := context.AfterFunc(ctx, w.Stop)
		err = func() error {
			defer w.Stop()
			for {
				ev, err := w.Next()
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return err
				}
				if rv, err = handle(ev, rv); err != nil {
					return err
				}
			}
		}()
		stop()
		if err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

// watchError is the error of a watch's ERROR event.
func watchError(st *metav1.Status) error {
	if st == nil {
		return errors.New("watch: ERROR event")
	}
	return fmt.Errorf("watch: %s", st.Message)
}

// tableVersion is the resourceVersion a watch event's Table brings the
// watch to: its last row's object's, else the Table's own, else rv.
func tableVersion(t *metav1.Table, rv string) string {
	for i := len(t.Rows) - 1; i >= 0; i-- {
		if m := client.RowMetadata(t.Rows[i]); m != nil && m.ResourceVersion != "" {
			return m.ResourceVersion
		}
	}
	if t.ResourceVersion != "" {
		return t.ResourceVersion
	}
	return rv
}

// tablePrinter prints Tables under one header, as kubectl get does: the
// column definitions of the first Table that has them (a watch's later
// events carry none), the header once, with the first rows, and each
// Table's rows aligned
// under it with the widths of every column remembered from one print to
// the next, so that a watch's rows line up with the list's and with each
// other.
type tablePrinter struct {
	out         io.Writer
	wide        bool   // every column, not only those of priority 0
	allNS       bool   // a NAMESPACE column first
	prefix      string // before each name: "kind.group/" when several resources are shown
	columns     []metav1.TableColumnDefinition
	wroteHeader bool
	aligned     alignedColumns
}

func (p *tablePrinter) print(t *metav1.Table) error {
	if len(p.columns) == 0 {
		p.columns = t.ColumnDefinitions
	}
	if len(t.Rows) == 0 {
		// The header comes with the first rows, aligned with them, as
		// kubectl prints it: a watch of an empty list shows none before
		// its first event.
		return nil
	}
	if len(p.columns) == 0 {
		return errors.New("the server sent table rows without columns")
	}
	var shown []int
	for i, col := range p.columns {
		if col.Priority == 0 || p.wide {
			shown = append(shown, i)
		}
	}
	var lines [][]string
	if !p.wroteHeader {
		var h []string
		if p.allNS {
			h = append(h, "NAMESPACE")
		}
		for _, i := range shown {
			h = append(h, strings.ToUpper(p.columns[i].Name))
		}
		lines = append(lines, h)
		p.wroteHeader = true
	}
	for _, row := range t.Rows {
		var cells []string
		if p.allNS {
			ns := ""
			if m := client.RowMetadata(row); m != nil {
				ns = m.Namespace
			}
			cells = append(cells, ns)
		}
		for _, i := range shown {
			var cell string
			if i < len(row.Cells) {
				cell = cellString(row.Cells[i])
			}
			if p.prefix != "" && p.columns[i].Format == "name" {
				cell = p.prefix + cell
			}
			cells = append(cells, cell)
		}
		lines = append(lines, cells)
	}
	if p.aligned.out == nil {
		p.aligned.out = p.out
	}
	return p.aligned.write(lines)
}

// kubectl's tab writer's parameters (k8s.io/cli-runtime's printers): a
// column is its widest cell plus padding, at least minWidth wide.
const (
	columnMinWidth = 6
	columnPadding  = 3
)

// alignedColumns writes lines of cells in columns as kubectl's tab writer
// does, remembering each column's width across writes (its
// RememberWidths): a column only widens, so rows written later line up
// with those written before, unless a cell is wider than any before. The
// last cell of a line is not padded.
type alignedColumns struct {
	out    io.Writer
	widths []int
}

func (a *alignedColumns) write(lines [][]string) error {
	for _, cells := range lines {
		for i := range len(cells) - 1 {
			w := max(utf8.RuneCountInString(cells[i])+columnPadding, columnMinWidth)
			if i == len(a.widths) {
				a.widths = append(a.widths, w)
			}
			a.widths[i] = max(a.widths[i], w)
		}
	}
	var b strings.Builder
	for _, cells := range lines {
		for i, cell := range cells {
			b.WriteString(cell)
			if i < len(cells)-1 {
				b.WriteString(strings.Repeat(" ", a.widths[i]-utf8.RuneCountInString(cell)))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(a.out, b.String())
	return err
}

// cellString prints a cell as kubectl does; numbers as the server wrote
// them.
func cellString(v any) string {
	switch c := v.(type) {
	case nil:
		return "<none>"
	case string:
		return c
	case json.Number:
		return c.String()
	}
	return fmt.Sprint(v)
}

// objects prints the targets' objects as JSON or YAML: one object for a
// name, else a List of them all; with -w, each change after.
func (g *getter) objects(ctx context.Context, targets []getTarget) error {
	p := &objectPrinter{out: g.stdout, output: g.o.output}
	if g.name != "" && !g.o.watch {
		t := targets[0]
		obj, err := g.c.Get(ctx, t.gvr, g.namespaceOf(t), g.name)
		if err != nil {
			return err
		}
		return p.print([]cache.Object{obj}, true)
	}
	var items []cache.Object
	var rv string
	for _, t := range targets {
		lw := g.c.ListerWatcher(t.gvr, g.namespaceOf(t), g.tweak)
		for cont := ""; ; {
			l, err := lw.List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
			if err != nil {
				return err
			}
			items = append(items, l.Items...)
			if rv == "" {
				rv = l.ResourceVersion
			}
			if cont = l.Continue; cont == "" {
				break
			}
		}
	}
	if err := p.print(items, g.name != ""); err != nil {
		return err
	}
	if !g.o.watch {
		return nil
	}
	t := targets[0]
	lw := g.c.ListerWatcher(t.gvr, g.namespaceOf(t), g.tweak)
	open := func(ctx context.Context, rv string) (eventStream[cache.Event[cache.Object]], error) {
		return lw.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	}
	return watchFrom(ctx, rv, open, func(ev cache.Event[cache.Object], rv string) (string, error) {
		switch ev.Type {
		case cache.EventError:
			return rv, watchError(ev.Status)
		case cache.EventBookmark:
		default:
			if err := p.print([]cache.Object{ev.Object}, true); err != nil {
				return rv, err
			}
		}
		return ev.Object.GetResourceVersion(), nil
	})
}

// objectPrinter writes objects as JSON or YAML.
type objectPrinter struct {
	out    io.Writer
	output string
}

func (p *objectPrinter) print(objs []cache.Object, single bool) error {
	var v any
	if single && len(objs) == 1 {
		v = objs[0]
	} else {
		v = map[string]any{"apiVersion": "v1", "kind": "List", "items": objs, "metadata": map[string]any{}}
	}
	b, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return err
	}
	if p.output == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
	} else {
		b = append(b, '\n')
	}
	_, err = p.out.Write(b)
	return err
}
