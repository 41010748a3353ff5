// Package replicaset is the ReplicaSet controller: it keeps, for every
// ReplicaSet, spec.replicas active pods made from its template, and
// writes back what it finds in status. The same code, over another Kind,
// is kube's ReplicationManager for ReplicationControllers (package
// replication wires it so): Manager is generic over the Go type of the
// objects it serves, and a Kind (ReplicaSets, ReplicationControllers)
// reads their selector, replicas, template and minReadySeconds and reads
// and writes their status.
//
// It reads the objects and pods from two informers (in a process, the
// factory's shared ones), turns their events into object keys on a
// rate-limited workqueue, and runs workers that sync one object at a time:
//
//   - the object's pods are read from its view: what its last sync saw
//     of the pods it controls, brought up to date from the pods the
//     informer's events touched since, so that a sync costs what
//     changed rather than what the object owns (a view is rebuilt from
//     the pod index when the object changes its selector, template
//     labels or minReadySeconds). The active orphans of its namespace
//     are read too. Matching orphans are adopted (after a fresh,
//     uncached read of the object proves it still exists and is not
//     being deleted), active owned pods that no longer match are
//     released;
//   - if the object's expectations are satisfied (every create and delete
//     it asked for earlier has been seen in the cache) and it is not being
//     deleted, the difference to spec.replicas is made up: at most
//     BurstReplicas creations per sync, in slow-start batches of 1, 2, 4,
//     …, or at most BurstReplicas deletions of the pods that cost least to
//     lose (controller.CompareForDeletion);
//   - status (replicas, fullyLabeledReplicas, readyReplicas,
//     availableReplicas, terminatingReplicas for ReplicaSets,
//     observedGeneration and the ReplicaFailure condition) is written when
//     it differs from the controller's own last write, or from the cached
//     object once the informer has shown that (controller.Writes). The
//     write has no resourceVersion precondition, the controller being the
//     status's only writer: kube's sends one and, refused because the
//     Deployment controller scaled the object meanwhile, reads it and
//     writes the same status again. A status on its way up (pods being
//     created or becoming ready) is written at most every StatusInterval;
//     one others wait on is written at once (see statusDelay).
//
// Expectations are what keep a lagging cache from causing duplicate pods:
// a sync that created or deleted pods does not compute another difference
// until the informer has shown it the outcome, or until
// controller.ExpectationsTimeout has passed.
//
// # Wiring
//
// In a controller-manager, with a REST client c (package client), which
// is also the informers' Source:
//
//	factory := informers.NewSharedInformerFactory(c, informers.Options{})
//	api := replicaset.NewClient[*appsv1.ReplicaSet](c)
//	podControl := &controller.RealPodControl{Client: api, Recorder: rec}
//	m, err := replicaset.New(replicaset.ReplicaSets{}, informers.For[*corev1.Pod](factory),
//		informers.For[*appsv1.ReplicaSet](factory), api, podControl,
//		replicaset.Options{Recorder: rec})
//	factory.Start(ctx)
//	err = m.Run(ctx) // returns once ctx ends and the queue is drained
//	factory.Shutdown()
//
// The pod informer is meant to be shared with other controllers (the
// ReplicationManager, the endpoints controller); the factory runs one
// watch of pods for all, and the managers of both kinds share their pod
// indices.
package replicaset
