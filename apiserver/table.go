package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Server-side printing: a client that accepts
// application/json;as=Table;g=meta.k8s.io;v=v1 (kubectl get) receives a
// meta.k8s.io Table whose columns are those kube-apiserver prints for the
// resource, so that kubectl shows the same output against this server.
// Columns of priority 1 are the extra ones of `-o wide`.

// tableVersion is the meta.k8s.io version a client asked the Table in.
type tableVersion string

// printer is the Table form of one resource: its columns and the cells of
// one object.
type printer struct {
	columns []metav1.TableColumnDefinition
	// cells returns one value per column; it may fail on an object the
	// typed form cannot hold.
	cells func(u *unstructured.Unstructured) ([]any, error)
}

func col(name, typ, desc string, priority int32) metav1.TableColumnDefinition {
	c := metav1.TableColumnDefinition{Name: name, Type: typ, Description: desc, Priority: priority}
	if name == "Name" {
		c.Format = "name"
	}
	return c
}

var (
	nameCol = col("Name", "string", "Name must be unique within a namespace. Cannot be updated.", 0)
	ageCol  = col("Age", "string", "CreationTimestamp is the time the object was created, shown as the time since then.", 0)
)

// printerFor returns the Table form of r: kube-apiserver's columns for the
// built-in resources, Name and Age for custom resources (the default of a
// CustomResourceDefinition without additionalPrinterColumns).
func printerFor(r *resource) printer {
	if r.custom {
		return printer{columns: []metav1.TableColumnDefinition{nameCol, ageCol}, cells: func(u *unstructured.Unstructured) ([]any, error) {
			return []any{u.GetName(), age(u)}, nil
		}}
	}
	switch r.gvk.Kind {
	case "Namespace":
		return printer{
			columns: []metav1.TableColumnDefinition{nameCol, col("Status", "string", "The status of the namespace", 0), ageCol},
			cells: typedCells(func(ns *corev1.Namespace, u *unstructured.Unstructured) []any {
				return []any{ns.Name, string(ns.Status.Phase), age(u)}
			}),
		}
	case "Pod":
		return podPrinter
	case "ReplicationController":
		return printer{
			columns: []metav1.TableColumnDefinition{
				nameCol,
				col("Desired", "integer", "Number of desired pods.", 0),
				col("Current", "integer", "Number of actually running pods.", 0),
				col("Ready", "integer", "Number of pods created that are ready.", 0),
				ageCol,
				col("Containers", "string", "Names of each container in the template.", 1),
				col("Images", "string", "Images referenced by each container in the template.", 1),
				col("Selector", "string", "Label query over pods that should match the replicas count.", 1),
			},
			cells: typedCells(func(rc *corev1.ReplicationController, u *unstructured.Unstructured) []any {
				desired := int64(1)
				if rc.Spec.Replicas != nil {
					desired = int64(*rc.Spec.Replicas)
				}
				var containers []corev1.Container
				if rc.Spec.Template != nil {
					containers = rc.Spec.Template.Spec.Containers
				}
				names, images := containerSummary(containers)
				return []any{rc.Name, desired, int64(rc.Status.Replicas), int64(rc.Status.ReadyReplicas), age(u),
					names, images, labels.FormatLabels(rc.Spec.Selector)}
			}),
		}
	case "Deployment":
		return printer{
			columns: []metav1.TableColumnDefinition{
				nameCol,
				col("Ready", "string", "Number of the pod with ready state", 0),
				col("Up-to-date", "string", "Total number of non-terminated pods targeted by this deployment that have the desired template spec.", 0),
				col("Available", "string", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.", 0),
				ageCol,
				col("Containers", "string", "Names of each container in the template.", 1),
				col("Images", "string", "Images referenced by each container in the template.", 1),
				col("Selector", "string", "Label selector for pods.", 1),
			},
			cells: typedCells(func(d *appsv1.Deployment, u *unstructured.Unstructured) []any {
				desired := int32(1)
				if d.Spec.Replicas != nil {
					desired = *d.Spec.Replicas
				}
				names, images := containerSummary(d.Spec.Template.Spec.Containers)
				sel := "<none>"
				if s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil && !s.Empty() {
					sel = s.String()
				}
				return []any{d.Name, fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, desired),
					int64(d.Status.UpdatedReplicas), int64(d.Status.AvailableReplicas), age(u), names, images, sel}
			}),
		}
	case "Service":
		return printer{
			columns: []metav1.TableColumnDefinition{
				nameCol,
				col("Type", "string", "How the service is exposed.", 0),
				col("Cluster-IP", "string", "The IP address of the service inside the cluster.", 0),
				col("External-IP", "string", "The IP addresses on which the service is also reachable from outside the cluster.", 0),
				col("Port(s)", "string", "The ports exposed by the service.", 0),
				ageCol,
				col("Selector", "string", "Route service traffic to pods with label keys and values matching this selector.", 1),
			},
			cells: typedCells(func(svc *corev1.Service, u *unstructured.Unstructured) []any {
				typ := svc.Spec.Type
				if typ == "" {
					typ = corev1.ServiceTypeClusterIP
				}
				return []any{svc.Name, string(typ), orNone(svc.Spec.ClusterIP), externalIPs(svc), servicePorts(svc.Spec.Ports), age(u),
					selectorOrNone(svc.Spec.Selector)}
			}),
		}
	case "Endpoints":
		return printer{
			columns: []metav1.TableColumnDefinition{nameCol, col("Endpoints", "string", "Endpoints of the service: address:port pairs.", 0), ageCol},
			//lint:ignore SA1019 v1 Endpoints is a resource this server serves
			cells: typedCells(func(ep *corev1.Endpoints, u *unstructured.Unstructured) []any {
				return []any{ep.Name, endpointsSummary(ep.Subsets), age(u)}
			}),
		}
	case "Event":
		return eventPrinter
	case "Lease":
		return printer{
			columns: []metav1.TableColumnDefinition{nameCol, col("Holder", "string", "The holder of the lease.", 0), ageCol},
			cells: typedCells(func(l *coordinationv1.Lease, u *unstructured.Unstructured) []any {
				holder := ""
				if l.Spec.HolderIdentity != nil {
					holder = *l.Spec.HolderIdentity
				}
				return []any{l.Name, holder, age(u)}
			}),
		}
	}
	return printer{columns: []metav1.TableColumnDefinition{nameCol, ageCol}, cells: func(u *unstructured.Unstructured) ([]any, error) {
		return []any{u.GetName(), age(u)}, nil
	}}
}

