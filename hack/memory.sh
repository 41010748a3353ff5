#!/usr/bin/env bash
# memory.sh measures what an API server and its etcd hold for a cluster's
# pods, side by side: kube-apiserver and listwatch at one or more git
# revisions, each on a fresh etcd of kube-apiserver's build (hack/lib/kube.sh).
# For each target it starts the server, has bench/createload create PODS
# pods in protobuf with 32 clients as kube-controller-manager creates a
# ReplicaSet's (kube's defaults and managedFields kept as the server keeps
# them), then merge-patch each one's status once as a kubelet does, lets
# the server settle and reads:
#   - the resident memory (VmRSS) of the API server and of its etcd, and
#     the API server's anonymous part (RssAnon: not its binary's pages);
#   - the API server's live heap after a forced collection, from its heap
#     profile (/debug/pprof/heap?gc=1: kube-apiserver with --profiling,
#     listwatch by default), before the pods and after, per pod;
# and keeps the heap profile (`go tool pprof -top -sample_index=inuse_space
# FILE`) in OUT. It prints one JSON line per run, then one per target with
# the medians over the rounds and their ratios to kube-apiserver's.
#
#   hack/memory.sh                        # kube and listwatch at HEAD, 10,000 pods
#   hack/memory.sh kube b655137 .         # also listwatch at b655137, and the working tree
#   PODS=100000 hack/memory.sh            # 100,000 pods (several minutes a run)
#   ROUNDS=3 hack/memory.sh kube HEAD     # kube, listwatch, kube, listwatch, ...
#
# Targets are named as hack/create-throughput.sh names them (kube, REV,
# REV:memory). Environment: PODS (10000), CONCURRENCY (32), ROUNDS (1:
# targets run in turn, ROUNDS times, so that load on the machine falls on
# all of them alike), SETTLE (15s: the wait before the baseline heap is
# read, and after the last write, for watch caches and etcd to catch up),
# OUT (where the results, heap profiles and servers' logs are kept;
# default a directory under /tmp, printed at the end), and
# hack/lib/kube.sh's. Not run by CI.
set -euo pipefail

SCRIPT=memory
# shellcheck source=hack/lib/kube.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/kube.sh"

PODS=${PODS:-10000}
CONCURRENCY=${CONCURRENCY:-32}
ROUNDS=${ROUNDS:-1}
SETTLE=${SETTLE:-15s}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/memory-results.XXXXXX")}
mkdir -p "$OUT"

prepare_bench createload "$@"

# rss_mib prints the resident memory of process $1 in MiB: all of it
# (VmRSS), then its anonymous part (RssAnon: the heap, stacks and the
# runtime's own; the rest is mostly the binary's pages).
rss_mib() {
	awk '$1 == "VmRSS:" { all = $2 } $1 == "RssAnon:" { anon = $2 } END { printf "%.1f %.1f", all / 1024, anon / 1024 }' "/proc/$1/status"
}

# heap prints the live heap of the API server, after a forced
# collection, as "bytes objects", or "null null" when it serves no heap
# profile; with a file name in $1 it also keeps the profile there.
heap() {
	local url="https://127.0.0.1:$API_PORT/debug/pprof/heap?gc=1" stats
	local curl=(curl -sf --cacert "$WORK/pki/ca.crt" -H "Authorization: Bearer $TOKEN")
	if ! stats=$("${curl[@]}" "$url&debug=1"); then
		echo "null null"
		return
	fi
	awk '$2 == "HeapAlloc" { a = $4 } $2 == "HeapObjects" { o = $4 } END { print a, o }' <<<"$stats"
	if [[ -n ${1:-} ]]; then
		"${curl[@]}" -o "$1" "$url"
	fi
}

