#!/usr/bin/env bash
# The test command: every package with the race detector, then a quick run
# of the bench harness so that it keeps building and running, then the
# compatibility module: real client-go against listwatch's API server.
set -euo pipefail
cd "$(dirname "$0")"
go test -race -count=1 ./...
(cd bench && go test -count=1 ./... && go run . -quick >/dev/null)
(cd compat && go test -race -count=1 ./...)
