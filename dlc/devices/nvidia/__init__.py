"""NVIDIA GPUs: NVML / ``nvidia-smi`` discovery, toolkit or legacy container devices, MPS/MIG."""
