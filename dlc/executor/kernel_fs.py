"""Which kernel filesystem an open file is on, so that no job volume is a view of the host.

A bind mount of the host's ``/proc`` (read-only even) hands a job every process of the host:
jobs all run as uid 65534, so one job reads another tenant's ``/proc/PID/environ`` and walks
into its filesystem through the magic link ``/proc/PID/root``, which leaves the read-only mount
(red-team finding 61, docs/security.md). ``/sys``, the cgroup tree and the other kernel
filesystems below are views of the host's kernel and devices, never job data.

:func:`kernel_filesystem` reads ``f_type`` with ``fstatfs`` on the walked ``O_PATH``
descriptor, so another mount of one of these filesystems (a ``/proc/PID`` bound elsewhere, a
procfs mounted under a data tree) is caught wherever it is, not only at ``/proc`` and ``/sys``.
``tmpfs`` (``/dev``, ``/dev/shm``) is ordinary storage by type; those places are DLC's state by
name instead (:data:`~dlc.scheduler.jobs.spec_rules.PLATFORM_STATE`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

#: ``f_type`` magic numbers (``linux/magic.h``) of filesystems that show the host's kernel
KERNEL_FILESYSTEMS = {
    0x9FA0: "proc", 0x62656572: "sysfs", 0x27E0EB: "cgroup", 0x63677270: "cgroup2",
    0x1CD1: "devpts", 0x64626720: "debugfs", 0x74726163: "tracefs", 0x73636673: "securityfs",
    0xCAFE4A11: "bpf", 0x62656570: "configfs", 0x6165676C: "pstore", 0xDE5E81E4: "efivarfs",
    0x65735543: "fusectl", 0x42494E4D: "binfmt_misc", 0x6E736673: "nsfs",
    0x19800202: "mqueue",
}  # fmt: skip


class _Statfs(ctypes.Structure):
    # f_type comes first (a C long on every Linux ABI); the rest is room for the kernel
    _fields_ = [("f_type", ctypes.c_long), ("rest", ctypes.c_byte * 256)]


@functools.cache
def _libc() -> ctypes.CDLL:
    # looked up once: find_library searches the linker's cache (about 1 ms), and every
    # volume is checked twice per task (at the check and at the pin)
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def filesystem_type(fd: int) -> int:
    """``f_type`` of the filesystem ``fd`` (an ``O_PATH`` descriptor will do) is on.

    Raises:
        OSError: ``fstatfs`` failed.
    """
    buf = _Statfs()
    if _libc().fstatfs(fd, ctypes.byref(buf)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, "fstatfs failed")
    return buf.f_type & 0xFFFFFFFF  # a magic is 32 bits; the long may carry its sign


def kernel_filesystem(fd: int) -> str | None:
    """The name of the kernel filesystem ``fd`` is on (``proc``, ``sysfs``, ...), or ``None``
    for storage (ext4, xfs, tmpfs, NFS ...)."""
    return KERNEL_FILESYSTEMS.get(filesystem_type(fd))
