#!/usr/bin/env bash
# controlplane-kube.sh measures kube-controller-manager on the bench's
# control-plane workloads (bench/controlplane.go: an RC of 1,000 to
# readyReplicas, a Deployment of 1,000 to availableReplicas, a rollout of
# a Deployment of 1,000 to completion, a Job of 1,000 completions at
# parallelism 100 to Complete; with SIZE=100, a StatefulSet of 100 to
# readyReplicas and a DaemonSet over 100 nodes to numberAvailable), on
# this machine, with the bench's
# driver and its stand-in kubelet (podlifecycle), and listwatch's own rows
# in between, so that the ratio listwatch/kube-controller-manager is taken
# on the same minutes.
#
# For every round, workload and kube-controller-manager setting, it starts
# etcd, kube-apiserver and kube-controller-manager v1.37.2 (hack/lib/kube.sh
# builds them; its default controllers, the service-account key for the
# token and serviceaccount controllers, no leader election) on a fresh
# data directory, runs `bench -kubeconfig ... -run ^controlplane-<w>-1k$`
# against it (bench/controlplane_kube.go), and stops them. The setting
# listwatch-on-kube runs listwatch's controller-manager (in the bench's
# process, with -listwatch-controllers) on the same etcd and kube-apiserver
# with no kube-controller-manager: the two sets of controllers on the same
# API server. Then it runs the bench's own row of that workload (listwatch
# on its own API server, and the floor, in process).
#
#   hack/controlplane-kube.sh                      # rc, deployment, rollout, job; 2 rounds
#   ROUNDS=3 hack/controlplane-kube.sh rc          # only the RC, 3 rounds
#   SIZE=100 hack/controlplane-kube.sh statefulset daemonset
#   KCM_QPS="default 1000" hack/controlplane-kube.sh
#
# Environment: ROUNDS (2); ETCD_FSYNC (1: kube's etcd fsyncs, as the
# listwatch side's embedded etcd does; 0 runs it with --unsafe-no-fsync); SIZE (1k, or 10k for the rc and deployment
# rows); KCM_QPS, the kube-controller-manager settings to run, each
# "default" (kube's own --kube-api-qps 20 and --kube-api-burst 30: its
# client-side rate limit is part of what it does by default) or a number
# given to both flags (default "default 1000"); ON_KUBE=0 skips the
# listwatch-on-kube setting; OURS=0 skips listwatch's in-process rows;
# RESULTS, a file to which every row is appended as a JSON line
# with round, setting and load average added; and hack/lib/kube.sh's. It
# prints each run's table as it goes, and a summary of the times at the
# end. Not run by CI: it takes about a minute per run with raised QPS and
# several at kube's default QPS.
set -euo pipefail

SCRIPT=controlplane-kube
# shellcheck source=hack/lib/kube.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/kube.sh"

