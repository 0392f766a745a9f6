"""AMD GPUs (ROCm): ``amd-smi``/``rocm-smi`` discovery, ``/dev/kfd`` + DRM render nodes."""