// typedCells adapts a function of the typed object to printer.cells.
func typedCells[T any](f func(*T, *unstructured.Unstructured) []any) func(*unstructured.Unstructured) ([]any, error) {
	return func(u *unstructured.Unstructured) ([]any, error) {
		t := new(T)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, t); err != nil {
			return nil, err
		}
		return f(t, u), nil
	}
}

// age is the time since creation as kubectl prints it ("5m", "3d4h").
func age(u *unstructured.Unstructured) string { return since(u.GetCreationTimestamp().Time) }

func since(t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func selectorOrNone(sel map[string]string) string {
	if len(sel) == 0 {
		return "<none>"
	}
	return labels.FormatLabels(sel)
}

func containerSummary(cs []corev1.Container) (names, images string) {
	n := make([]string, len(cs))
	im := make([]string, len(cs))
	for i, c := range cs {
		n[i], im[i] = c.Name, c.Image
	}
	return strings.Join(n, ","), strings.Join(im, ",")
}

func externalIPs(svc *corev1.Service) string {
	switch svc.Spec.Type {
	case corev1.ServiceTypeExternalName:
		return orNone(svc.Spec.ExternalName)
	case corev1.ServiceTypeLoadBalancer:
		var ips []string
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				ips = append(ips, in.IP)
			} else if in.Hostname != "" {
				ips = append(ips, in.Hostname)
			}
		}
		ips = append(ips, svc.Spec.ExternalIPs...)
		if len(ips) == 0 {
			return "<pending>"
		}
		return strings.Join(ips, ",")
	}
	if len(svc.Spec.ExternalIPs) > 0 {
		return strings.Join(svc.Spec.ExternalIPs, ",")
	}
	return "<none>"
}

func servicePorts(ports []corev1.ServicePort) string {
	if len(ports) == 0 {
		return "<none>"
	}
	out := make([]string, len(ports))
	for i, p := range ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		if p.NodePort != 0 {
			out[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, proto)
		} else {
			out[i] = fmt.Sprintf("%d/%s", p.Port, proto)
		}
	}
	return strings.Join(out, ",")
}

// endpointsSummary lists up to three address:port pairs and how many more.
//
//lint:ignore SA1019 v1 Endpoints is a resource this server serves
func endpointsSummary(subsets []corev1.EndpointSubset) string {
	const max = 3
	var list []string
	total := 0
	for _, ss := range subsets {
		for _, a := range ss.Addresses {
			if len(ss.Ports) == 0 {
				total++
				if len(list) < max {
					list = append(list, a.IP)
				}
				continue
			}
			for _, p := range ss.Ports {
				total++
				if len(list) < max {
					list = append(list, fmt.Sprintf("%s:%d", a.IP, p.Port))
				}
			}
		}
	}
	if total == 0 {
		return "<none>"
	}
	s := strings.Join(list, ",")
	if total > max {
		s += fmt.Sprintf(" + %d more...", total-max)
	}
	return s
}

