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
# The workqueue stress test at its full size (1M Adds, 8 workers), which the
# race detector's run above cuts to 100k.
go test -count=1 -run 'TestNoItemHeldByTwoWorkers$' ./workqueue
# The protobuf decoder against the generated code over its full count of
# random objects, which the race detector's run cuts to a tenth.
go test -count=1 -run 'MatchesGenerated|SkipManagedFields' ./client/internal/protodecode
(cd bench && go test -count=1 ./... && go run . -scale 100 >/dev/null)
(cd compat && go test -race -count=1 ./...)
# A kubebuilder-style operator whose tests run on listwatch's envtest.
(cd examples/kubebuilder && go test -race -count=1 ./...)
