"""NVIDIA per-process and per-GPU usage (moved to :mod:`dlc.devices.nvidia.stats`).

Kept so existing imports keep working; new code reads usage through the device seam.
"""

from dlc.devices.nvidia.stats import GpuSample, ProcessGpuMemory, process_gpu_memory, sample_gpus

__all__ = ["GpuSample", "ProcessGpuMemory", "process_gpu_memory", "sample_gpus"]
