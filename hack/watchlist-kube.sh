#!/usr/bin/env bash
# watchlist-kube.sh runs listwatch's streaming-list test
# (TestInformerStartsWithAStreamingList in cmd/listwatch) against a real
# kube-apiserver: once as it starts by default (streaming lists on), once
# with --feature-gates=WatchList=false. The test checks the server's own
# apiserver_request_total and apiserver_longrunning_requests: no LIST for
# an informer's initial state when streaming is on; one refused watch (422)
# and one LIST when it is off.
#
# It builds kube-apiserver and etcd from the Go module proxy as
# record-goldens.sh does (same cache, same environment variables), and
# writes what the test logged to cmd/listwatch/testdata/watchlist-kube.log.
set -euo pipefail

SCRIPT=watchlist-kube
# shellcheck source=hack/lib/kube.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/kube.sh"

build_binaries
make_work

log "building the test"
(cd "$REPO" && go test -c -o "$WORK/listwatch.test" ./cmd/listwatch)
mkdir -p "$WORK/pki"
make_pki "$WORK/pki"
start_etcd "$WORK/etcd"
OUT=$REPO/cmd/listwatch/testdata/watchlist-kube.log
mkdir -p "$(dirname "$OUT")"
echo "# TestInformerStartsWithAStreamingList against kube-apiserver $KUBE_VERSION ($(date -u +%Y-%m-%d))" >"$OUT"
for on in true false; do
	start_kube_apiserver "$WORK" "--feature-gates=WatchList=$on"
	wait_ready "$API_PORT" "$WORK/pki/ca.crt"
	kubeconfig "$API_PORT" "$TOKEN" "$WORK/pki/ca.crt" >"$WORK/kubeconfig"
	log "testing against kube-apiserver with WatchList=$on"
	echo "## --feature-gates=WatchList=$on" >>"$OUT"
	if ! (cd "$REPO/cmd/listwatch" && LISTWATCH_TEST_KUBECONFIG=$WORK/kubeconfig LISTWATCH_TEST_WATCHLIST=$on \
		"$WORK/listwatch.test" -test.run '^TestInformerStartsWithAStreamingList$' -test.v -test.count=1) |
		grep -E '^(=== RUN|--- |\s+watchlist_test.go|PASS|FAIL|ok)' | tee -a "$OUT"; then
		KEEP_WORK=1
	fi
	if grep -q '^--- FAIL' "$OUT"; then
		echo "$SCRIPT: the test failed; the last lines of kube-apiserver's log:" >&2
		tail -n 30 "$WORK/kube-apiserver.log" >&2
		KEEP_WORK=1
		exit 1
	fi
	stop "$API_PID"
	PIDS=("$ETCD_PID")
done
log "wrote $OUT"
