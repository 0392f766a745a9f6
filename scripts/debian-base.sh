#!/usr/bin/env bash
# Build dlc-local/debian:bookworm (Debian minbase + python3) without any image registry, once:
# debootstrap into a temporary rootfs, then `docker import`. The e2e targets' framework images
# (scripts/e2e-pytorch.sh, e2e-jupyter.sh) start FROM it, so their containers need no network.
#   usage: debian-base.sh WORK_DIR     (prints nothing when the image exists already)
set -euo pipefail
BASE=dlc-local/debian:bookworm
WORK=${1:?usage: debian-base.sh WORK_DIR}
docker image inspect "$BASE" >/dev/null 2>&1 && exit 0
command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >/dev/null
echo "debian-base: debootstrap bookworm (minbase + python3) into $WORK/rootfs" >&2
mkdir -p "$WORK"
rm -rf "$WORK/rootfs"
debootstrap --variant=minbase --include=python3,python3-venv bookworm "$WORK/rootfs" \
    http://deb.debian.org/debian >"$WORK/debootstrap.log" 2>&1
tar -C "$WORK/rootfs" -c . | docker import -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$BASE"
rm -rf "$WORK/rootfs"
