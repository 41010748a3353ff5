package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
)

func init() {
	register("get", "print resources as a table, JSON or YAML, and watch them (-w)", func(ctx context.Context, args []string) error {
		return runGet(ctx, args, os.Stdout, os.Stderr)
	})
}

// getKind is a resource `listwatch get` knows by name.
type getKind struct {
	gvr        schema.GroupVersionResource
	namespaced bool
	names      []string // plural first, then singular and short names
	// header and row print the table; wide adds columns for -o wide.
	header func(wide bool) []string
	row    func(obj cache.Object, wide bool, now time.Time) []string
}

var getKinds = []getKind{
	{gvr: corev1.SchemeGroupVersion.WithResource("pods"), namespaced: true, names: []string{"pods", "pod", "po"},
		header: func(wide bool) []string {
			h := []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"}
			if wide {
				h = append(h, "IP", "NODE")
			}
			return h
		}, row: podRow},
	{gvr: corev1.SchemeGroupVersion.WithResource("replicationcontrollers"), namespaced: true, names: []string{"replicationcontrollers", "replicationcontroller", "rc"},
		header: func(wide bool) []string {
			h := []string{"NAME", "DESIRED", "CURRENT", "READY", "AGE"}
			if wide {
				h = append(h, "SELECTOR")
			}
			return h
		}, row: rcRow},
	{gvr: corev1.SchemeGroupVersion.WithResource("services"), namespaced: true, names: []string{"services", "service", "svc"},
		header: func(wide bool) []string {
			h := []string{"NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"}
			if wide {
				h = append(h, "SELECTOR")
			}
			return h
		}, row: serviceRow},
	{gvr: corev1.SchemeGroupVersion.WithResource("namespaces"), names: []string{"namespaces", "namespace", "ns"},
		header: func(bool) []string { return []string{"NAME", "STATUS", "AGE"} },
		row: func(obj cache.Object, _ bool, now time.Time) []string {
			ns, _ := obj.(*corev1.Namespace)
			if ns == nil {
				return genericRow(obj, false, now)
			}
			return []string{ns.Name, string(ns.Status.Phase), age(ns.CreationTimestamp, now)}
		}},
	{gvr: corev1.SchemeGroupVersion.WithResource("endpoints"), namespaced: true, names: []string{"endpoints", "endpoint", "ep"},
		header: func(bool) []string { return []string{"NAME", "ENDPOINTS", "AGE"} }, row: endpointsRow},
	{gvr: corev1.SchemeGroupVersion.WithResource("events"), namespaced: true, names: []string{"events", "event", "ev"},
		header: func(bool) []string { return []string{"LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"} }, row: eventRow},
	{gvr: appsv1.SchemeGroupVersion.WithResource("deployments"), namespaced: true, names: []string{"deployments", "deployment", "deploy"},
		header: func(bool) []string { return []string{"NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"} }, row: deploymentRow},
	{gvr: corev1.SchemeGroupVersion.WithResource("nodes"), names: []string{"nodes", "node", "no"},
		header: func(bool) []string { return []string{"NAME", "STATUS", "AGE"} }, row: nodeRow},
	{gvr: corev1.SchemeGroupVersion.WithResource("configmaps"), namespaced: true, names: []string{"configmaps", "configmap", "cm"},
		header: genericHeader, row: genericRow},
	{gvr: corev1.SchemeGroupVersion.WithResource("secrets"), namespaced: true, names: []string{"secrets", "secret"},
		header: genericHeader, row: genericRow},
	{gvr: corev1.SchemeGroupVersion.WithResource("serviceaccounts"), namespaced: true, names: []string{"serviceaccounts", "serviceaccount", "sa"},
		header: genericHeader, row: genericRow},
	{gvr: appsv1.SchemeGroupVersion.WithResource("replicasets"), namespaced: true, names: []string{"replicasets", "replicaset", "rs"},
		header: genericHeader, row: genericRow},
	{gvr: schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}, namespaced: true, names: []string{"leases", "lease"},
		header: genericHeader, row: genericRow},
}

