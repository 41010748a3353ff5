#!/usr/bin/env bash
# envtest-kube-start.sh measures what controller-runtime's envtest pays
# per test environment: etcd and kube-apiserver started as processes the
# way envtest starts them (etcd on 127.0.0.1 with --unsafe-no-fsync,
# kube-apiserver with RBAC, a token, ServiceAccount admission off), from
# the start of the processes to the first successful list of namespaces,
# and the same with 100 CRDs created and served (envtest's CRD install
# polls each CRD's group-version until it lists its kinds). It is the
# other side of `cd bench && go run . envtest-start` and of envtest's Go
# benchmarks; it is not run in CI.
#
#   hack/envtest-kube-start.sh        # 5 runs of each, the median printed
#   RUNS=9 hack/envtest-kube-start.sh
#
# It uses the binaries hack/record-goldens.sh builds (run that with
# --build-only first), openssl and curl, and only 127.0.0.1.
set -euo pipefail

SCRIPT=envtest-kube-start
# shellcheck source=hack/lib/kube.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/kube.sh"
RUNS=${RUNS:-5}
CRDS=${CRDS:-100}
if [[ ! -x $BIN/kube-apiserver || ! -x $BIN/etcd ]]; then
	echo "envtest-kube-start: no $BIN/kube-apiserver or $BIN/etcd; run hack/record-goldens.sh --build-only" >&2
	exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/envtest-kube-start.XXXXXX")
trap 'stop_all; rm -rf "$WORK"' EXIT

now_ms() { echo $(($(date +%s%N) / 1000000)); }

mkdir -p "$WORK/pki"
make_pki "$WORK/pki"

crd() {
	printf '{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"kind%ds.bench.listwatch.dev"},' "$1"
	printf '"spec":{"group":"bench.listwatch.dev","scope":"Namespaced","names":{"plural":"kind%ds","singular":"kind%d","kind":"Kind%d","listKind":"Kind%dList"},' "$1" "$1" "$1" "$1"
	printf '"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},"schema":{"openAPIV3Schema":{"type":"object","properties":{'
	printf '"spec":{"type":"object","properties":{"replicas":{"type":"integer","minimum":0},"image":{"type":"string"}}},'
	printf '"status":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}}]}}'
}

# get prints the HTTP code of GET $1 on the server.
get() { curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/pki/ca.crt" -H "Authorization: Bearer $TOKEN" "$URL$1" || true; }

# run starts etcd and kube-apiserver, waits for the first successful
# list, creates $1 CRDs and waits until each is served, then prints the
# milliseconds since the start and stops both.
run() {
	local crds=$1 dir
	dir=$(mktemp -d "$WORK/run.XXXXXX")
	local start
	start=$(now_ms)
	start_etcd "$dir/etcd"
	local ap
	ap=$(free_port)
	URL=https://127.0.0.1:$ap
	"$BIN/kube-apiserver" --etcd-servers "$ETCD_URL" \
		--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$ap" --cert-dir "$dir/pki" \
		--tls-cert-file "$WORK/pki/server.crt" --tls-private-key-file "$WORK/pki/server.key" --token-auth-file "$WORK/pki/tokens.csv" \
		--authorization-mode RBAC --service-account-issuer https://127.0.0.1:"$ap" \
		--service-account-key-file "$WORK/pki/sa.pub" --service-account-signing-key-file "$WORK/pki/sa.key" \
		--service-cluster-ip-range 10.0.0.0/24 --allow-privileged=true --disable-admission-plugins ServiceAccount \
		--endpoint-reconciler-type none >"$dir/kube-apiserver.log" 2>&1 &
	local api=$!
	PIDS+=("$api")
	until [[ $(get /api/v1/namespaces) == 200 ]]; do
		if ! kill -0 "$api" 2>/dev/null; then
			echo "envtest-kube-start: kube-apiserver exited; its log ends:" >&2
			tail -n 5 "$dir/kube-apiserver.log" >&2
			exit 1
		fi
		sleep 0.02
	done
	if ((crds > 0)); then
		local i
		for ((i = 0; i < crds; i++)); do
			crd "$i" | curl -s -o /dev/null --cacert "$WORK/pki/ca.crt" -H "Authorization: Bearer $TOKEN" \
				-H 'Content-Type: application/json' --data-binary @- "$URL/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
		done
		for ((i = 0; i < crds; i++)); do
			until [[ $(get "/apis/bench.listwatch.dev/v1/kind${i}s") == 200 ]]; do sleep 0.02; done
		done
	fi
	echo $(($(now_ms) - start))
	stop_all
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

for crds in 0 "$CRDS"; do
	times=()
	for ((r = 0; r < RUNS; r++)); do
		times+=("$(run "$crds")")
	done
	printf 'kube-apiserver+etcd start to first list%s: median %s ms of %s\n' \
		"$( ((crds > 0)) && echo ", $crds CRDs served" || true)" "$(printf '%s\n' "${times[@]}" | median)" "${times[*]}"
done
