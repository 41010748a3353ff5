# shellcheck shell=bash
# hack/lib/kube.sh: what the scripts that run a real kube-apiserver share —
# building kube-apiserver and etcd from the Go module proxy, free ports,
# certificates and a token, starting and stopping the processes. Sourced by
# record-goldens.sh, create-throughput.sh, memory.sh and the others; the
# caller sets `set -euo
# pipefail`, SCRIPT (its name, for log lines) and may set:
#
#   KUBE_VERSION      the kube-apiserver release (default v1.37.2; the staging
#                     modules are required at v0.${minor}.${patch})
#   KUBE_BUILD_DIR    where the built binaries are cached between runs
#                     (default ${XDG_CACHE_HOME:-~/.cache}/listwatch/kube-$KUBE_VERSION)
#   KUBE_REBUILD=1    rebuild the binaries even when cached
#   SERVER_CPUS       CPUs (a taskset list, such as 0) the API server runs on;
#   LOAD_CPUS         and the CPUs its etcd and the benchmark's clients run
#                     on (such as 1). Unset, every process may run on every
#                     CPU, and on a small machine the clients and etcd take
#                     CPU time from the server under test: the throughput
#                     measured is then the machine's, not the server's.

KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
STAGING_VERSION=v0.${KUBE_VERSION#v1.}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
KUBE_BUILD_DIR=${KUBE_BUILD_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/listwatch/kube-$KUBE_VERSION}
BIN=$KUBE_BUILD_DIR/bin
# PIDS are the processes started, stopped last first by stop_all.
PIDS=()

# on_cpus runs "${@:2}" on the CPUs $1 (taskset's list), or anywhere
# when $1 is empty. It execs, so a caller's $! is the command's process;
# Go programs size GOMAXPROCS to the CPUs they may run on.
on_cpus() {
	if [[ -n $1 ]]; then
		exec taskset -c "$1" "${@:2}"
	fi
	exec "${@:2}"
}

log() { printf '%s %s: %s\n' "$(date +%H:%M:%S)" "${SCRIPT:-kube}" "$*" >&2; }

# build_binaries makes $BIN/kube-apiserver and $BIN/etcd in a module of
# their own: k8s.io/kubernetes, plus every staging module its go.mod lists
# at v0.0.0 required at its real version (kubernetes' own replace directives
# point into its source tree and do not apply to a dependency).
build_binaries() {
	if [[ -z ${KUBE_REBUILD:-} && -x $BIN/kube-apiserver && -x $BIN/etcd && $(cat "$BIN/version" 2>/dev/null) == "$KUBE_VERSION" ]]; then
		log "using cached $BIN/kube-apiserver and $BIN/etcd"
		return
	fi
	local mod=$KUBE_BUILD_DIR/module
	rm -rf "$mod"
	mkdir -p "$mod/etcd" "$BIN"
	local kubemod
	kubemod=$(cd "$mod" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" |
		sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
	if [[ ! -f $kubemod ]]; then
		echo "$SCRIPT: cannot download k8s.io/kubernetes@$KUBE_VERSION" >&2
		exit 1
	fi
	local staging
	staging=$(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" { print $1 }' "$kubemod" | sort -u)
	local goversion etcdversion
	goversion=$(awk '$1 == "go" { print $2; exit }' "$kubemod")
	# The etcd kubernetes itself pins, so that the build list is the one
	# kube-apiserver was released with.
	etcdversion=$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit }' "$kubemod")
	{
		echo "module listwatch.invalid/kubebuild"
		echo
		echo "go $goversion"
		echo
		echo "require ("
		echo "	k8s.io/kubernetes $KUBE_VERSION"
		for m in $staging; do
			echo "	$m $STAGING_VERSION"
		done
		echo ")"
	} >"$mod/go.mod"
	# etcd's own main is in a module that does not build as a dependency;
	# etcdmain is the whole server behind it.
	cat >"$mod/etcd/main.go" <<'EOF'
// Command etcd runs an etcd server, for the scripts of listwatch's hack/.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
	log "resolving modules for k8s.io/kubernetes $KUBE_VERSION ($(wc -w <<<"$staging") staging modules at $STAGING_VERSION)"
	# Exact versions: a bare `go get` would upgrade etcd, and with it half
	# of the build list, past what kubernetes was released with.
	(cd "$mod" && go get "k8s.io/kubernetes/cmd/kube-apiserver@$KUBE_VERSION" "go.etcd.io/etcd/server/v3/etcdmain@$etcdversion")
	# The version stamp kubernetes' own build links in (hack/lib/version.sh),
	# so that /version and the server's idea of its version are the
	# release's rather than v0.0.0-master.
	log "building kube-apiserver (several minutes the first time)"
	(cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "$(version_ldflags)" -o "$BIN/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
	log "building etcd"
	(cd "$mod" && CGO_ENABLED=0 go build -trimpath -o "$BIN/etcd" ./etcd)
	echo "$KUBE_VERSION" >"$BIN/version"
	# A fresh module: whatever kube-controller-manager was built from the
	# old one is stale.
	rm -f "$BIN/kube-controller-manager"
}

# version_ldflags prints the -X flags of the version stamp kubernetes' own
# build links in (hack/lib/version.sh), so that /version and the binary's
# idea of its version are the release's rather than v0.0.0-master.
version_ldflags() {
	local major=${KUBE_VERSION#v}
	major=${major%%.*}
	local minor=${KUBE_VERSION#v*.}
	minor=${minor%%.*}
	local ldflags="" pkg
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
	done
	echo "$ldflags"
}

# build_kube_controller_manager makes $BIN/kube-controller-manager (after
# build_binaries, in the module it set up) when it is not there yet: only
# the scripts that run kube's controllers need it, and it takes minutes, so
# kube-apiserver's scripts do not pay for it and it does not rebuild them.
build_kube_controller_manager() {
	build_binaries
	if [[ -z ${KUBE_REBUILD:-} && -x $BIN/kube-controller-manager ]]; then
		log "using cached $BIN/kube-controller-manager"
		return
	fi
	local mod=$KUBE_BUILD_DIR/module
	# Exact version, for the same reason as build_binaries' go get.
	(cd "$mod" && go get "k8s.io/kubernetes/cmd/kube-controller-manager@$KUBE_VERSION")
	log "building kube-controller-manager (several minutes the first time)"
	(cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "$(version_ldflags)" -o "$BIN/kube-controller-manager.tmp" k8s.io/kubernetes/cmd/kube-controller-manager)
	mv "$BIN/kube-controller-manager.tmp" "$BIN/kube-controller-manager"
}

# free_port prints a port on 127.0.0.1 nobody listens on and no earlier
# call printed, below Linux's default ephemeral range (32768-60999): a port
# in it may be taken as the local end of some outgoing connection between
# the check and the bind (kube-controller-manager once failed so).
USED_PORTS=" "
free_port() {
	local p
	for _ in $(seq 200); do
		p=$((20000 + RANDOM % 12000))
		if [[ $USED_PORTS == *" $p "* ]]; then
			continue
		fi
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			USED_PORTS+="$p "
			echo "$p"
			return
		fi
	done
	echo "$SCRIPT: no free port found" >&2
	exit 1
}

# make_pki writes a CA, a serving certificate for 127.0.0.1 signed by it,
# the service-account signing key pair and a static token file into $1.
make_pki() {
	local d=$1
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$d/ca.key" 2>/dev/null
	openssl req -x509 -new -key "$d/ca.key" -subj "/CN=listwatch-golden-ca" -days 2 -out "$d/ca.crt" \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$d/server.key" 2>/dev/null
	openssl req -new -key "$d/server.key" -subj "/CN=kube-apiserver" -out "$d/server.csr"
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n' >"$d/server.ext"
	openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
		-extfile "$d/server.ext" -out "$d/server.crt" 2>/dev/null
	openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$d/sa.key" 2>/dev/null
	openssl pkey -in "$d/sa.key" -pubout -out "$d/sa.pub"
	TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	# The recorder is in system:masters, as kubectl's admin is.
	printf '%s,golden,golden-uid,"system:masters"\n' "$TOKEN" >"$d/tokens.csv"
}

# stop ends a process this script started: SIGTERM, and SIGKILL if it is
# still there after 15s.
stop() {
	local pid=$1
	kill "$pid" 2>/dev/null || return 0
	for _ in $(seq 150); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

# stop_all stops every process in PIDS, the last started first (an API
# server before the etcd it would otherwise wait for).
stop_all() {
	local i
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
		stop "${PIDS[i]}"
	done
	PIDS=()
}

# start_etcd starts etcd with its data in $1 and sets ETCD_URL. It does
# not fsync (a recording, not a cluster) unless ETCD_FSYNC=1: a benchmark
# against a listwatch side whose embedded etcd fsyncs sets it, so that
# both sides' etcd do the same work.
start_etcd() {
	local dir=$1 client peer nofsync=--unsafe-no-fsync
	[[ ${ETCD_FSYNC:-0} == 1 ]] && nofsync=
	client=$(free_port)
	peer=$(free_port)
	mkdir -p "$dir"
	ETCD_URL=http://127.0.0.1:$client
	log "starting etcd on 127.0.0.1:$client"
	(on_cpus "${LOAD_CPUS:-}" "$BIN/etcd" --name kube --data-dir "$dir/data" \
		--listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
		--listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
		--initial-cluster "kube=http://127.0.0.1:$peer" $nofsync --log-level warn) \
		>"$dir/etcd.log" 2>&1 &
	ETCD_PID=$!
	PIDS+=("$ETCD_PID")
}

# make_work makes the run directory WORK, named after $SCRIPT, and on exit
# stops the processes started, removes the worktrees listwatch_binary
# checked out, and removes it, unless KEEP_WORK is set (then it says where
# it is kept).
make_work() {
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/$SCRIPT.XXXXXX")
	trap cleanup_work EXIT
}

cleanup_work() {
	stop_all
	local wt
	for wt in "$WORK"/src-*; do
		[[ -d $wt ]] && git -C "$REPO" worktree remove --force "$wt" >/dev/null 2>&1
	done
	if [[ -n ${KEEP_WORK:-} ]]; then
		log "kept $WORK"
	else
		rm -rf "$WORK"
	fi
}

# listwatch_binary builds cmd/listwatch at git revision $1 ("." is the
# working tree, uncommitted changes included) into $WORK once and prints
# its path; a revision is checked out in a worktree under $WORK.
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

# start_target starts the server a benchmark's target names, with the
# certificates make_pki wrote in $2/pki and its files in $2: "kube" is
# kube-apiserver on a fresh etcd, "REV" listwatch's API server built at
# git revision REV (listwatch_binary) on a fresh etcd of the same build as
# kube's, "REV:memory" the same on its memory backend. Further arguments
# are added to kube-apiserver's or listwatch's flags. It waits until the
# server is ready and sets API_PORT, SERVER_PIDS (the API server's process
# and its etcd's, comma-separated) and TARGET_LABEL.
start_target() {
	local target=$1 run=$2
	case $target in
	kube)
		start_etcd "$run/etcd"
		start_kube_apiserver "$run" "${@:3}"
		SERVER_PIDS=$API_PID,$ETCD_PID
		TARGET_LABEL="kube-apiserver $KUBE_VERSION (etcd)"
		;;
	*)
		local rev=${target%%:*} backend=etcd bin args
		[[ $target == *:memory ]] && backend=memory
		bin=$(listwatch_binary "$rev")
		API_PORT=$(free_port)
		args=(apiserver --secure-port "$API_PORT" --cert-dir "$run/pki" --token-auth-file "$run/pki/tokens.csv"
			--tls-cert-file "$run/pki/server.crt" --tls-private-key-file "$run/pki/server.key")
		SERVER_PIDS=""
		if [[ $backend == etcd ]]; then
			start_etcd "$run/etcd"
			args+=(--etcd-servers "$ETCD_URL")
			SERVER_PIDS=",$ETCD_PID"
		else
			args+=(--storage-backend memory)
		fi
		log "starting listwatch at $rev ($backend) on 127.0.0.1:$API_PORT"
		(on_cpus "${SERVER_CPUS:-}" "$bin" "${args[@]}" "${@:3}") >"$run/listwatch.log" 2>&1 &
		API_PID=$!
		PIDS+=("$API_PID")
		SERVER_PIDS=$API_PID$SERVER_PIDS
		TARGET_LABEL="listwatch $rev ($backend)"
		;;
	esac
	TARGET_LABEL+=${SERVER_CPUS:+ on CPUs $SERVER_CPUS}
	wait_ready "$API_PORT" "$run/pki/ca.crt"
}

# kubeconfig prints a kubeconfig for https://127.0.0.1:$1 with token $2 and
# the CA certificate file $3.
kubeconfig() {
	cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kube
  cluster:
    server: https://127.0.0.1:$1
    certificate-authority: $3
users:
- name: user
  user:
    token: $2
contexts:
- name: kube
  context: {cluster: kube, user: user}
current-context: kube
EOF
}

# start_kube_apiserver starts kube-apiserver on etcd $ETCD_URL with the
# certificates make_pki wrote in $1/pki, logging to $1/kube-apiserver.log,
# and sets API_PORT and API_PID; any further arguments are added to its
# flags. Its default admission plugins run, as a
# kubeadm cluster runs it where that matters to the API's answers: RBAC,
# privileged containers allowed, the default service CIDR stated. The
# endpoint reconciler is off because its endpoints for the loopback
# advertise address would be invalid.
start_kube_apiserver() {
	local work=$1
	API_PORT=$(free_port)
	log "starting kube-apiserver $KUBE_VERSION on 127.0.0.1:$API_PORT"
	(on_cpus "${SERVER_CPUS:-}" "$BIN/kube-apiserver" \
		--etcd-servers "$ETCD_URL" \
		--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
		--cert-dir "$work/pki" --tls-cert-file "$work/pki/server.crt" --tls-private-key-file "$work/pki/server.key" \
		--token-auth-file "$work/pki/tokens.csv" \
		--authorization-mode Node,RBAC \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$work/pki/sa.pub" --service-account-signing-key-file "$work/pki/sa.key" \
		--service-cluster-ip-range 10.0.0.0/24 \
		--allow-privileged=true \
		--endpoint-reconciler-type none \
		--profiling=false \
		"${@:2}") \
		>"$work/kube-apiserver.log" 2>&1 &
	API_PID=$!
	PIDS+=("$API_PID")
}

# add_kcm_token adds to the token file make_pki wrote in $1 a token of
# kube-controller-manager's own, in system:masters, and prints it: that
# stands for the RBAC roles it is bound to in a cluster, which would only
# add authorization's cost to what is measured or recorded.
add_kcm_token() {
	local token
	token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	printf '%s,kube-controller-manager,kcm-uid,"system:masters"\n' "$token" >>"$1/tokens.csv"
	echo "$token"
}

# start_kcm starts kube-controller-manager (after build_kube_controller_manager)
# against kube-apiserver on $API_PORT, its files in $1, with the
# certificates and service-account key make_pki wrote in $2 and the token
# $3 (add_kcm_token), and sets KCM_PORT once it is healthy; any further
# arguments are added to its flags. Its default controllers run, with no
# leader election.
start_kcm() {
	local run=$1 pki=$2 token=$3
	KCM_PORT=$(free_port)
	kubeconfig "$API_PORT" "$token" "$pki/ca.crt" >"$run/kcm.kubeconfig"
	log "starting kube-controller-manager $KUBE_VERSION on 127.0.0.1:$KCM_PORT"
	"$BIN/kube-controller-manager" \
		--kubeconfig "$run/kcm.kubeconfig" \
		--leader-elect=false \
		--service-account-private-key-file "$pki/sa.key" \
		--root-ca-file "$pki/ca.crt" \
		--bind-address 127.0.0.1 --secure-port "$KCM_PORT" --cert-dir "$run/kcm-pki" \
		--authorization-always-allow-paths /healthz,/readyz,/livez,/metrics \
		--profiling=false \
		"${@:4}" \
		>"$run/kube-controller-manager.log" 2>&1 &
	PIDS+=("$!")
	for _ in $(seq 600); do
		if [[ $(curl -sk "https://127.0.0.1:$KCM_PORT/healthz" 2>/dev/null) == ok ]]; then
			return 0
		fi
		sleep 0.1
	done
	log "kube-controller-manager not healthy; its log:"
	tail -20 "$run/kube-controller-manager.log" >&2
	return 1
}

# wait_ready waits up to a minute for https://127.0.0.1:$1/readyz to answer
# ok, with the CA in $2 and the token $TOKEN.
wait_ready() {
	local port=$1 ca=$2
	for _ in $(seq 600); do
		if curl -sf --cacert "$ca" -H "Authorization: Bearer $TOKEN" "https://127.0.0.1:$port/readyz" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
	done
	log "no ready server on 127.0.0.1:$port"
	return 1
}

# cpu_profile writes the CPU profile of the API server on $API_PORT over
# the next $2 (a Go duration in whole seconds, such as 10s) to the file $1,
# after waiting $3 (default 0s); kube-apiserver needs --profiling. Run it
# in the background beside the load it profiles.
cpu_profile() {
	local file=$1 secs=${2%s} delay=${3:-0s}
	sleep "$delay"
	curl -sf --cacert "$WORK/pki/ca.crt" -H "Authorization: Bearer $TOKEN" -o "$file" \
		"https://127.0.0.1:$API_PORT/debug/pprof/profile?seconds=$secs" ||
		log "no CPU profile from 127.0.0.1:$API_PORT"
}

# run_tool runs the bench harness's tool $1 (built by prepare_bench) with
# the arguments after it, on LOAD_CPUS as the load it makes.
run_tool() {
	(on_cpus "${LOAD_CPUS:-}" "$WORK/$1" "${@:2}")
}

# prepare_bench sets TARGETS to the targets given after $1 (kube and
# listwatch at HEAD when none), makes the work directory, builds kube's
# binaries and the bench harness's tool $1 into $WORK/$1.
prepare_bench() {
	local tool=$1
	shift
	TARGETS=("$@")
	if [[ ${#TARGETS[@]} == 0 ]]; then
		TARGETS=(kube HEAD)
	fi
	make_work
	build_binaries
	log "building $tool"
	(cd "$REPO/bench" && go build -o "$WORK/$tool" "./$tool")
}