// lookupKind finds a resource by any of its names, or by the full
// "resource.version.group" form for any other resource (custom ones).
func lookupKind(name string) (getKind, error) {
	name = strings.ToLower(name)
	for _, k := range getKinds {
		for _, n := range k.names {
			if n == name {
				return k, nil
			}
		}
	}
	if parts := strings.SplitN(name, ".", 3); len(parts) == 3 && parts[0] != "" && parts[1] != "" {
		gvr := schema.GroupVersionResource{Resource: parts[0], Version: parts[1], Group: parts[2]}
		return getKind{gvr: gvr, namespaced: !client.IsClusterScoped(gvr), names: []string{parts[0]}, header: genericHeader, row: genericRow}, nil
	}
	return getKind{}, fmt.Errorf("unknown resource %q (built-in names, short names, or resource.version.group)", name)
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
	kind, err := lookupKind(pos[0])
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
	ns := cfg.Namespace
	if o.allNamespaces || !kind.namespaced {
		ns = ""
	}
	p := &printer{kind: kind, out: stdout, output: o.output, allNS: o.allNamespaces && kind.namespaced}
	name := ""
	if len(pos) == 2 {
		name = pos[1]
	}
	lw := c.ListerWatcher(kind.gvr, ns, func(lo *metav1.ListOptions) {
		lo.LabelSelector = o.selector
		if name != "" {
			lo.FieldSelector = "metadata.name=" + name
		}
	})
	var rv string
	if name != "" && !o.watch {
		obj, err := c.Get(ctx, kind.gvr, ns, name)
		if err != nil {
			return err
		}
		return p.print([]cache.Object{obj}, true)
	}
	var items []cache.Object
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
	if len(items) == 0 && !o.watch && o.output == "" {
		if ns == "" {
			fmt.Fprintln(stderr, "No resources found")
		} else {
			fmt.Fprintf(stderr, "No resources found in %s namespace.\n", ns)
		}
		return nil
	}
	if err := p.print(items, name != ""); err != nil {
		return err
	}
	if !o.watch {
		return nil
	}
	return watchAndPrint(ctx, lw, rv, p)
}

// watchAndPrint prints every change from resourceVersion rv on, resuming
// the watch when the server ends it, until ctx is done.
func watchAndPrint(ctx context.Context, lw cache.ListerWatcher[cache.Object], rv string, p *printer) error {
	for ctx.Err() == nil {
		w, err := lw.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		stop := context.AfterFunc(ctx, w.Stop)
		for {
			ev, err := w.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				stop()
				w.Stop()
				return err
			}
			switch ev.Type {
			case cache.EventError:
				stop()
				w.Stop()
				return fmt.Errorf("watch: %s", ev.Status.Message)
			case cache.EventBookmark:
			default:
				if err := p.print([]cache.Object{ev.Object}, true); err != nil {
					stop()
					w.Stop()
					return err
				}
			}
			rv = ev.Object.GetResourceVersion()
		}
		stop()
		w.Stop()
	}
	return nil
}

// printer writes objects as a table, JSON or YAML; the table's header is
// written once.
type printer struct {
	kind        getKind
	out         io.Writer
	output      string
	allNS       bool
	wroteHeader bool
	now         func() time.Time
}

func (p *printer) print(objs []cache.Object, single bool) error {
	sort.SliceStable(objs, func(i, j int) bool {
		if objs[i].GetNamespace() != objs[j].GetNamespace() {
			return objs[i].GetNamespace() < objs[j].GetNamespace()
		}
		return objs[i].GetName() < objs[j].GetName()
	})
	switch p.output {
	case "json", "yaml":
		var v any = objs
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
	now := time.Now()
	if p.now != nil {
		now = p.now()
	}
	wide := p.output == "wide"
	tw := tabwriter.NewWriter(p.out, 0, 8, 3, ' ', 0)
	if !p.wroteHeader {
		h := p.kind.header(wide)
		if p.allNS {
			h = append([]string{"NAMESPACE"}, h...)
		}
		fmt.Fprintln(tw, strings.Join(h, "\t"))
		p.wroteHeader = true
	}
	for _, obj := range objs {
		r := p.kind.row(obj, wide, now)
		if p.allNS {
			r = append([]string{obj.GetNamespace()}, r...)
		}
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func genericHeader(bool) []string { return []string{"NAME", "AGE"} }

func genericRow(obj cache.Object, _ bool, now time.Time) []string {
	return []string{obj.GetName(), age(obj.GetCreationTimestamp(), now)}
}

// age prints a duration as kubectl does: 45s, 12m, 3h20m, 5d, 2y.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	d := now.Sub(t.Time)
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 10*time.Minute:
		s := int(d.Seconds()) % 60
		if s == 0 {
			return fmt.Sprintf("%dm", int(d.Minutes()))
		}
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), s)
	case d < 3*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 8*time.Hour:
		m := int(d.Minutes()) % 60
		if m == 0 {
			return fmt.Sprintf("%dh", int(d.Hours()))
		}
		return fmt.Sprintf("%dh%dm", int(d.Hours()), m)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	case d < 8*24*time.Hour:
		h := int(d.Hours()) % 24
		if h == 0 {
			return fmt.Sprintf("%dd", int(d.Hours())/24)
		}
		return fmt.Sprintf("%dd%dh", int(d.Hours())/24, h)
	case d < 2*365*24*time.Hour:
		return fmt.Sprintf("%dd", int(d.Hours())/24)
	}
	return fmt.Sprintf("%dy", int(d.Hours())/24/365)
}