mkdir -p "$WORK/pki"
make_pki "$WORK/pki"
for ((round = 1; round <= ROUNDS; round++)); do
	for target in "${TARGETS[@]}"; do
		name=$(tr -c 'A-Za-z0-9\n' _ <<<"$target")
		run=$WORK/run-$round-$name
		mkdir -p "$run"
		cp -r "$WORK/pki" "$run/pki"
		extra=()
		[[ $target == kube ]] && extra=(--profiling=true)
		start_target "$target" "$run" "${extra[@]}"
		server_pid=${SERVER_PIDS%%,*}
		etcd_pid=""
		[[ $SERVER_PIDS == *,* ]] && etcd_pid=${SERVER_PIDS#*,}
		# The baseline is read once the server has settled too: what it
		# holds for a while after starting (listwatch's OpenAPI
		# documents, built for admission's first read and let go 10 s
		# after their last use) is no part of what the pods cost.
		sleep "$SETTLE"
		read -r heap0 objs0 <<<"$(heap)"
		log "$TARGET_LABEL: $PODS pods, $CONCURRENCY clients"
		load=$(run_tool createload -server "https://127.0.0.1:$API_PORT" -ca "$WORK/pki/ca.crt" -token "$TOKEN" \
			-pods "$PODS" -protobuf -concurrency "$CONCURRENCY" -label "$TARGET_LABEL")
		sleep "$SETTLE"
		read -r heap1 objs1 <<<"$(heap "$OUT/heap-$PODS-$round-$name.pb.gz")"
		read -r rss_server anon_server <<<"$(rss_mib "$server_pid")"
		rss_etcd=null
		[[ -n $etcd_pid ]] && read -r rss_etcd _ <<<"$(rss_mib "$etcd_pid")"
		jq -c --arg target "$target" --argjson round "$round" --argjson pods "$PODS" \
			--argjson rssServer "$rss_server" --argjson anonServer "$anon_server" --argjson rssEtcd "$rss_etcd" \
			--argjson heap0 "$heap0" --argjson heap1 "$heap1" --argjson objs0 "$objs0" --argjson objs1 "$objs1" \
			'{target: $target, label: .label, round: $round, pods: $pods, createsPerSec: .createsPerSec, patchesPerSec: .patchesPerSec,
			  rssServerMiB: $rssServer, rssServerAnonMiB: $anonServer, rssEtcdMiB: $rssEtcd, rssMiB: ($rssServer + ($rssEtcd // 0)),
			  heapMiB: (if $heap1 == null then null else $heap1 / 1048576 end),
			  heapPerPodKB: (if $heap1 == null then null else ($heap1 - $heap0) / $pods / 1000 end),
			  heapObjectsPerPod: (if $objs1 == null then null else ($objs1 - $objs0) / $pods end)}' \
			<<<"$load" | tee -a "$OUT/results.jsonl"
		stop_all
		for f in "$run"/*.log "$run"/etcd/*.log; do
			[[ -f $f ]] && cp "$f" "$OUT/$round-$name-$(basename "$f")"
		done
		rm -rf "$run"
	done
done

# The medians per target, and their ratios to kube-apiserver's.
jq -s -c -L "$REPO/hack/lib" --argjson pods "$PODS" '
	include "summary";
	(map(select(.target == "kube")) | {rss: med(.rssMiB), heap: med(.heapPerPodKB)}) as $kube
	| group_by(.target)[]
	| {target: .[0].target, pods: $pods, runs: length, rssMiB: med(.rssMiB), rssServerMiB: med(.rssServerMiB),
	   rssServerAnonMiB: med(.rssServerAnonMiB),
	   rssEtcdMiB: med(.rssEtcdMiB), heapPerPodKB: med(.heapPerPodKB), heapObjectsPerPod: med(.heapObjectsPerPod),
	   createsPerSec: med(.createsPerSec)}
	| .rssVsKube = (if $kube.rss then .rssMiB / $kube.rss else null end)
	| .heapVsKube = (if $kube.heap and .heapPerPodKB then .heapPerPodKB / $kube.heap else null end)' \
	"$OUT/results.jsonl" | tee "$OUT/summary.jsonl"
log "results, heap profiles and logs in $OUT"
