// Package replication is the ReplicationManager: it keeps, for every
// ReplicationController, spec.replicas active pods made from the
// controller's template, and writes back what it finds in status.
//
// It reads RCs and pods from two informers (in a process, the factory's
// shared ones), turns their events into RC keys on a rate-limited workqueue,
// and runs workers that sync one RC at a time:
//
//   - the pods of the RC's namespace that are active (not finished, not
//     being deleted) are claimed through controller owner references:
//     matching orphans are adopted (after a fresh, uncached read of the RC
//     proves it still exists and is not being deleted), owned pods that no
//     longer match are released;
//   - if the RC's expectations are satisfied (every create and delete it
//     asked for earlier has been seen in the cache) and it is not being
//     deleted, the difference to spec.replicas is made up: at most
//     BurstReplicas creations per sync, in slow-start batches of 1, 2, 4, …,
//     or at most BurstReplicas deletions of the pods that cost least to lose
//     (controller.CompareForDeletion);
//   - status (replicas, fullyLabeledReplicas, readyReplicas,
//     availableReplicas, observedGeneration and the ReplicaFailure
//     condition) is written when it changed.
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
// endpoints controller, say); the factory runs one watch of pods for all.
package replication
