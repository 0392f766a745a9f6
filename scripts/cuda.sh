#!/usr/bin/env bash
# Make sure `nvcc` exists for building and testing the native P2P probe (native/p2p_probe).
# This project's machine images ship CUDA 13.0's nvcc; on a fresh Debian 12 there is none, and
# Debian has the toolkit only in its non-free component: enable it in a sources file of our
# own and install nvidia-cuda-toolkit (CUDA 11.8, ~3 GB). Fails when neither works.
set -euo pipefail

if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
    exit 0
fi
echo "nvcc not found: installing Debian's nvidia-cuda-toolkit (non-free, ~3 GB)" >&2
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
echo "deb http://deb.debian.org/debian ${codename} contrib non-free" \
    >/etc/apt/sources.list.d/dlc-cuda-non-free.list
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nvidia-cuda-toolkit
command -v nvcc >/dev/null 2>&1 || {
    echo "error: nvidia-cuda-toolkit installed but nvcc is still not on PATH" >&2
    exit 1
}