var podPrinter = printer{
	columns: []metav1.TableColumnDefinition{
		nameCol,
		col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic.", 0),
		col("Status", "string", "The aggregate status of the containers in this pod.", 0),
		col("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.", 0),
		ageCol,
		col("IP", "string", "The IP address assigned to the pod.", 1),
		col("Node", "string", "The name of the node the pod is assigned to.", 1),
		col("Nominated Node", "string", "The node the pod is nominated to run on once preemption completes.", 1),
		col("Readiness Gates", "string", "The readiness gates of the pod, and how many of them are satisfied.", 1),
	},
	cells: typedCells(func(pod *corev1.Pod, u *unstructured.Unstructured) []any {
		ready, status, restarts := podState(pod)
		gates := "<none>"
		if n := len(pod.Spec.ReadinessGates); n > 0 {
			ok := 0
			for _, g := range pod.Spec.ReadinessGates {
				for _, c := range pod.Status.Conditions {
					if c.Type == g.ConditionType && c.Status == corev1.ConditionTrue {
						ok++
					}
				}
			}
			gates = fmt.Sprintf("%d/%d", ok, n)
		}
		return []any{pod.Name, ready, status, restarts, age(u),
			orNone(pod.Status.PodIP), orNone(pod.Spec.NodeName), orNone(pod.Status.NominatedNodeName), gates}
	}),
}

// podState is the READY, STATUS and RESTARTS of a pod as kubectl shows
// them: the phase unless a container or init container says more (a
// waiting or terminated reason), "Terminating" while being deleted.
func podState(pod *corev1.Pod) (ready, status, restarts string) {
	total := len(pod.Spec.Containers)
	readyN, restartN := 0, 0
	var lastRestart time.Time
	status = string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		status = pod.Status.Reason
	}
	note := func(cs corev1.ContainerStatus) {
		restartN += int(cs.RestartCount)
		if t := cs.LastTerminationState.Terminated; t != nil && t.FinishedAt.After(lastRestart) {
			lastRestart = t.FinishedAt.Time
		}
	}
	initializing := false
	for i, cs := range pod.Status.InitContainerStatuses {
		note(cs)
		switch {
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
			continue
		case cs.State.Terminated != nil:
			status = "Init:" + terminatedReason(cs.State.Terminated)
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "PodInitializing":
			status = "Init:" + cs.State.Waiting.Reason
		default:
			status = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		initializing = true
		break
	}
	if !initializing {
		running := false
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			cs := pod.Status.ContainerStatuses[i]
			note(cs)
			switch {
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
				status = cs.State.Waiting.Reason
			case cs.State.Terminated != nil:
				status = terminatedReason(cs.State.Terminated)
			case cs.Ready && cs.State.Running != nil:
				running = true
				readyN++
			}
		}
		if status == "Completed" && running {
			status = string(corev1.PodRunning)
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue {
					status = "NotReady"
				}
			}
		}
	}
	if pod.DeletionTimestamp != nil {
		status = "Terminating"
		if pod.Status.Reason == "NodeLost" {
			status = "Unknown"
		}
	}
	restarts = strconv.Itoa(restartN)
	if !lastRestart.IsZero() {
		restarts = fmt.Sprintf("%d (%s ago)", restartN, since(lastRestart))
	}
	return fmt.Sprintf("%d/%d", readyN, total), status, restarts
}

func terminatedReason(t *corev1.ContainerStateTerminated) string {
	switch {
	case t.Reason != "":
		return t.Reason
	case t.Signal != 0:
		return fmt.Sprintf("Signal:%d", t.Signal)
	default:
		return fmt.Sprintf("ExitCode:%d", t.ExitCode)
	}
}

var eventPrinter = printer{
	columns: []metav1.TableColumnDefinition{
		col("Last Seen", "string", "Time since the event was last observed.", 0),
		col("Type", "string", "Type of this event (Normal, Warning).", 0),
		col("Reason", "string", "A short, machine understandable reason for the event.", 0),
		col("Object", "string", "The object this event is about.", 0),
		col("Subobject", "string", "The part of the object this event is about.", 1),
		col("Source", "string", "The component reporting this event.", 1),
		col("Message", "string", "A human-readable description of the event.", 0),
		col("First Seen", "string", "Time since the event was first observed.", 1),
		col("Count", "integer", "The number of times this event has occurred.", 1),
		nameCol,
	},
	cells: typedCells(func(ev *corev1.Event, u *unstructured.Unstructured) []any {
		first, last := ev.FirstTimestamp.Time, ev.LastTimestamp.Time
		if first.IsZero() {
			first = ev.EventTime.Time
		}
		if ev.Series != nil {
			last = ev.Series.LastObservedTime.Time
		} else if last.IsZero() {
			last = first
		}
		count := ev.Count
		if ev.Series != nil {
			count = ev.Series.Count
		} else if count == 0 {
			count = 1
		}
		src := ev.Source.Component
		if src == "" {
			src = ev.ReportingController
		}
		if ev.Source.Host != "" {
			src += ", " + ev.Source.Host
		}
		obj := strings.ToLower(ev.InvolvedObject.Kind) + "/" + ev.InvolvedObject.Name
		return []any{since(last), ev.Type, ev.Reason, obj, ev.InvolvedObject.FieldPath, src, strings.TrimSpace(ev.Message),
			since(first), int64(count), ev.Name}
	}),
}

