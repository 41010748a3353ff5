package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// TestKubectlAuth is authorization and authentication end to end with the
// real kubectl against `listwatch up`: RBAC bindings made with kubectl
// decide what an impersonated user (--as) and a service account may do,
// with kube's 403 wording; `kubectl auth can-i` (and --list) asks the
// server's SelfSubjectAccessReview and SelfSubjectRulesReview;
// `kubectl create token` issues a service account token that then
// authenticates as the service account; `kubectl auth whoami` answers who
// a credential is.
func TestKubectlAuth(t *testing.T) {
	e := newKubectlEnv(t)
	e.ok("create", "namespace", "authz")
	e.ok("-n", "authz", "create", "serviceaccount", "robot")
	e.ok("-n", "authz", "create", "configmap", "cm", "--from-literal=k=v")
	// view and edit are aggregated roles: their rules come from the
	// system:aggregate-to-* roles through the aggregation controller `up`
	// runs, a moment after start.
	for _, role := range []string{"view", "edit"} {
		waitFor(t, 30*time.Second, "aggregated rules in "+role, func() (bool, string) {
			r := e.run("get", "clusterrole", role, "-o", "jsonpath={.rules[*].verbs}")
			return r.err == nil && r.stdout != "", r.stdout
		})
	}
	e.ok("-n", "authz", "create", "rolebinding", "alice-view", "--clusterrole=view", "--user=alice")

	t.Run("view cannot delete", func(t *testing.T) {
		got := e.ok("--as=alice", "-n", "authz", "get", "configmap", "cm", "-o", "jsonpath={.data.k}").stdout
		if got != "v" {
			t.Errorf("get as alice: %q", got)
		}
		r := e.run("--as=alice", "-n", "authz", "delete", "configmap", "cm")
		want := `Error from server (Forbidden): configmaps "cm" is forbidden: User "alice" cannot delete resource "configmaps" in API group "" in the namespace "authz"`
		if r.err == nil || !strings.Contains(r.stderr, want) {
			t.Errorf("delete as alice: %v\n%s\nwant %s", r.err, r, want)
		}
		r = e.run("--as=alice", "get", "configmaps", "-n", "default")
		want = `Error from server (Forbidden): configmaps is forbidden: User "alice" cannot list resource "configmaps" in API group "" in the namespace "default"`
		if r.err == nil || !strings.Contains(r.stderr, want) {
			t.Errorf("list in default as alice: %v\n%s\nwant %s", r.err, r, want)
		}
		r = e.run("--as=alice", "get", "nodes")
		want = `Error from server (Forbidden): nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope`
		if r.err == nil || !strings.Contains(r.stderr, want) {
			t.Errorf("list nodes as alice: %v\n%s\nwant %s", r.err, r, want)
		}
	})

	t.Run("can-i", func(t *testing.T) {
		if got := e.ok("auth", "can-i", "get", "configmaps", "-n", "authz", "--as=alice").stdout; strings.TrimSpace(got) != "yes" {
			t.Errorf("can-i get: %q", got)
		}
		r := e.run("auth", "can-i", "delete", "configmaps", "-n", "authz", "--as=alice")
		if r.err == nil || strings.TrimSpace(r.stdout) != "no" {
			t.Errorf("can-i delete: %v %q", r.err, r.stdout)
		}
		if got := e.ok("auth", "can-i", "delete", "nodes").stdout; strings.TrimSpace(got) != "yes" {
			t.Errorf("can-i as the admin: %q", got)
		}
		list := e.ok("auth", "can-i", "--list", "-n", "authz", "--as=alice").stdout
		rows := tableRows(list)
		if len(rows) == 0 || strings.Join(rows[0], " ") != "Resources Non-Resource URLs Resource Names Verbs" {
			t.Fatalf("can-i --list: %q", list)
		}
		if !strings.Contains(list, "configmaps ") || !strings.Contains(list, "[get list watch]") ||
			!strings.Contains(list, "selfsubjectaccessreviews.authorization.k8s.io") || !strings.Contains(list, "[/healthz]") {
			t.Errorf("can-i --list lacks the rules of the bindings and bootstrap roles:\n%s", list)
		}
	})

	t.Run("as a service account", func(t *testing.T) {
		sa := "--as=system:serviceaccount:authz:robot"
		r := e.run(sa, "-n", "authz", "get", "configmaps")
		want := `Error from server (Forbidden): configmaps is forbidden: User "system:serviceaccount:authz:robot" cannot list resource "configmaps" in API group "" in the namespace "authz"`
		if r.err == nil || !strings.Contains(r.stderr, want) {
			t.Errorf("list as robot before its binding: %v\n%s\nwant %s", r.err, r, want)
		}
		e.ok("-n", "authz", "create", "rolebinding", "robot-edit", "--clusterrole=edit", "--serviceaccount=authz:robot")
		e.ok(sa, "-n", "authz", "create", "configmap", "by-robot")
	})

	t.Run("create token and whoami", func(t *testing.T) {
		tok := strings.TrimSpace(e.ok("-n", "authz", "create", "token", "robot", "--duration=10m").stdout)
		if strings.Count(tok, ".") != 2 {
			t.Fatalf("create token: %q is not a JWT", tok)
		}
		// A kubeconfig with the token alone: kube-apiserver authenticates
		// a client certificate before a bearer token, so --token next to
		// the admin's certificate would still be the admin.
		asToken := "--kubeconfig=" + tokenKubeconfig(t, e.kubeconfig, tok)
		who := e.ok(asToken, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}").stdout
		if want := `system:serviceaccount:authz:robot ["system:serviceaccounts","system:serviceaccounts:authz","system:authenticated"]`; who != want {
			t.Errorf("whoami with the token: %q, want %q", who, want)
		}
		// The token acts with the service account's bindings (edit's
		// rules without view's: write, not read).
		e.ok(asToken, "-n", "authz", "create", "configmap", "by-token")
		r := e.run(asToken, "get", "namespaces")
		if r.err == nil || !strings.Contains(r.stderr, `User "system:serviceaccount:authz:robot" cannot list resource "namespaces"`) {
			t.Errorf("list namespaces with the token: %v\n%s", r.err, r)
		}
		// Impersonation needs one of the impersonate verbs, which robot
		// lacks. The answer is kube's constrained impersonation filter's
		// (on by default since 1.36), naming the last mode it tried.
		r = e.run(asToken, "--as=bob", "-n", "authz", "get", "configmaps")
		want := `Error from server (Forbidden): configmaps is forbidden: User "system:serviceaccount:authz:robot" cannot impersonate-on:user-info:list resource "configmaps"`
		if r.err == nil || !strings.Contains(r.stderr, want) {
			t.Errorf("impersonation by robot: %v\n%s\nwant %s", r.err, r, want)
		}
		// A token outlives nothing it is bound to: its service account
		// deleted, it no longer authenticates.
		e.ok("-n", "authz", "delete", "serviceaccount", "robot")
		r = e.run(asToken, "auth", "whoami")
		if r.err == nil || !strings.Contains(r.stderr, "Unauthorized") {
			t.Errorf("whoami after the service account's deletion: %v\n%s", r.err, r)
		}
		admin := e.ok("auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}").stdout
		if want := upUser + ` ["system:masters","system:authenticated"]`; admin != want {
			t.Errorf("whoami: %q, want %q", admin, want)
		}
	})
}

// tokenKubeconfig writes a copy of the kubeconfig at path whose user has
// token as its only credential.
func tokenKubeconfig(t *testing.T, path, token string) string {
	t.Helper()
	raw, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range raw.AuthInfos {
		u.ClientCertificateData, u.ClientKeyData, u.Token = nil, nil, token
	}
	out := filepath.Join(t.TempDir(), "token-kubeconfig")
	if err := clientcmd.WriteToFile(*raw, out); err != nil {
		t.Fatal(err)
	}
	return out
}
