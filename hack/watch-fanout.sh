#!/usr/bin/env bash
# watch-fanout.sh measures watch fan-out over HTTPS side by side:
# kube-apiserver and listwatch at one or more git revisions, each on a fresh
# etcd of kube-apiserver's build (hack/lib/kube.sh). For each target it
# starts the server and runs bench/watchload: WATCHERS watches of one
# namespace's PODS pods, over HTTP/2 connections of PER_CONN streams each,
# while the pods are merge-patched round-robin at RATE updates per second
# for WARMUP and then DURATION. It prints one JSON line per run — the
# delivery latency percentiles over every watcher, the watches the server
# ended and why, the updates missed, the CPU seconds of the server and its
# etcd in the measured time, and the load average before the server was
# started (loadBefore: other work on the machine) — then one per target with
# the medians over the rounds and their ratios to kube-apiserver's.
#
#   hack/watch-fanout.sh                        # kube and listwatch at HEAD: 1,000 watchers, 200 updates/s
#   ROUNDS=3 hack/watch-fanout.sh kube HEAD     # kube, listwatch, kube, listwatch, ...
#   WATCHERS=100 RATE=50 hack/watch-fanout.sh kube .
#                                               # smaller, against the working tree
#   PROFILE=1 hack/watch-fanout.sh              # also each server's CPU profile of the
#                                               # measured time, in OUT
#
# Targets are named as hack/create-throughput.sh names them (kube, REV,
# REV:memory). Environment: WATCHERS (1000), PODS (100), RATE (200),
# DURATION (30s), WARMUP (5s), PER_CONN (100: kube-apiserver's default limit
# of concurrent streams per connection; listwatch's, Go's, is 250), ROUNDS
# (1: targets run in turn, ROUNDS times, so that load on the machine falls
# on all of them alike), PROFILE (1: keep CPU profiles; kube-apiserver then
# runs with --profiling), OUT (where the results, profiles and servers' logs
# are kept; default a directory under /tmp, printed at the end), and
# hack/lib/kube.sh's. Not run by CI.
set -euo pipefail

SCRIPT=watch-fanout
# shellcheck source=hack/lib/kube.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/kube.sh"

WATCHERS=${WATCHERS:-1000}
PODS=${PODS:-100}
RATE=${RATE:-200}
DURATION=${DURATION:-30s}
WARMUP=${WARMUP:-5s}
PER_CONN=${PER_CONN:-100}
ROUNDS=${ROUNDS:-1}
PROFILE=${PROFILE:-}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/watch-fanout-results.XXXXXX")}
mkdir -p "$OUT"

prepare_bench watchload "$@"
# Every listwatch is built before the first run, so that no build loads the
# machine while another target is measured.
for target in "${TARGETS[@]}"; do
	if [[ $target != kube ]]; then
		listwatch_binary "${target%%:*}" >/dev/null
	fi
done

mkdir -p "$WORK/pki"
make_pki "$WORK/pki"
for ((round = 1; round <= ROUNDS; round++)); do
	for target in "${TARGETS[@]}"; do
		name=$(tr -c 'A-Za-z0-9\n' _ <<<"$target")
		run=$WORK/run-$round-$name
		mkdir -p "$run"
		cp -r "$WORK/pki" "$run/pki"
		read -r load1 load5 load15 _ </proc/loadavg
		extra=()
		profile=()
		if [[ -n $PROFILE ]]; then
			[[ $target == kube ]] && extra=(--profiling=true)
			profile=(-profile "$OUT/cpu-$round-$name.pb.gz")
		fi
		start_target "$target" "$run" "${extra[@]}"
		log "$TARGET_LABEL: $WATCHERS watchers of $PODS pods, $RATE updates/s for $DURATION (load average before: $load1 $load5 $load15)"
		run_tool watchload -server "https://127.0.0.1:$API_PORT" -ca "$WORK/pki/ca.crt" -token "$TOKEN" \
			-pods "$PODS" -watchers "$WATCHERS" -per-conn "$PER_CONN" -rate "$RATE" \
			-duration "$DURATION" -warmup "$WARMUP" -pids "$SERVER_PIDS" -label "$TARGET_LABEL" "${profile[@]}" |
			jq -c --arg target "$target" --argjson round "$round" --argjson l1 "$load1" --argjson l5 "$load5" --argjson l15 "$load15" \
				'{target: $target, round: $round} + . + {loadBefore: [$l1, $l5, $l15]}' |
			tee -a "$OUT/results.jsonl"
		stop_all
		for f in "$run"/*.log "$run"/etcd/*.log; do
			[[ -f $f ]] && cp "$f" "$OUT/$round-$name-$(basename "$f")"
		done
		rm -rf "$run"
	done
done

# The medians per target, and their ratios to kube-apiserver's; watches
# ended and updates missed are summed over the rounds.
jq -s -c -L "$REPO/hack/lib" '
	include "summary";
	(map(select(.target == "kube")) | {p50: med(.p50ms), p99: med(.p99ms), cpu: med(.serverCPUSeconds)}) as $kube
	| group_by(.target)[]
	| {target: .[0].target, label: .[0].label, runs: length, watchers: .[0].watchers, connections: med(.connections),
	   updatesPerSec: med(.updatesPerSec), p50ms: med(.p50ms), p90ms: med(.p90ms), p99ms: med(.p99ms),
	   p999ms: med(.p999ms), maxMs: med(.maxMs),
	   watchesEndedByServer: (map(.watchesEndedByServer) | add), eventsMissed: (map(.eventsMissed) | add),
	   serverCPUSeconds: med(.serverCPUSeconds), clientCPUSeconds: med(.clientCPUSeconds)}
	| .p50VsKube = ratio(.p50ms; $kube.p50)
	| .p99VsKube = ratio(.p99ms; $kube.p99)
	| .cpuVsKube = ratio(.serverCPUSeconds; $kube.cpu)' \
	"$OUT/results.jsonl" | tee "$OUT/summary.jsonl"
log "results, profiles and logs in $OUT"