// The Event printer's Name column is of priority 1 (`-o wide` only).
func init() { eventPrinter.columns[len(eventPrinter.columns)-1].Priority = 1 }

// includeObject is the includeObject query parameter of a Table request.
type includeObject string

const (
	includeNone     includeObject = "None"
	includeMetadata includeObject = "Metadata"
	includeObjectIt includeObject = "Object"
)

func parseIncludeObject(r *http.Request) (includeObject, error) {
	switch v := includeObject(r.URL.Query().Get("includeObject")); v {
	case "":
		return includeMetadata, nil
	case includeNone, includeMetadata, includeObjectIt:
		return v, nil
	default:
		return "", badRequest("includeObject must be one of None, Metadata or Object, not %q", v)
	}
}

// tabler builds Tables for one request.
type tabler struct {
	p       printer
	version tableVersion
	include includeObject
}

func newTabler(r *http.Request, res *resource, v tableVersion) (*tabler, error) {
	inc, err := parseIncludeObject(r)
	if err != nil {
		return nil, err
	}
	return &tabler{p: printerFor(res), version: v, include: inc}, nil
}

// row is the table row of one object with the object embedded as asked.
func (t *tabler) row(u *unstructured.Unstructured) (metav1.TableRow, error) {
	cells, err := t.p.cells(u)
	if err != nil {
		return metav1.TableRow{}, apierrors.NewInternalError(fmt.Errorf("printing %s %s: %w", u.GetKind(), u.GetName(), err))
	}
	row := metav1.TableRow{Cells: cells}
	var embed any
	switch t.include {
	case includeObjectIt:
		embed = u.Object
	case includeMetadata:
		embed = map[string]any{
			"kind":       "PartialObjectMetadata",
			"apiVersion": "meta.k8s.io/" + string(t.version),
			"metadata":   u.Object["metadata"],
		}
	}
	if embed != nil {
		raw, err := json.Marshal(embed)
		if err != nil {
			return row, apierrors.NewInternalError(err)
		}
		row.Object = runtime.RawExtension{Raw: raw}
	}
	return row, nil
}

// table renders objects; withColumns false leaves out the column
// definitions (watch events after the first, as kube-apiserver sends).
func (t *tabler) table(items []*unstructured.Unstructured, md metav1.ListMeta, withColumns bool) (*metav1.Table, error) {
	tbl := &metav1.Table{
		TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/" + string(t.version)},
		ListMeta: md,
		Rows:     []metav1.TableRow{},
	}
	if withColumns {
		tbl.ColumnDefinitions = t.p.columns
	}
	for _, u := range items {
		row, err := t.row(u)
		if err != nil {
			return nil, err
		}
		tbl.Rows = append(tbl.Rows, row)
	}
	return tbl, nil
}

// listMeta reads the list metadata of a <Kind>List built by listObject.
func listMeta(u *unstructured.Unstructured) metav1.ListMeta {
	md := metav1.ListMeta{ResourceVersion: u.GetResourceVersion(), Continue: u.GetContinue()}
	md.RemainingItemCount = u.GetRemainingItemCount()
	return md
}

// listItems returns the items of a list built by listObject, or the
// object itself.
func listItems(u *unstructured.Unstructured) []*unstructured.Unstructured {
	items, ok := u.Object["items"].([]any)
	if !ok {
		return []*unstructured.Unstructured{u}
	}
	out := make([]*unstructured.Unstructured, 0, len(items))
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out
}

// writeTable answers a get or list with its Table.
func writeTable(w http.ResponseWriter, r *http.Request, res *resource, v tableVersion, code int, u *unstructured.Unstructured) error {
	t, err := newTabler(r, res, v)
	if err != nil {
		return err
	}
	md := metav1.ListMeta{ResourceVersion: u.GetResourceVersion()}
	if _, isList := u.Object["items"]; isList {
		md = listMeta(u)
	}
	tbl, err := t.table(listItems(u), md, true)
	if err != nil {
		return err
	}
	body, err := json.Marshal(tbl)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	w.Header().Set("Content-Type", mediaJSON)
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
	return nil
}
