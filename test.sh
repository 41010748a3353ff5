#!/usr/bin/env bash
# The test command: every package with the race detector, then the workqueue
# stress test and the protobuf decoder's comparisons without it, at full
# size, then a smoke run of the bench harness (every workload at a
# hundredth of its size: about 140 s of CPU against 360 s at -quick's
# tenth) so that it keeps building and running, then the
# compatibility module: real client-go against listwatch's API server, and
# the kubebuilder-style example's module.
set -euo pipefail
cd "$(dirname "$0")"
# The API server package runs about 5 minutes under the race detector on
# 2 cores; the timeout leaves it room on a slower machine.
go test -race -count=1 -timeout 20m ./...
# The rest runs side by side: the bench's smoke run spends most of its
# time waiting on its workloads' timers (350 s of wall time for 139 s of
# CPU), which the other two fill.
pids=()
(
	# The workqueue stress test at its full size (1M Adds, 8 workers),
	# which the race detector's run above cuts to 100k; the protobuf
	# decoder against the generated code over its full count of random
	# objects, which the race detector's run cuts to a tenth.
	go test -count=1 -run 'TestNoItemHeldByTwoWorkers$' ./workqueue
	go test -count=1 -run 'MatchesGenerated|SkipManagedFields' ./client/internal/protodecode
) &
pids+=($!)
(cd bench && go test -count=1 ./... && go run . -scale 100 >/dev/null) &
pids+=($!)
(
	# The compatibility module: real client-go against listwatch's API
	# server; then a kubebuilder-style operator whose tests run on
	# listwatch's envtest.
	cd compat && go test -race -count=1 ./...
	cd ../examples/kubebuilder && go test -race -count=1 ./...
) &
pids+=($!)
status=0
for pid in "${pids[@]}"; do
	wait "$pid" || status=1
done
exit "$status"
