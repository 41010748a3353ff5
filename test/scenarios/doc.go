// Package scenarios holds scenario goldens of the controllers: each
// scenario creates objects in a namespace of its own and waits for an end
// state (a Job Complete, a CronJob's first Job finished, ...); the final
// objects — the scenario's objects, the objects the controllers made for
// them (Jobs, pods) and the events about all of them — are recorded once
// from kube-apiserver and kube-controller-manager v1.37.2
// (hack/record-scenarios.sh), and `go test ./test/scenarios` replays every
// scenario on listwatch's API server and controller-manager (envtest,
// controllermanager.AllControllers) and compares.
//
// Both sides run the same stand-in scheduler and kubelets
// (controllers/podlifecycle, with the same delays), so what differs is only
// what the controllers under test did.
//
// # What is masked, and why
//
// The comparison is of the whole objects, as JSON, after the rules of
// test/golden's Masker (uids, resourceVersions, creation and deletion
// timestamps, times under status, managedFields' times, names made from a
// generateName, the kube-api-access volume, the namespace's name), and
// these, all of which depend on when or where something ran rather than on
// what a controller decided:
//
//   - every RFC 3339 time anywhere (events' first and last timestamps,
//     conditions' transition times, the CronJob's scheduled-timestamp
//     annotation): <timestamp>;
//   - the minutes in the name of a Job a CronJob made ("<cronjob>-<minutes
//     since the epoch>"): {{minutes}} for the earliest, {{minutes+N}} for
//     N minutes later, kept as part of the name so that the naming rule
//     and the minutes between Jobs are compared;
//   - the names of a Job's, a ReplicaSet's or a DaemonSet's pods,
//     "<owner>-" and kube's five random characters, also once the pods
//     are gone (in events): <owner>-<suffix>;
//   - an Event's name, "<object>.<16 hex digits of the time>": the
//     object's part (masked as any other name) and <time>;
//   - the simulated nodes' names and addresses (node-N, hostIP, podIP):
//     <node>, <hostIP>, <podIP>, since the stand-in scheduler picks the
//     least loaded node at the time, and the host the stand-in scheduler
//     runs on, which its events name: <host>;
//   - an EndpointSlice's generation, which counts the controller's writes
//     of it: one per batch of pod changes it saw, a number that depends
//     on when the stand-in kubelets' changes came: <generation>;
//   - a Service's cluster IPs, allocated at random from the service range,
//     wherever they appear: <clusterIP>;
//   - the order of objects of one kind: they are sorted by their masked
//     JSON, since a list orders them by a name that is partly random.
//
// The events of kube's persistentvolume-controller (the binder, which
// listwatch does not run: a StatefulSet's claims stay Pending on both
// sides, and kube's binder records FailedBinding about them every 15
// seconds, a count that depends on time) are left out.
//
// Counts, reasons, messages, conditions, labels, annotations, owner
// references, finalizers, managedFields' managers and field sets, and every
// defaulted field are compared as recorded.
//
// One thing differs between the two runs, and is not masked but shifted:
// kube's recording of a CronJob waits in real time for the schedule's
// next minute; the replay gives listwatch's CronJob controller a clock
// set to a second before it (cronjob.Options.Now), so the schedule comes
// at once. Every time is masked, and the Job's name is compared as
// <cronjob>-{{minutes}}, so the shift shows in no compared field.
//
// The replay waits for the scenario's end state, then until the masked
// objects equal the golden (for at most a minute) and stay equal for a
// second, and fails with the differences of its last look: what converges
// to kube's state and stays there passes, whatever order listwatch took to
// get there.
package scenarios
