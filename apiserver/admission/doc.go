// Package admission is the API server's client of itself and the
// admission it runs, as kube-apiserver has them: its loopback client (a
// client-go rest.Config whose transport calls the server's handler
// in-process, authenticated as system:apiserver in system:masters), a
// clientset and an informer factory over it, and kube-apiserver's default
// admission plugins initialised with both (apiserver/internal/kube), its
// admission webhooks among them.
//
// The plugins read other objects from those informers, which learn of a
// write a moment after it is stored; Writes, around the server's storage,
// counts the writes so that a write's admission can first wait until the
// informers hold every write stored before it (for the webhook
// configurations, until the webhook plugins have taken it: handlers.go).
package admission