ROUNDS=${ROUNDS:-2}
# The bench's in-process etcd fsyncs, as `listwatch up`'s does and as a
# cluster's does: kube's etcd here does too, unless ETCD_FSYNC=0.
ETCD_FSYNC=${ETCD_FSYNC:-1}
SIZE=${SIZE:-1k}
OURS=${OURS:-1}
ON_KUBE=${ON_KUBE:-1}
read -r -a QPS_SETTINGS <<<"${KCM_QPS:-default 1000}"
WORKLOADS=("$@")
if [[ ${#WORKLOADS[@]} == 0 ]]; then
	WORKLOADS=(rc deployment rollout job)
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/controlplane-kube.XXXXXX")
RESULTS=${RESULTS:-$WORK/results.jsonl}
cleanup() {
	stop_all
	rm -rf "$WORK"
}
trap cleanup EXIT

build_kube_controller_manager
log "building the bench"
(cd "$REPO/bench" && go build -o "$WORK/bench" .)

mkdir -p "$WORK/pki"
make_pki "$WORK/pki"
KCM_TOKEN=$(add_kcm_token "$WORK/pki")

# start_qps_kcm starts kube-controller-manager with the QPS setting $2
# ("default" or a number for both --kube-api-qps and --kube-api-burst),
# its files in $1.
start_qps_kcm() {
	local run=$1 qps=$2 limits=()
	if [[ $qps != default ]]; then
		limits=(--kube-api-qps "$qps" --kube-api-burst "$qps")
	fi
	start_kcm "$run" "$WORK/pki" "$KCM_TOKEN" "${limits[@]}"
}

# record appends the bench's JSON rows on stdin to $RESULTS with the
# round $1, the setting $2 and the load average $3, and passes the table
# through.
record() {
	local line
	while IFS= read -r line; do
		if [[ $line == '{'* ]]; then
			jq -c --argjson round "$1" --arg setting "$2" --arg load "$3" \
				'. + {round: $round, setting: $setting, load: $load}' <<<"$line" >>"$RESULTS"
		else
			printf '%s\n' "$line"
		fi
	done
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

SETTINGS=()
for qps in "${QPS_SETTINGS[@]}"; do
	SETTINGS+=("kcm-qps-$qps")
done
if [[ $ON_KUBE == 1 ]]; then
	SETTINGS+=(listwatch-on-kube)
fi
status=0
for ((round = 1; round <= ROUNDS; round++)); do
	for w in "${WORKLOADS[@]}"; do
		row="controlplane-$w-$SIZE"
		for setting in "${SETTINGS[@]}"; do
			run=$WORK/run-$round-$w-$setting
			mkdir -p "$run"
			ln -s "$WORK/pki" "$run/pki"
			start_etcd "$run"
			start_kube_apiserver "$run"
			wait_ready "$API_PORT" "$WORK/pki/ca.crt"
			kubeconfig "$API_PORT" "$TOKEN" "$WORK/pki/ca.crt" >"$run/bench.kubeconfig"
			flags=(-kubeconfig "$run/bench.kubeconfig")
			if [[ $setting == kcm-qps-* ]]; then
				start_qps_kcm "$run" "${setting#kcm-qps-}"
				flags+=(-kcm-metrics "https://127.0.0.1:$KCM_PORT/metrics")
			else
				flags+=(-listwatch-controllers)
			fi
			load=$(loadavg)
			log "round $round: $row, $setting (load $load)"
			if ! "$WORK/bench" "${flags[@]}" -run "^$row\$" -json | record "$round" "$setting" "$load"; then
				log "round $round: $row, $setting failed"
				if [[ -f $run/kube-controller-manager.log ]]; then
					tail -20 "$run/kube-controller-manager.log" >&2
				fi
				status=1
			fi
			stop_all
			rm -rf "$run"
		done
		if [[ $OURS == 1 ]]; then
			load=$(loadavg)
			log "round $round: $row, listwatch (load $load)"
			"$WORK/bench" -run "^$row\$" -json | record "$round" listwatch "$load" || status=1
		fi
	done
done

log "summary: seconds per round (load average at the start of the run)"
jq -rs '
	map(select(.metric | startswith("time to")))
	| group_by(.workload)[]
	| .[0].workload as $w
	| (group_by(.impl + " " + .setting)[]
		| "\($w)  \(.[0].impl) (\(.[0].setting)): "
		  + (map("r\(.round) \(.value * 1000 | round / 1000)s [\(.load)]") | join(", ")))' "$RESULTS"
log "summary: listwatch / kube-controller-manager per round"
jq -rs '
	map(select(.metric | startswith("time to")))
	| group_by(.workload)[]
	| . as $rows
	| ["listwatch", "listwatch-on-kube"][] as $ours
	| ($rows | map(select(.impl == "listwatch" and .setting == $ours)) | map({key: (.round | tostring), value: .value}) | from_entries) as $lw
	| $rows | map(select(.impl == "kube-controller-manager"))[]
	| select($lw[.round | tostring] != null)
	| "\(.workload) round \(.round): \($ours) \($lw[.round | tostring] * 1000 | round / 1000)s / \(.setting) \(.value * 1000 | round / 1000)s = \($lw[.round | tostring] / .value * 100 | round / 100)x"' "$RESULTS"
log "rows: $RESULTS"
if [[ $RESULTS == "$WORK"/* ]]; then
	cp "$RESULTS" "${TMPDIR:-/tmp}/controlplane-kube-results.jsonl"
	log "copied to ${TMPDIR:-/tmp}/controlplane-kube-results.jsonl"
fi
exit "$status"
