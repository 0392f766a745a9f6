#!/usr/bin/env bash
# Build, start and stop the REAL Apache Mesos 1.11.0 master + agent (../shared/mesos-local) for
# DLC's tests and CI. Everything binds to 127.0.0.1.
#
#   scripts/mesos-local.sh build                 # once; reused afterwards (~20 s fresh, with apt)
#   scripts/mesos-local.sh start [PORT [RUN_DIR]] # prints "127.0.0.1:PORT RUN_DIR" when an agent is up
#   scripts/mesos-local.sh stop RUN_DIR           # stops the master/agent process and its executors
#
# `build` also makes executor authentication work in the shared build (its OpenSSL stubs abort):
# HMAC-SHA256 from Debian's OpenSSL 3 (scripts/mesos-hmac-shim.c) and a command-executor stand-in
# that sends the agent's token (scripts/mesos_executor_patch.py, used as MESOS_LAUNCHER_DIR).
#
# Environment: MESOS_RESOURCES / MESOS_ATTRIBUTES / MESOS_NUM_SLAVES and any other MESOS_* flag
# pass straight through to the master and agents. DLC_SHARED (default ../shared) locates the
# shared mesos-local sources, DLC_MESOS_BUILD (default build/mesos) the build, VENV (default .venv)
# the Python environment whose bin/ goes first on PATH: the agent runs the command-executor
# stand-in with the `python3` it finds on PATH, and that python must import pymesos.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${DLC_SHARED:-$ROOT/../shared}
BUILD=${DLC_MESOS_BUILD:-$ROOT/build/mesos}
VENV=${VENV:-$ROOT/.venv}
case "$VENV" in /*) ;; *) VENV=$ROOT/$VENV ;; esac

die() { echo "mesos-local: $*" >&2; exit 1; }

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

cmd_build() {
    [ -x "$SHARED/mesos-local/setup.sh" ] || die "no $SHARED/mesos-local/setup.sh; set DLC_SHARED to the shared folder"
    bash "$SHARED/mesos-local/setup.sh" "$BUILD"
    patch_hmac
    python3 "$ROOT/scripts/mesos_executor_patch.py" "$SHARED/mesos-local/libexec" "$BUILD/libexec"
}

# The shared build stubs every OpenSSL 1.0 symbol as abort-if-called, so an agent with
# --authenticate_http_executors aborts ("openssl-1.0 stub called: EVP_sha256") when it signs its
# first executor token. Rebuild the stub libcrypto with HMAC/EVP_sha256/EVP_sha1/SHA256 forwarded
# to Debian's OpenSSL 3 (scripts/mesos-hmac-shim.c); the shared sources stay untouched.
HMAC_SYMBOLS="HMAC EVP_sha256 EVP_sha1 SHA256"
patch_hmac() {
    local shim=$ROOT/scripts/mesos-hmac-shim.c marker=$BUILD/.dlc-hmac-shim
    # done, unless the shim changed or setup.sh regenerated the stub library since
    [ -f "$marker" ] && [ "$marker" -nt "$shim" ] && [ "$marker" -nt "$BUILD/libcrypto.so.1.0.0" ] \
        && return 0
    [ -f "$BUILD/crypto_stub.c" ] || die "no $BUILD/crypto_stub.c: the shared build changed its layout"
    [ -e /usr/lib/x86_64-linux-gnu/libcrypto.so.3 ] || ldconfig -p | grep -q 'libcrypto.so.3 ' \
        || die "libcrypto.so.3 (Debian's libssl3) is missing: apt-get install libssl3"
    local pattern="^void (${HMAC_SYMBOLS// /|})[(]void[)]"
    { grep -Ev "$pattern" "$BUILD/crypto_stub.c"; cat "$shim"; } >"$BUILD/crypto_hmac.c"
    gcc -shared -fPIC -o "$BUILD/libcrypto.so.1.0.0.tmp" -Wl,-soname,libcrypto.so.1.0.0 \
        -Wl,--version-script="$BUILD/crypto.map" "$BUILD/crypto_hmac.c" -ldl
    mv "$BUILD/libcrypto.so.1.0.0.tmp" "$BUILD/libcrypto.so.1.0.0"
    touch "$marker"
}

cmd_start() {
    local port=${1:-$(free_port)} run=${2:-}
    [ -x "$BUILD/mesos-local-host" ] || die "not built: run 'scripts/mesos-local.sh build' first"
    [ -d "$VENV/bin" ] && export PATH="$VENV/bin:$PATH"
    python3 -c 'import pymesos' 2>/dev/null \
        || die "python3 on PATH ($(command -v python3)) cannot import pymesos; run scripts/setup-python.sh"
    [ -x "$BUILD/libexec/mesos-executor" ] || die "no $BUILD/libexec: run 'scripts/mesos-local.sh build' again"
    # the command-executor stand-in that sends the agent's executor token (mesos_executor_patch.py)
    export MESOS_LAUNCHER_DIR=${MESOS_LAUNCHER_DIR:-$BUILD/libexec}
    [ -n "$run" ] || run=$(mktemp -d "${TMPDIR:-/tmp}/dlc-mesos-$port.XXXXXX")
    # The agent gives executors only the variables it prepares (the stand-in containerizer then
    # falls back to a default PATH without the venv), so hand it PATH explicitly: the
    # command-executor stand-in is a pymesos program run by the first `python3` on PATH.
    if [ -z "${MESOS_EXECUTOR_ENVIRONMENT_VARIABLES:-}" ]; then
        MESOS_EXECUTOR_ENVIRONMENT_VARIABLES=$(python3 -c 'import json, os; print(json.dumps({"PATH": os.environ["PATH"]}))')
        export MESOS_EXECUTOR_ENVIRONMENT_VARIABLES
    fi
    bash "$SHARED/mesos-local/start.sh" "$BUILD" "$run" "$port" >"$run/start.out" 2>&1 \
        || die "master did not start on 127.0.0.1:$port: $(tail -n 1 "$run/start.out"); log: $run/host.log"
    echo "127.0.0.1:$port $run"
}

# True while PID runs; a zombie counts as gone (an init that does not reap leaves them behind).
alive() {
    local stat
    stat=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
    [ -n "$stat" ] && [ "${stat#Z}" = "$stat" ]
}

descendants() {
    local child
    for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
        echo "$child"
        descendants "$child"
    done
}

cmd_stop() {
    local run=${1:-} pid
    [ -n "$run" ] || die "usage: scripts/mesos-local.sh stop RUN_DIR"
    [ -f "$run/host.pid" ] || die "no $run/host.pid: nothing to stop"
    pid=$(cat "$run/host.pid")
    # Executors run in sessions of their own (the agent's launcher calls setsid) but stay children
    # of the host process: collect them before the host goes, then stop them with it.
    local kids
    kids=$(descendants "$pid")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do alive "$pid" || break; sleep 0.1; done
    kill -KILL "$pid" $kids 2>/dev/null || true
    rm -f "$run/host.pid"
}

case "${1:-}" in
    build) cmd_build ;;
    start) shift; cmd_start "$@" ;;
    stop) shift; cmd_stop "$@" ;;
    *) die "usage: scripts/mesos-local.sh {build|start [PORT [RUN_DIR]]|stop RUN_DIR}" ;;
esac
