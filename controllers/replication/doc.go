// Package replication is the ReplicationManager: it keeps, for every
// ReplicationController, spec.replicas active pods made from the
// controller's template, and writes back what it finds in status.
//
// As in kube, it is the ReplicaSet controller run over RCs: Manager is
// replicaset.Manager with the replicaset.ReplicationControllers Kind, and
// its behaviour (expectations, burstReplicas and slow start, adoption and
// release, deletion ranking, status and the ReplicaFailure condition) is
// described and tested in package replicaset. The only difference is in
// status: an RC's has no terminatingReplicas.
//
// # Wiring
//
// In a controller-manager, with a REST client c (package client), which
// is also the informers' Source:
//
//	factory := informers.NewSharedInformerFactory(c, informers.Options{})
//	api := replication.NewClient(c)
//	podControl := &controller.RealPodControl{Client: api, Recorder: rec}
//	m, err := replication.New(informers.For[*corev1.Pod](factory),
//		informers.For[*corev1.ReplicationController](factory), api, podControl,
//		replication.Options{Recorder: rec})
//	factory.Start(ctx)
//	err = m.Run(ctx) // returns once ctx ends and the queue is drained
//	factory.Shutdown()
//
// The pod informer is meant to be shared with other controllers (the
// ReplicaSet controller, the endpoints controller); the factory runs one
// watch of pods for all.
package replication
