#!/usr/bin/env bash
# record-goldens.sh records the golden API responses of test/golden from a
# real kube-apiserver.
#
# It builds kube-apiserver (k8s.io/kubernetes/cmd/kube-apiserver) and etcd
# (go.etcd.io/etcd/server/v3/etcdmain) from the Go module proxy in a
# temporary module outside this repository, generates the certificates, the
# service-account signing key and a static token file, starts etcd and
# kube-apiserver on free 127.0.0.1 ports, waits for /readyz, and runs
# test/golden/cmd/record, which replays test/golden/cases/*.yaml against it
# and writes test/golden/testdata/*.json.
#
#   hack/record-goldens.sh                  # every case file
#   hack/record-goldens.sh core-pods        # only these (file names without .yaml)
#
# Environment:
#   KUBE_VERSION      the kube-apiserver release (default v1.37.2; the staging
#                     modules are required at v0.${minor}.${patch})
#   KUBE_BUILD_DIR    where the built binaries are cached between runs
#                     (default ${XDG_CACHE_HOME:-~/.cache}/listwatch/kube-$KUBE_VERSION)
#   KUBE_REBUILD=1    rebuild the binaries even when cached
#   KEEP_WORK=1       keep the run directory (logs, certificates, etcd data)
#
# The only network it uses is the Go module proxy (for the build) and
# 127.0.0.1.
set -euo pipefail

SCRIPT=record-goldens
# shellcheck source=hack/lib/kube.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/kube.sh"

build_binaries
if [[ ${1:-} == --build-only ]]; then
	exit 0
fi

ONLY=$(
	IFS=,
	echo "$*"
)
make_work

log "building the recorder"
(cd "$REPO" && go build -o "$WORK/record" ./test/golden/cmd/record)

mkdir -p "$WORK/pki"
make_pki "$WORK/pki"
start_etcd "$WORK/etcd"
# listwatch's server answers shardSelector as kube-apiserver does with its
# alpha ShardedListAndWatch gate on (apiserver.Config), so the goldens are
# recorded with it on; it changes nothing for requests without one.
start_kube_apiserver "$WORK" --feature-gates=ShardedListAndWatch=true

start=$(date +%s)
if ! "$WORK/record" -server "https://127.0.0.1:$API_PORT" -ca "$WORK/pki/ca.crt" -token "$TOKEN" \
	-cases "$REPO/test/golden/cases" -out "$REPO/test/golden/testdata" -only "$ONLY"; then
	echo "record-goldens: recording failed; the last lines of kube-apiserver's log:" >&2
	tail -n 30 "$WORK/kube-apiserver.log" >&2
	KEEP_WORK=1
	exit 1
fi
log "recorded in $(($(date +%s) - start))s"
