#!/usr/bin/env bash
# A private PostgreSQL server on loopback for DLC's tests and CI (and for trying HA locally).
#   scripts/postgres.sh install                     install Debian's postgresql if missing
#   scripts/postgres.sh start DIR PORT [DB] [USER]  initdb into DIR (once), start on 127.0.0.1:PORT,
#                                                   create DB and USER; prints the store URL
#   scripts/postgres.sh stop DIR                    stop the server of DIR (fast shutdown)
# Loopback only, trust auth (a test server: never point it at a routable address). Runs as the
# `postgres` user when started as root (initdb refuses root). Fails loudly when it cannot.
set -euo pipefail
die() { echo "postgres.sh: $*" >&2; exit 1; }

pg_bin() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
    [ -n "$dir" ] && [ -x "$dir/initdb" ] && echo "$dir"
}

install() {
    pg_bin >/dev/null && return 0
    command -v apt-get >/dev/null || die "postgresql is missing and there is no apt-get; install PostgreSQL 13+"
    apt-get update -qq || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql \
        || die "apt-get install postgresql failed"
    # Debian's package starts a cluster on 5432; the tests use their own servers only.
    pg_bin >/dev/null || die "postgresql installed but no initdb under /usr/lib/postgresql/*/bin"
}

as_owner() {  # run a command as the data dir's owner (postgres when we are root)
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start() {
    local dir=${1:?usage: start DIR PORT [DB] [USER]} port=${2:?usage: start DIR PORT [DB] [USER]}
    local db=${3:-dlc} user=${4:-dlc} bin
    install
    bin=$(pg_bin)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    chmod 700 "$dir"
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        as_owner "$bin/initdb" -D "$dir/data" -A trust -U postgres --no-instructions >"$dir/initdb.log" 2>&1 \
            || die "initdb into $dir/data failed: $(tail -3 "$dir/initdb.log")"
    fi
    if ! as_owner "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
        as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
            -o "-h 127.0.0.1 -p $port -k $dir -c fsync=off -c full_page_writes=off" >/dev/null \
            || die "server on 127.0.0.1:$port did not start: $(tail -3 "$dir/server.log")"
    fi
    local psql=("$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qAtX)
    if [ "$("${psql[@]}" -c "SELECT 1 FROM pg_roles WHERE rolname='$user'")" != 1 ]; then
        "${psql[@]}" -c "CREATE ROLE \"$user\" LOGIN" || die "cannot create user $user"
    fi
    if [ "$("${psql[@]}" -c "SELECT 1 FROM pg_database WHERE datname='$db'")" != 1 ]; then
        "${psql[@]}" -c "CREATE DATABASE \"$db\" OWNER \"$user\"" || die "cannot create database $db"
    fi
    echo "postgresql://$user@127.0.0.1:$port/$db"
}

stop() {
    local dir=${1:?usage: stop DIR} bin
    bin=$(pg_bin) || die "postgresql is not installed"
    [ -f "$dir/data/PG_VERSION" ] || die "$dir holds no server"
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
}

case "${1:-}" in
    install) install ;;
    start) shift; start "$@" ;;
    stop) shift; stop "$@" ;;
    *) die "usage: $0 install | start DIR PORT [DB] [USER] | stop DIR" ;;
esac
