#!/usr/bin/env bash
# `make e2e-jupyter`: a real JupyterLab started through DLC, opened by headless chromium.
#
#   1. builds dlc-local/jupyterlab:4 without any image registry: the Debian bookworm base of
#      `make e2e-pytorch` (debootstrap + `docker import`, shared), then `docker build`
#      installing jupyterlab from wheels downloaded on the host from PyPI (pip) - the
#      container itself needs no network. Its CMD serves JupyterLab on $DLC_ENV_PORT with
#      $JUPYTER_TOKEN, as DLC's environments expect of an image of one's own;
#   2. runs tests/e2e/jupyter_e2e.py: the emulator `dlc local` runs on, the DLC scheduler and
#      executor with the real Docker engine; `dlc submit --interactive`, `dlc open`, and
#      chromium opens the printed URL and waits for JupyterLab's UI (screenshot saved).
#
# Not in CI: the build downloads ~100 MB and chromium's first JupyterLab load takes a while.
# Reruns reuse the image (DLC_REBUILD=1 forces a rebuild).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
IMAGE=${DLC_JUPYTER_IMAGE:-dlc-local/jupyterlab:4}
BASE=dlc-local/debian:bookworm
WORK=${DLC_E2E_WORK:-/tmp/dlc-e2e-jupyter}
mkdir -p "$WORK"

log() { echo "e2e-jupyter: $*" >&2; }

bash "$ROOT/scripts/docker.sh" start

if [ -n "${DLC_REBUILD:-}" ] || ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
    bash "$ROOT/scripts/debian-base.sh" "$WORK"   # FROM $BASE, built once
    log "downloading jupyterlab and its dependencies on the host"
    rm -rf "$WORK/ctx" && mkdir -p "$WORK/ctx/wheels"
    "$VENV/bin/pip" download -q --only-binary=:all: --python-version 3.11 \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux_2_28_x86_64 --platform linux_x86_64 --platform any \
        --dest "$WORK/ctx/wheels" 'jupyterlab>=4,<5'
    cat >"$WORK/ctx/Dockerfile" <<EOF
FROM $BASE
COPY wheels /wheels
RUN python3 -m venv /opt/jupyter \\
 && /opt/jupyter/bin/pip install -q --no-index --find-links /wheels 'jupyterlab>=4,<5' \\
 && rm -rf /wheels
# the container runs as a non-root uid with no home: Jupyter's state goes under /tmp
ENV PATH=/opt/jupyter/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    HOME=/tmp JUPYTER_CONFIG_DIR=/tmp/.jupyter JUPYTER_DATA_DIR=/tmp/.jupyter-data \\
    JUPYTER_RUNTIME_DIR=/tmp/.jupyter-run IPYTHONDIR=/tmp/.ipython
CMD ["sh", "-c", "exec jupyter lab --ip=0.0.0.0 --port=\$DLC_ENV_PORT --no-browser --ServerApp.root_dir=/tmp --ServerApp.token=\$JUPYTER_TOKEN"]
EOF
    log "building $IMAGE"
    docker build -q -t "$IMAGE" "$WORK/ctx" >/dev/null
    rm -rf "$WORK/ctx"
fi

log "starting JupyterLab through dlc submit --interactive and opening it in chromium"
DLC_JUPYTER_IMAGE=$IMAGE DLC_E2E_WORK=$WORK "$VENV/bin/python" -m pytest -q -s -p no:cacheprovider \
    -m "" "$ROOT/tests/e2e/jupyter_e2e.py"
