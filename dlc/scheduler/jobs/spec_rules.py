"""Rules of a job spec that are checked twice: at submit and again on the agent.

The scheduler (:mod:`dlc.scheduler.jobs.spec`, :mod:`dlc.scheduler.jobs.spec_fields`) answers a
bad spec at once with a one-line error; the agent (:mod:`dlc.executor.host_paths`) re-checks
what reaches it, because a launch spec can come from an older scheduler or a stored job.
Both call these pure functions, so the two never disagree (red-team #15: ``/proc`` and
``/etc`` as mount targets passed submit and then failed on the agent with the container
runtime's raw text). Image references have their own shared module,
:mod:`dlc.images.reference`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: trees no mount may go over or into: the kernel's and the runtime's (runc refuses /proc
#: targets; a mount over /dev breaks the container's /dev/null, "unable to setup user")
RUNTIME_TREES = ("/proc", "/sys", "/dev")
#: DLC's own mounts (:mod:`dlc.executor.workdir`, the GPU driver volume): a second mount at
#: the same place is the engine's "duplicate mount point"
DLC_TREES = ("/workspace", "/outputs", "/usr/local/nvidia")
#: directories a mount may not replace whole (the image's system files), and the files the
#: engine itself mounts into /etc; mounting *below* them (``/etc/myapp``) is fine
SYSTEM_DIRS = (
    "/etc", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf",
    "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr", "/usr/bin", "/usr/lib",
    "/var", "/run",
)  # fmt: skip
#: DLC's own state and its engines' at their default places on an agent, and the host's kernel
#: views (``/proc``, ``/sys``) and shared memory, with what each holds.
#: No job volume may be, contain or lie inside one of them, whatever ``--allow-volume`` says: a
#: prefix over ``/run`` once let a job mount the MPS pipes of other tenants' GPU shares. The
#: agent adds its own paths (sandbox, Mesos work dir, ``$DOCKER_HOST``) and resolves symlinks
#: (``/var/run`` is ``/run``); submit can only compare strings, hence both spellings here.
PLATFORM_STATE = (
    ("/run/dlc-mps", "DLC's MPS pipes"), ("/var/run/dlc-mps", "DLC's MPS pipes"),
    ("/run/dlc-shim", "DLC's shim files"), ("/var/run/dlc-shim", "DLC's shim files"),
    ("/usr/lib/dlc", "DLC's shim library"),
    ("/etc/dlc", "DLC's settings and keys"), ("/var/lib/dlc", "DLC's scheduler store"),
    ("/opt/dlc", "DLC's installation"),
    ("/tmp/dlc-gpu-claim.lock", "DLC's GPU claim lock"),
    ("/var/lib/mesos", "the Mesos agent's work directory"),
    ("/run/mesos", "the Mesos agent's runtime directory"),
    ("/var/run/mesos", "the Mesos agent's runtime directory"),
    ("/run/docker.sock", "the Docker engine's socket"),
    ("/var/run/docker.sock", "the Docker engine's socket"),
    ("/run/docker", "the Docker engine's runtime state"),
    ("/var/run/docker", "the Docker engine's runtime state"),
    ("/var/lib/docker", "the Docker engine's data"),
    ("/run/containerd", "containerd's socket and state"),
    ("/var/run/containerd", "containerd's socket and state"),
    ("/var/lib/containerd", "containerd's data"),
    # kernel views: with every job uid 65534, the host's /proc hands out other tenants'
    # environments and, through /proc/PID/root, their files (red-team finding 61)
    ("/proc", "the host's process table"), ("/sys", "the host's kernel and device tree"),
    ("/dev/shm", "the host's shared memory (GPU shares' MPS segments)"),
)  # fmt: skip
#: what a ``gpu_model`` may hold: it is matched as a substring with punctuation ignored, so
#: ``.*`` (which matched every GPU: it normalises to "") or ``[VA]100`` never meant a pattern
GPU_MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.-]*$")
#: the most models one ``gpu_model`` may allow (``A|B|...``); traces allow at most 7, and each
#: part is matched against every agent model whenever the fragmentation mix is rebuilt
MAX_GPU_MODELS = 16


def normal_container_path(path: str) -> str:
    """``path`` with ``//`` and a trailing ``/`` folded (``/data//x/`` -> ``/data/x``)."""
    return "/" + "/".join(p for p in path.split("/") if p)


def container_path_problem(path: str) -> str | None:
    """Why ``path`` cannot be a mount target in a job's container, or ``None``.

    The reason reads after "the container path": ``is under /proc, which ...``.
    """
    if not path.startswith("/"):
        return "must be absolute; start it with /"
    if any(p in (".", "..") for p in path.split("/")):
        return "must not contain '.' or '..' components; give the plain path"
    norm = normal_container_path(path)
    if norm == "/":
        return "cannot be the container's /; pick a directory such as /data"
    for tree in RUNTIME_TREES + DLC_TREES:
        if norm == tree or norm.startswith(tree + "/"):
            owner = "DLC" if tree in DLC_TREES else "the container runtime"
            return f"is {'' if norm == tree else 'under '}{tree}, which {owner} owns"
    if norm in SYSTEM_DIRS:
        return f"would replace the image's {norm}; mount below it or at another path"
    return None


def state_overlap(host_path: str, state: Iterable[tuple[str, str]]) -> str | None:
    """Why ``host_path`` may not be a job's volume: it is, contains or lies inside one of the
    ``(path, what)`` pairs of platform ``state`` (the first that matches), or ``None``.

    Read-only does not help: a job connects to a socket through a read-only mount. The reason
    reads after "volume ...: ", e.g. ``it contains DLC's MPS pipes /run/dlc-mps``.
    """
    norm = normal_container_path(host_path)
    for path, what in state:
        held = normal_container_path(path)
        if norm == held:
            return f"it is {what} {held}"
        if norm == "/" or held.startswith(norm + "/"):
            return f"it contains {what} {held}"
        if norm.startswith(held + "/"):
            return f"it lies inside {what} {held}"
    return None


#: what follows :func:`state_overlap`'s reason in both sides' errors
STATE_FIX = "mount a directory that does not hold DLC's state"


def duplicate_target(paths: Iterable[str]) -> str | None:
    """The first container path two mounts share (after folding ``//`` and ``/``), or None."""
    seen: set[str] = set()
    for path in paths:
        norm = normal_container_path(path)
        if norm in seen:
            return norm
        seen.add(norm)
    return None


def gpu_model_problem(model: str) -> str | None:
    """Why ``model`` is not a GPU model name to match, or ``None``. Several models are
    allowed separated by ``|`` (``V100M16|V100M32``: either); each must be a name part."""
    parts = model.split("|")
    if not all(GPU_MODEL_RE.match(part) for part in parts):
        return (
            "must be part of a model name (letters, digits, ' ', '_', '.', '-', starting "
            "with a letter or digit), or several separated by '|', not a pattern; e.g. "
            "--gpu-model V100 or --gpu-model 'V100|A100'"
        )
    if len(parts) > MAX_GPU_MODELS:
        return f"allows {len(parts)} models; name at most {MAX_GPU_MODELS}, separated by '|'"
    return None
