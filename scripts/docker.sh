#!/usr/bin/env bash
# Install and start what DLC's Docker tests need: the Docker engine, a local registry and the
# test image. Idempotent: every step checks first, so CI and developers can call it any time.
#
#   scripts/docker.sh start    install (Debian, as root) if missing; start dockerd and the
#                              registry in the background if not answering; build the test image
#   scripts/docker.sh stop     stop the dockerd and registry this script started
#   scripts/docker.sh status   print what answers
#
# Facts about this sandbox (checked): dockerd needs `--storage-driver=vfs` (no overlay on the
# root filesystem); the default bridge network and cgroup v1 limits work; no public registry is
# reachable, so the test image is `docker import`ed from Debian's busybox-static and the pull
# path uses Debian's docker-registry on 127.0.0.1:5000 (Docker trusts plain HTTP on 127/8).
set -euo pipefail

LOG_DIR=${DLC_DOCKER_LOG_DIR:-/tmp/dlc-docker}
REGISTRY_ADDR=${DLC_TEST_REGISTRY:-127.0.0.1:5000}
TEST_IMAGE=${DLC_TEST_IMAGE:-dlc-test/busybox:1}
mkdir -p "$LOG_DIR"

log() { echo "docker.sh: $*" >&2; }

install_packages() {
    local missing=()
    command -v dockerd >/dev/null || missing+=(docker.io)
    command -v docker-registry >/dev/null || missing+=(docker-registry)
    [ -x /usr/bin/busybox ] || missing+=(busybox-static)
    # the loopback guard's tests (tests/security_r3, tests/docker) install nftables tables
    command -v nft >/dev/null || missing+=(nftables)
    if [ "${#missing[@]}" -gt 0 ]; then
        log "installing ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q >"$LOG_DIR/apt.log" 2>&1
        apt-get install -y -q "${missing[@]}" >>"$LOG_DIR/apt.log" 2>&1
    fi
}

engine_up() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }
registry_up() { curl -fsS "http://$REGISTRY_ADDR/v2/" >/dev/null 2>&1; }

wait_for() {  # wait_for <what> <check function> <seconds>
    local i
    for ((i = 0; i < $3 * 10; i++)); do
        if "$2"; then return 0; fi
        sleep 0.1
    done
    log "$1 did not come up; see $LOG_DIR"
    return 1
}

start_engine() {
    if engine_up; then return 0; fi
    log "starting dockerd (logs: $LOG_DIR/dockerd.log)"
    # setsid: the daemon must not share the caller's process group (Mesos kills executor
    # process groups; a test runner's Ctrl-C must not take the engine down mid-test).
    setsid dockerd --storage-driver=vfs --pidfile "$LOG_DIR/dockerd.pid" \
        >"$LOG_DIR/dockerd.log" 2>&1 </dev/null &
    wait_for dockerd engine_up 60
}

start_registry() {
    if registry_up; then return 0; fi
    # Debian's packaged config wants htpasswd auth; tests use our own, loopback only.
    mkdir -p "$LOG_DIR/registry-data"
    cat >"$LOG_DIR/registry.yml" <<EOF
version: 0.1
storage:
  filesystem:
    rootdirectory: $LOG_DIR/registry-data
  delete:
    enabled: true
http:
  addr: $REGISTRY_ADDR
EOF
    log "starting docker-registry on $REGISTRY_ADDR (logs: $LOG_DIR/registry.log)"
    setsid docker-registry serve "$LOG_DIR/registry.yml" >"$LOG_DIR/registry.log" 2>&1 </dev/null &
    echo $! >"$LOG_DIR/registry.pid"
    wait_for docker-registry registry_up 30
}

# bumped when the image's layout changes; an older image of the same tag is rebuilt
TEST_IMAGE_LAYOUT=2

build_test_image() {
    local layout
    layout=$(docker image inspect -f '{{index .Config.Labels "dlc.test.layout"}}' "$TEST_IMAGE" 2>/dev/null || true)
    if [ "$layout" = "$TEST_IMAGE_LAYOUT" ]; then return 0; fi
    local root
    root=$(mktemp -d)
    # containers run as a non-root uid: the image's / must be 0755 (mktemp makes it 0700)
    chmod 755 "$root"
    mkdir -p "$root/bin" "$root/tmp" "$root/etc"
    chmod 1777 "$root/tmp"
    cp /usr/bin/busybox "$root/bin/busybox"
    "$root/bin/busybox" --list | while read -r applet; do
        [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
    done
    tar -C "$root" -c . | docker import -c 'ENV PATH=/bin' -c 'CMD ["/bin/sh"]' \
        -c "LABEL dlc.test.layout=$TEST_IMAGE_LAYOUT" - "$TEST_IMAGE" >/dev/null
    rm -rf "$root"
    log "built $TEST_IMAGE"
}

stop_pidfile() {
    if [ -f "$1" ]; then
        kill "$(cat "$1")" 2>/dev/null || true
        rm -f "$1"
    fi
}

case "${1:-start}" in
start)
    install_packages
    start_engine
    start_registry
    build_test_image
    ;;
stop)
    stop_pidfile "$LOG_DIR/registry.pid"
    stop_pidfile "$LOG_DIR/dockerd.pid"
    ;;
status)
    if engine_up; then echo "dockerd: up"; else echo "dockerd: down"; fi
    if registry_up; then echo "registry $REGISTRY_ADDR: up"; else echo "registry: down"; fi
    ;;
*)
    echo "usage: $0 start|stop|status" >&2
    exit 2
    ;;
esac