func podRow(obj cache.Object, wide bool, now time.Time) []string {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return genericRow(obj, wide, now)
	}
	ready, restarts := 0, int32(0)
	reason := string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	var lastRestart time.Time
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Ready {
			ready++
		}
		restarts += cs.RestartCount
		if t := cs.LastTerminationState.Terminated; t != nil && t.FinishedAt.After(lastRestart) {
			lastRestart = t.FinishedAt.Time
		}
		switch {
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
			reason = cs.State.Waiting.Reason
		case cs.State.Terminated != nil && cs.State.Terminated.Reason != "":
			reason = cs.State.Terminated.Reason
		}
	}
	if pod.DeletionTimestamp != nil {
		reason = "Terminating"
	}
	rs := strconv.Itoa(int(restarts))
	if !lastRestart.IsZero() {
		rs += " (" + age(metav1.NewTime(lastRestart), now) + " ago)"
	}
	r := []string{pod.Name, fmt.Sprintf("%d/%d", ready, len(pod.Spec.Containers)), reason, rs, age(pod.CreationTimestamp, now)}
	if wide {
		r = append(r, orNone(pod.Status.PodIP), orNone(pod.Spec.NodeName))
	}
	return r
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func selectorString(sel map[string]string) string {
	if len(sel) == 0 {
		return "<none>"
	}
	keys := make([]string, 0, len(sel))
	for k := range sel {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + sel[k]
	}
	return strings.Join(keys, ",")
}

func rcRow(obj cache.Object, wide bool, now time.Time) []string {
	rc, ok := obj.(*corev1.ReplicationController)
	if !ok {
		return genericRow(obj, wide, now)
	}
	desired := int32(1)
	if rc.Spec.Replicas != nil {
		desired = *rc.Spec.Replicas
	}
	r := []string{rc.Name, fmt.Sprint(desired), fmt.Sprint(rc.Status.Replicas), fmt.Sprint(rc.Status.ReadyReplicas), age(rc.CreationTimestamp, now)}
	if wide {
		r = append(r, selectorString(rc.Spec.Selector))
	}
	return r
}

func serviceRow(obj cache.Object, wide bool, now time.Time) []string {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return genericRow(obj, wide, now)
	}
	var ports []string
	for _, p := range svc.Spec.Ports {
		s := fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		if p.NodePort != 0 {
			s = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
		}
		ports = append(ports, s)
	}
	ext := svc.Spec.ExternalIPs
	for _, in := range svc.Status.LoadBalancer.Ingress {
		ext = append(ext, in.IP+in.Hostname)
	}
	extS := strings.Join(ext, ",")
	if extS == "" {
		extS = "<none>"
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
			extS = "<pending>"
		}
	}
	typ := string(svc.Spec.Type)
	if typ == "" {
		typ = string(corev1.ServiceTypeClusterIP)
	}
	r := []string{svc.Name, typ, orNone(svc.Spec.ClusterIP), extS, orNone(strings.Join(ports, ",")), age(svc.CreationTimestamp, now)}
	if wide {
		r = append(r, selectorString(svc.Spec.Selector))
	}
	return r
}

func endpointsRow(obj cache.Object, wide bool, now time.Time) []string {
	//lint:ignore SA1019 core/v1 Endpoints are still served and printed.
	ep, ok := obj.(*corev1.Endpoints)
	if !ok {
		return genericRow(obj, wide, now)
	}
	var addrs []string
	for _, s := range ep.Subsets {
		for _, a := range s.Addresses {
			for _, p := range s.Ports {
				addrs = append(addrs, fmt.Sprintf("%s:%d", a.IP, p.Port))
			}
			if len(s.Ports) == 0 {
				addrs = append(addrs, a.IP)
			}
		}
	}
	shown := addrs
	if len(shown) > 3 {
		shown = shown[:3]
	}
	s := strings.Join(shown, ",")
	if len(addrs) > 3 {
		s += fmt.Sprintf(" + %d more...", len(addrs)-3)
	}
	return []string{ep.Name, orNone(s), age(ep.CreationTimestamp, now)}
}

func eventRow(obj cache.Object, wide bool, now time.Time) []string {
	ev, ok := obj.(*corev1.Event)
	if !ok {
		return genericRow(obj, wide, now)
	}
	last := ev.LastTimestamp
	if last.IsZero() {
		last = metav1.NewTime(ev.EventTime.Time)
	}
	if last.IsZero() {
		last = ev.CreationTimestamp
	}
	object := strings.ToLower(ev.InvolvedObject.Kind) + "/" + ev.InvolvedObject.Name
	return []string{age(last, now), ev.Type, ev.Reason, object, strings.TrimSpace(ev.Message)}
}

func deploymentRow(obj cache.Object, wide bool, now time.Time) []string {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return genericRow(obj, wide, now)
	}
	desired := int32(1)
	if d.Spec.Replicas != nil {
		desired = *d.Spec.Replicas
	}
	return []string{d.Name, fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, desired), fmt.Sprint(d.Status.UpdatedReplicas),
		fmt.Sprint(d.Status.AvailableReplicas), age(d.CreationTimestamp, now)}
}

func nodeRow(obj cache.Object, wide bool, now time.Time) []string {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return genericRow(obj, wide, now)
	}
	status := "Unknown"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			status = "NotReady"
			if c.Status == corev1.ConditionTrue {
				status = "Ready"
			}
		}
	}
	if n.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	return []string{n.Name, status, age(n.CreationTimestamp, now)}
}
