#!/usr/bin/env bash
# A private ZooKeeper on loopback for DLC's tests and CI (and for trying HA locally).
#   scripts/zookeeper.sh install                  install Debian's zookeeper if missing
#   scripts/zookeeper.sh start DIR PORT [ID PEERS] start a server with its data in DIR on
#                  127.0.0.1:PORT; prints its connect string. ID (1..255) and PEERS
#                  ("1=127.0.0.1:2888:3888,2=...") make it one member of an ensemble
#   scripts/zookeeper.sh stop DIR                 stop the server of DIR (SIGTERM, then SIGKILL)
# Runs the Debian jars directly (not the system service), so tests can start and stop several
# instances. Waits until the server answers `srvr`; fails loudly when it cannot.
set -euo pipefail
die() { echo "zookeeper.sh: $*" >&2; exit 1; }
JAR=/usr/share/java/zookeeper.jar

install() {
    [ -f "$JAR" ] && command -v java >/dev/null && return 0
    command -v apt-get >/dev/null || die "ZooKeeper is missing and there is no apt-get; install ZooKeeper 3.6+"
    apt-get update -qq || die "apt-get update failed"
    # `zookeeper` is the server and client jars; `zookeeperd` only adds the system service.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends zookeeper \
        || die "apt-get install zookeeper failed"
    [ -f "$JAR" ] || die "zookeeper installed but $JAR is missing"
    command -v java >/dev/null || die "zookeeper installed but there is no java"
}

answers() {  # the four-letter `srvr` command (whitelisted in zoo.cfg)
    { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
    printf srvr >&3
    timeout 2 cat <&3 | grep -q '^Mode: '
    local rc=$?
    exec 3<&-
    return $rc
}

start() {
    local dir=${1:?usage: start DIR PORT [ID PEERS]} port=${2:?usage: start DIR PORT [ID PEERS]}
    local id=${3:-} peers=${4:-}
    install
    mkdir -p "$dir/data"
    dir=$(cd "$dir" && pwd)
    if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
        echo "127.0.0.1:$port"; return 0
    fi
    {
        echo "tickTime=500"
        echo "initLimit=20"
        echo "syncLimit=10"
        echo "dataDir=$dir/data"
        echo "clientPort=$port"
        echo "clientPortAddress=127.0.0.1"
        echo "maxSessionTimeout=60000"
        echo "minSessionTimeout=1000"
        echo "admin.enableServer=false"
        echo "4lw.commands.whitelist=srvr,ruok,stat"
        if [ -n "$peers" ]; then
            IFS=, read -ra members <<<"$peers"
            for m in "${members[@]}"; do echo "server.${m%%=*}=${m#*=}"; done
        fi
    } >"$dir/zoo.cfg"
    [ -n "$id" ] && echo "$id" >"$dir/data/myid"
    # A small heap: tests run several servers on a 2-core machine.
    nohup java -Xmx256m -Dzookeeper.log.dir="$dir" -Dzookeeper.root.logger=INFO,CONSOLE \
        -cp "/etc/zookeeper/conf:$JAR" org.apache.zookeeper.server.quorum.QuorumPeerMain \
        "$dir/zoo.cfg" >"$dir/server.log" 2>&1 &
    echo $! >"$dir/pid"
    # An ensemble member answers only once a quorum is up: with PEERS, wait only for the port.
    for _ in $(seq 1 120); do
        kill -0 "$(cat "$dir/pid")" 2>/dev/null || die "server on 127.0.0.1:$port exited: $(tail -3 "$dir/server.log")"
        if [ -n "$peers" ]; then
            { (exec 3<>"/dev/tcp/127.0.0.1/$port"); } 2>/dev/null && { echo "127.0.0.1:$port"; return 0; }
        elif answers "$port"; then
            echo "127.0.0.1:$port"; return 0
        fi
        sleep 0.5
    done
    die "server on 127.0.0.1:$port did not answer within 60 s: $(tail -3 "$dir/server.log")"
}

stop() {
    local dir=${1:?usage: stop DIR} pid
    [ -f "$dir/pid" ] || die "$dir holds no server (no pid file)"
    pid=$(cat "$dir/pid")
    kill "$pid" 2>/dev/null || { rm -f "$dir/pid"; return 0; }
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || { rm -f "$dir/pid"; return 0; }; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/pid"
}

case "${1:-}" in
    install) install ;;
    start) shift; start "$@" ;;
    stop) shift; stop "$@" ;;
    *) die "usage: $0 install | start DIR PORT [ID PEERS] | stop DIR" ;;
esac
