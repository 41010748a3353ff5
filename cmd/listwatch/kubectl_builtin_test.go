package main

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"
)

// TestKubectlBuiltinResources runs what a new user tries first with the
// built-in resources beyond pods and RCs, with the real kubectl against
// `listwatch up`: each command succeeds, and what the server stored is
// what kube-apiserver would have stored (defaults filled in, a ClusterIP
// allocated), and a namespace with content is deleted as a cluster
// deletes it.
func TestKubectlBuiltinResources(t *testing.T) {
	e := newKubectlEnv(t)
	e.ok("create", "namespace", "scratch")

	creates := []struct {
		name string
		args []string
		// get is the resource/name to read back.
		get string
	}{
		{"configmap", []string{"create", "configmap", "cfg", "--from-literal=a=b"}, "configmap/cfg"},
		{"secret", []string{"create", "secret", "generic", "creds", "--from-literal=password=s3cret"}, "secret/creds"},
		{"serviceaccount", []string{"create", "serviceaccount", "robot"}, "serviceaccount/robot"},
		{"deployment", []string{"create", "deployment", "web", "--image=nginx:1.27", "--replicas=2"}, "deployment/web"},
		{"job", []string{"create", "job", "once", "--image=busybox"}, "job/once"},
		{"role", []string{"create", "role", "reader", "--verb=get,list", "--resource=pods"}, "role/reader"},
		{"rolebinding", []string{"create", "rolebinding", "read", "--role=reader", "--serviceaccount=scratch:robot"}, "rolebinding/read"},
		{"expose", []string{"expose", "deployment", "web", "--port=80", "--target-port=8080"}, "service/web"},
	}
	objs := map[string]map[string]any{}
	for _, c := range creates {
		e.ok(append(c.args, "-n", "scratch")...)
		out := e.ok("get", c.get, "-n", "scratch", "-o", "json").stdout
		var obj map[string]any
		if err := json.Unmarshal([]byte(out), &obj); err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, out)
		}
		objs[c.name] = obj
	}

	// Kubernetes' defaulting, as kube-apiserver fills it in.
	checks := []struct {
		obj  string
		path []string
		want any
	}{
		{"configmap", []string{"data", "a"}, "b"},
		{"secret", []string{"type"}, "Opaque"},
		{"deployment", []string{"spec", "strategy", "type"}, "RollingUpdate"},
		{"deployment", []string{"spec", "revisionHistoryLimit"}, float64(10)},
		{"deployment", []string{"spec", "progressDeadlineSeconds"}, float64(600)},
		{"deployment", []string{"spec", "template", "spec", "restartPolicy"}, "Always"},
		{"deployment", []string{"spec", "template", "spec", "dnsPolicy"}, "ClusterFirst"},
		{"deployment", []string{"spec", "template", "spec", "schedulerName"}, "default-scheduler"},
		{"job", []string{"spec", "backoffLimit"}, float64(6)},
		{"job", []string{"spec", "completionMode"}, "NonIndexed"},
		{"job", []string{"spec", "template", "spec", "restartPolicy"}, "Never"},
		{"service", []string{"spec", "type"}, "ClusterIP"},
		{"service", []string{"spec", "sessionAffinity"}, "None"},
	}
	objs["service"] = objs["expose"]
	for _, c := range checks {
		if got := nestedValue(objs[c.obj], c.path...); got != c.want {
			t.Errorf("%s %s = %v, want %v", c.obj, strings.Join(c.path, "."), got, c.want)
		}
	}
	containers, _ := nestedValue(objs["deployment"], "spec", "template", "spec", "containers").([]any)
	if len(containers) != 1 {
		t.Fatalf("deployment containers = %v", containers)
	}
	c0, _ := containers[0].(map[string]any)
	for field, want := range map[string]string{
		"imagePullPolicy":          "IfNotPresent",
		"terminationMessagePath":   "/dev/termination-log",
		"terminationMessagePolicy": "File",
	} {
		if c0[field] != want {
			t.Errorf("deployment container %s = %v, want %q", field, c0[field], want)
		}
	}
	if ip, _ := nestedValue(objs["service"], "spec", "clusterIP").(string); net.ParseIP(ip) == nil {
		t.Errorf("service web has no ClusterIP: %q", ip)
	}

	// kubectl explain reads the server's OpenAPI, which has Kubernetes'
	// descriptions of the fields.
	explains := []struct {
		field string
		// want are parts of the output, as kubectl wraps it.
		want []string
	}{
		{"configmaps", []string{"KIND:", "ConfigMap holds configuration data for pods to consume."}},
		{"deployments.spec.strategy", []string{"FIELD: strategy", "The deployment strategy to use to replace existing pods with new ones."}},
		{"jobs.spec.backoffLimit", []string{"FIELD: backoffLimit <integer>", "Specifies the number of retries before marking this job failed."}},
		{"pods.spec.containers", []string{"FIELD: containers <[]Container>", "List of containers belonging to the pod.", "imagePullPolicy\t<string>"}},
	}
	for _, ex := range explains {
		out := e.ok("explain", ex.field).stdout
		for _, want := range ex.want {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl explain %s lacks %q:\n%s", ex.field, want, out)
			}
		}
	}

	// A namespace with content goes Terminating, its content goes, then
	// it goes; a namespace of the same name made afterwards is empty.
	e.ok("delete", "namespace", "scratch", "--wait=false")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r := e.run("get", "namespace", "scratch", "-o", "jsonpath={.status.phase}")
		if r.err != nil && strings.Contains(r.stderr, "NotFound") {
			break
		}
		if r.err == nil && r.stdout != "Terminating" {
			t.Fatalf("namespace scratch phase %q while deleting", r.stdout)
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace scratch still there after 2 minutes:\n%s", e.run("get", "namespace", "scratch", "-o", "yaml"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	e.ok("create", "namespace", "scratch")
	out := e.ok("get", "configmaps,secrets,serviceaccounts,deployments,jobs,roles,rolebindings,services", "-n", "scratch", "-o", "name").stdout
	for _, line := range strings.Fields(out) {
		// What the controllers make in every namespace: the service
		// account controller "default", the root CA publisher
		// kube-root-ca.crt.
		if line != "serviceaccount/default" && line != "configmap/kube-root-ca.crt" {
			t.Errorf("left over in the recreated namespace: %s", line)
		}
	}
}

// nestedValue reads a value at path in a decoded JSON object.
func nestedValue(obj map[string]any, path ...string) any {
	var v any = obj
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}
