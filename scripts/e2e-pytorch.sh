#!/usr/bin/env bash
# `make e2e-pytorch`: a real PyTorch training step through the whole DLC path, on the CPU.
#
#   1. builds dlc-local/pytorch-cpu:2.13.0 without any image registry: a Debian bookworm
#      rootfs from debootstrap (`docker import`), then `docker build` installing the CPU
#      PyTorch wheel and its dependencies downloaded on the host (pip; /opt/wheels holds
#      torch==2.13.0+cpu on these machines) - the container itself needs no network;
#   2. starts the real Mesos master + agent (scripts/mesos-local.sh) and the DLC scheduler;
#   3. `dlc submit --image dlc-local/pytorch-cpu:2.13.0 --gpus 1 -- python -c <train step>`
#      and checks with `dlc logs` that the loss went down;
#   4. on a second real master with two agents (MESOS_NUM_SLAVES=2), `dlc submit -f
#      examples/torchrun-gloo/job.yaml --workdir examples/torchrun-gloo`: a 2-node `torchrun`
#      whose gloo all_reduce and DDP steps must agree across both nodes' logs.
#
# Not in CI: the image build downloads and installs ~1 GB. Run as root on Debian (docker.sh
# installs the engine). Reruns reuse the image (DLC_REBUILD=1 forces a rebuild).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
IMAGE=${DLC_PYTORCH_IMAGE:-dlc-local/pytorch-cpu:2.13.0}
BASE=dlc-local/debian:bookworm
WORK=${DLC_E2E_WORK:-/tmp/dlc-e2e-pytorch}
mkdir -p "$WORK"

log() { echo "e2e-pytorch: $*" >&2; }

bash "$ROOT/scripts/docker.sh" start

if [ -n "${DLC_REBUILD:-}" ] || ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
    bash "$ROOT/scripts/debian-base.sh" "$WORK"   # FROM $BASE, built once
    log "downloading torch==2.13.0 (CPU) and its dependencies on the host"
    rm -rf "$WORK/ctx" && mkdir -p "$WORK/ctx/wheels"
    "$VENV/bin/pip" download -q --only-binary=:all: --python-version 3.11 \
        --dest "$WORK/ctx/wheels" torch==2.13.0 numpy
    cat >"$WORK/ctx/Dockerfile" <<EOF
FROM $BASE
COPY wheels /wheels
RUN python3 -m venv /opt/torch \\
 && /opt/torch/bin/pip install --no-index --find-links /wheels torch==2.13.0 numpy \\
 && rm -rf /wheels
ENV PATH=/opt/torch/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
EOF
    log "building $IMAGE"
    docker build -q -t "$IMAGE" "$WORK/ctx" >/dev/null
    rm -rf "$WORK/ctx"
fi

log "running a training step through dlc submit -> scheduler -> real Mesos -> executor"
DLC_PYTORCH_IMAGE=$IMAGE "$VENV/bin/python" -m pytest -q -s --durations=5 -p no:cacheprovider -m "" \
    "$ROOT/tests/e2e/pytorch_e2e.py"
