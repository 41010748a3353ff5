#!/usr/bin/env bash
# create-throughput.sh measures pod create throughput over HTTPS
# (bench/createload: concurrent clients POST typical pods for a fixed time)
# against kube-apiserver and against listwatch at one or more git
# revisions, each on a fresh etcd of the same build (kube-apiserver's,
# from hack/lib/kube.sh) or on listwatch's memory backend. It prints one
# JSON line per run: creates per second, latency, and the CPU the server
# and its etcd spent per create.
#
#   hack/create-throughput.sh                       # kube and listwatch at HEAD
#   hack/create-throughput.sh kube b655137 HEAD     # also listwatch at b655137
#   hack/create-throughput.sh HEAD:memory           # listwatch on its memory backend
#   hack/create-throughput.sh .                     # the working tree, uncommitted changes included
#   ROUNDS=5 hack/create-throughput.sh kube kube+webhook HEAD HEAD+webhook
#                                                   # what one webhook costs each server
#
# A target ending in +webhook runs with one validating webhook allowing
# every pod, served by createload itself (WEBHOOK=1: every target does).
# PROTOBUF=1 sends the pods in protobuf, as client-go's typed clients do.
# PROFILE=1 keeps each server's CPU profile of the measured time in OUT
# (kube-apiserver then runs with --profiling).
# SERVER_CPUS=0 LOAD_CPUS=1 runs each API server on CPU 0 alone, and its
# etcd and the clients on CPU 1: the server's own throughput, which on a
# machine of two CPUs is otherwise shared with the clients and etcd, whose
# cost per create is about the same for every server.
# Environment: WEBHOOK, PROTOBUF, PROFILE, CONCURRENCY (8), DURATION (10s),
# WARMUP (3s), ROUNDS (1: targets are run in turn, ROUNDS times, so that
# load on the machine falls on all of them alike), OUT (where profiles are
# kept; default a directory under /tmp, printed at the end when PROFILE is
# set), and hack/lib/kube.sh's. Not run by CI.
set -euo pipefail

SCRIPT=create-throughput
# shellcheck source=hack/lib/kube.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/kube.sh"

CONCURRENCY=${CONCURRENCY:-8}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-3s}
ROUNDS=${ROUNDS:-1}
PROFILE=${PROFILE:-}

if [[ -n $PROFILE ]]; then
	OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/create-throughput-results.XXXXXX")}
	mkdir -p "$OUT"
fi

prepare_bench createload "$@"

# measure runs createload against 127.0.0.1:$API_PORT with the server's
# processes $SERVER_PIDS and labels the result $TARGET_LABEL; with the
# webhook when $hook is set.
measure() {
	run_tool createload -server "https://127.0.0.1:$API_PORT" -ca "$WORK/pki/ca.crt" -token "$TOKEN" \
		-concurrency "$CONCURRENCY" -duration "$DURATION" -warmup "$WARMUP" -pids "$SERVER_PIDS" \
		-label "$TARGET_LABEL${hook:+ webhook}${PROTOBUF:+ protobuf}" ${hook:+-webhook} ${PROTOBUF:+-protobuf}
}

mkdir -p "$WORK/pki"
make_pki "$WORK/pki"
for ((round = 1; round <= ROUNDS; round++)); do
	for target in "${TARGETS[@]}"; do
		run=$WORK/run-$round-$(tr -c 'A-Za-z0-9\n' _ <<<"$target")
		hook=${WEBHOOK:-}
		if [[ $target == *+webhook ]]; then
			hook=1
			target=${target%+webhook}
		fi
		mkdir -p "$run"
		cp -r "$WORK/pki" "$run/pki"
		extra=()
		[[ -n $PROFILE && $target == kube ]] && extra=(--profiling=true)
		start_target "$target" "$run" "${extra[@]}"
		profiler=""
		if [[ -n $PROFILE ]]; then
			cpu_profile "$OUT/cpu-$round-$(basename "$run").pb.gz" "$DURATION" "$WARMUP" &
			profiler=$!
		fi
		measure
		[[ -n $profiler ]] && wait "$profiler"
		stop_all
	done
done
[[ -n $PROFILE ]] && log "CPU profiles in $OUT"
true
