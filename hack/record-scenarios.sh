#!/usr/bin/env bash
# record-scenarios.sh records the scenario goldens of test/scenarios from
# kube-apiserver and kube-controller-manager v1.37.2.
#
# It builds them and etcd from the Go module proxy (hack/lib/kube.sh; cached
# under ~/.cache/listwatch/kube-$KUBE_VERSION), starts etcd, kube-apiserver
# and kube-controller-manager (its default controllers, no leader election)
# on free 127.0.0.1 ports, and runs the scenarios' Go test in recording
# mode against them: the test runs listwatch's stand-in nodes
# (controllers/podlifecycle) in its own process, as the replay does, and
# writes test/scenarios/testdata/<scenario>.json.
#
#   hack/record-scenarios.sh                 # every scenario
#   hack/record-scenarios.sh job-complete    # only these (go test -run patterns)
#
# Environment: KEEP_WORK=1 keeps the run directory (logs, certificates,
# etcd data), and hack/lib/kube.sh's. Not run by CI: a CronJob's scenario
# waits for its schedule, up to a minute.
set -euo pipefail

SCRIPT=record-scenarios
# shellcheck source=hack/lib/kube.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/kube.sh"

build_kube_controller_manager
make_work
mkdir -p "$WORK/pki" "$WORK/kcm"
make_pki "$WORK/pki"
KCM_TOKEN=$(add_kcm_token "$WORK/pki")
start_etcd "$WORK/etcd"
start_kube_apiserver "$WORK"
wait_ready "$API_PORT" "$WORK/pki/ca.crt"
start_kcm "$WORK/kcm" "$WORK/pki" "$KCM_TOKEN"
kubeconfig "$API_PORT" "$TOKEN" "$WORK/pki/ca.crt" >"$WORK/recorder.kubeconfig"

run=TestScenarios
if [[ $# -gt 0 ]]; then
	run="TestScenarios/^($(
		IFS='|'
		echo "$*"
	))\$"
fi
start=$(date +%s)
if ! (cd "$REPO" && go test -count=1 -v -timeout 20m -run "$run" ./test/scenarios -kubeconfig "$WORK/recorder.kubeconfig"); then
	log "recording failed; the last lines of kube-controller-manager's log:"
	tail -n 30 "$WORK/kcm/kube-controller-manager.log" >&2
	KEEP_WORK=1
	exit 1
fi
log "recorded in $(($(date +%s) - start))s"
