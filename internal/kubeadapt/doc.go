// Package kubeadapt fits listwatch's informers, listers and event
// recorders to the client-go interfaces that Kubernetes' own controller
// code takes (record.EventRecorder, the typed listers, the typed
// informers), so that the controllers here can call kube's code on the
// caches they already share rather than on watches of their own.
package kubeadapt
