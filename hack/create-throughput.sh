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
# Environment: WEBHOOK, CONCURRENCY (8), DURATION (10s), WARMUP (3s), ROUNDS (1:
# targets are run in turn, ROUNDS times, so that load on the machine falls
# on all of them alike), and hack/lib/kube.sh's. Not run by CI.
set -euo pipefail

SCRIPT=create-throughput
# shellcheck source=hack/lib/kube.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/kube.sh"

CONCURRENCY=${CONCURRENCY:-8}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-3s}
ROUNDS=${ROUNDS:-1}
TARGETS=("$@")
if [[ ${#TARGETS[@]} == 0 ]]; then
	TARGETS=(kube HEAD)
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/create-throughput.XXXXXX")
cleanup() {
	stop_all
	local wt
	for wt in "$WORK"/src-*; do
		[[ -d $wt ]] && git -C "$REPO" worktree remove --force "$wt" >/dev/null 2>&1
	done
	rm -rf "$WORK"
}
trap cleanup EXIT

build_binaries
log "building createload"
(cd "$REPO/bench" && go build -o "$WORK/createload" ./createload)

# listwatch_binary builds cmd/listwatch at revision $1 ("." is the working
# tree) once and prints its path.
listwatch_binary() {
	local rev=$1 out dir
	out=$WORK/listwatch-$(tr -c 'A-Za-z0-9\n' _ <<<"$rev")
	if [[ ! -x $out ]]; then
		dir=$REPO
		if [[ $rev != . ]]; then
			dir=$WORK/src-$(basename "$out")
			git -C "$REPO" worktree add -q --detach "$dir" "$rev"
		fi
		log "building listwatch at $rev"
		(cd "$dir" && go build -o "$out" ./cmd/listwatch)
	fi
	echo "$out"
}

# measure runs createload against 127.0.0.1:$1 with the server's processes
# $2 (comma-separated) and labels the result $3; with the webhook when
# $hook is set.
measure() {
	"$WORK/createload" -server "https://127.0.0.1:$1" -ca "$WORK/pki/ca.crt" -token "$TOKEN" \
		-concurrency "$CONCURRENCY" -duration "$DURATION" -warmup "$WARMUP" -pids "$2" -label "$3${hook:+ webhook}" ${hook:+-webhook}
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
		case $target in
		kube)
			start_etcd "$run/etcd"
			start_kube_apiserver "$run"
			wait_ready "$API_PORT" "$WORK/pki/ca.crt"
			measure "$API_PORT" "$API_PID,$ETCD_PID" "kube-apiserver $KUBE_VERSION (etcd)"
			;;
		*)
			rev=${target%%:*} backend=etcd
			[[ $target == *:memory ]] && backend=memory
			bin=$(listwatch_binary "$rev")
			port=$(free_port)
			args=(apiserver --secure-port "$port" --cert-dir "$run/pki" --token-auth-file "$run/pki/tokens.csv"
				--tls-cert-file "$run/pki/server.crt" --tls-private-key-file "$run/pki/server.key")
			pids=""
			if [[ $backend == etcd ]]; then
				start_etcd "$run/etcd"
				args+=(--etcd-servers "$ETCD_URL")
				pids=",$ETCD_PID"
			else
				args+=(--storage-backend memory)
			fi
			log "starting listwatch at $rev ($backend) on 127.0.0.1:$port"
			"$bin" "${args[@]}" >"$run/listwatch.log" 2>&1 &
			lw_pid=$!
			PIDS+=("$lw_pid")
			wait_ready "$port" "$WORK/pki/ca.crt"
			measure "$port" "$lw_pid$pids" "listwatch $rev ($backend)"
			;;
		esac
		stop_all
	done
done
