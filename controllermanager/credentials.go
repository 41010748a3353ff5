package controllermanager

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/client"
)

// ServiceAccountNamespace is the namespace of the controllers' service
// accounts, kube-controller-manager's.
const ServiceAccountNamespace = "kube-system"

// ServiceAccountUser is the user a controller acting as service account
// name is (system:serviceaccount:kube-system:name), the subject of kube's
// bootstrap controller role bindings.
func ServiceAccountUser(name string) string {
	return "system:serviceaccount:" + ServiceAccountNamespace + ":" + name
}

// controllerAccounts are the service accounts the controllers act as with
// Config.ServiceAccountCredentials: kube-controller-manager's, those its
// bootstrap controller roles (bootstrappolicy.ControllerRoles) are bound
// to. PodLifecycle has none: it stands in for the nodes' kubelets, not for
// a controller of kube-controller-manager, and keeps the manager's
// credentials.
var controllerAccounts = map[string]string{
	Replication:            "replication-controller",
	ReplicaSet:             "replicaset-controller",
	Endpoints:              "endpoint-controller",
	GarbageCollector:       "generic-garbage-collector",
	Namespace:              "namespace-controller",
	ServiceAccount:         "service-account-controller",
	RootCACert:             "root-ca-cert-publisher",
	Deployment:             "deployment-controller",
	ClusterRoleAggregation: "clusterrole-aggregation-controller",
	Job:                    "job-controller",
	CronJob:                "cronjob-controller",
	TTLAfterFinished:       "ttl-after-finished-controller",
	StatefulSet:            "statefulset-controller",
	DaemonSet:              "daemon-set-controller",
	AdmissionPolicyStatus:  "validatingadmissionpolicy-status-controller",
	ResourceQuota:          "resourcequota-controller",
	EndpointSlice:          "endpointslice-controller",
	EndpointSliceMirroring: "endpointslicemirroring-controller",
	Disruption:             "disruption-controller",
}

// ControllerUser returns the user controller name acts as with
// Config.ServiceAccountCredentials, and false for a controller that keeps
// the manager's credentials.
func ControllerUser(name string) (string, bool) {
	a, ok := controllerAccounts[name]
	if !ok {
		return "", false
	}
	return ServiceAccountUser(a), true
}

// controllerClients makes, for each of names that has a service account,
// a client that impersonates it.
//
// kube-controller-manager with --use-service-account-credentials gives
// each controller a token of its own service account in kube-system; the
// user and groups the server sees are the same when the manager's own
// credentials impersonate that user, which needs no service account
// object or token rotation, and which the server's impersonation filter
// (kube's) completes with the service account's groups. The manager's
// credentials must be allowed to impersonate service accounts
// (system:masters is).
func controllerClients(base *client.Config, names []string) (map[string]*client.Client, error) {
	out := map[string]*client.Client{}
	for _, n := range names {
		account, ok := controllerAccounts[n]
		if !ok {
			continue
		}
		cc := *base
		cc.REST = rest.CopyConfig(base.REST)
		cc.REST.Impersonate = rest.ImpersonationConfig{UserName: ServiceAccountUser(account)}
		// As client-go's AddUserAgent marks a controller's client.
		cc.UserAgent = base.UserAgent + "/" + account
		cl, err := client.New(&cc)
		if err != nil {
			return nil, fmt.Errorf("client of %s: %w", ServiceAccountUser(account), err)
		}
		out[n] = cl
	}
	return out, nil
}

// clientOf is the client controller name writes with: its service
// account's with Config.ServiceAccountCredentials, the manager's
// otherwise.
func (d deps) clientOf(name string) *client.Client {
	if c, ok := d.m.clients[name]; ok {
		return c
	}
	return d.m.client
}

// clientsetOf is a client-go clientset for controller name, with the
// credentials clientOf's client has, for the kube code that writes through
// one (the EndpointSlice reconcilers): the manager's transport (its
// metrics, its caller's wrappers) and, with
// Config.ServiceAccountCredentials, the impersonation of the controller's
// service account; the manager's rate limits.
func (d deps) clientsetOf(name string) (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(d.m.restConfig)
	if account, ok := controllerAccounts[name]; ok && d.m.cfg.ServiceAccountCredentials {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: ServiceAccountUser(account)}
		cfg.UserAgent = d.m.userAgent + "/" + account
	} else {
		cfg.UserAgent = d.m.userAgent
	}
	switch qps := d.m.cfg.Client.QPS; {
	case qps < 0:
		cfg.QPS = -1 // no limit, in client-go's terms too
	case qps > 0:
		cfg.QPS, cfg.Burst = qps, max(d.m.cfg.Client.Burst, 1)
	default:
		cfg.QPS, cfg.Burst = client.DefaultQPS, client.DefaultBurst
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("clientset of %s: %w", name, err)
	}
	return cs, nil
}
