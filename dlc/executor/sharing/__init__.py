"""GPU-share enforcement on the node: MPS limits, an NVML memory watchdog, MIG, DLC's CUDA
shim, or none.

One backend per agent (``dlc node-config --sharing``, the ``dlc_sharing`` attribute); the
scheduler copies it into the task's :class:`~dlc.scheduler.jobs.launch_spec.GpuShare`.

* :mod:`.render`: PURE functions turning a share into container arguments (device, env,
  mounts, IPC, labels), like :mod:`dlc.executor.gpu_render` does for whole GPUs;
* :mod:`.mps`: one MPS control daemon per shared GPU, started with its first share and stopped
  after its last;
* :mod:`.watchdog`: samples per-process GPU memory through NVML and ends a task over its share;
* :mod:`.mig`: lists the MIG instances that exist already (never reconfigures MIG);
* :mod:`.shim`: the ``shim`` backend's files on the agent (DLC's CUDA driver-API interposer,
  ``native/cuda_shim``, loaded through a read-only ``/etc/ld.so.preload``);
* :mod:`.hook`: the small object :class:`~dlc.executor.task_runner.TaskRunner` calls around a
  share's container.
"""
