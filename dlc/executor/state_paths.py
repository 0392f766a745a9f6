"""Where DLC keeps its own state on this agent, resolved, so that no job volume reaches it.

An operator's ``--allow-volume`` prefix may cover a system tree (``/run``, ``/``). A job could
then mount the MPS pipe directories of other tenants' GPU shares, the shim files, the Docker
socket, the Mesos sandboxes (other tasks' output and secrets) or DLC's own code, which the
executor runs as root. :func:`~dlc.executor.host_paths.check_volume` refuses a volume whose
host path is, contains or lies inside any path here, whatever the allow-list says.

Two comparisons, both on resolved paths:

* strings: each state path is resolved with :func:`os.path.realpath` (``/var/run/dlc-mps`` is
  ``/run/dlc-mps`` where ``/var/run -> /run``); a state path that does not exist yet (the MPS
  root before the first share) still counts, since it may appear while the job runs;
* inodes: the ``(st_dev, st_ino)`` of every existing state path and of each of its parents, so
  that a second name of the same directory (a bind mount) is caught too;
* places: each existing state path's filesystem and path inside it
  (:mod:`dlc.executor.mount_places`), compared with the volume's, so that a bind mount of a
  folder *below* a state path (``mount --bind /run/dlc-mps/gpu0 /data/alias``), whose inodes
  are none of the state's, is caught as well.

The volume's own path needs no resolving: the walk refuses any symlink in it, so the walked
path is the real one. The check runs once, before the pin: between the two a job cannot turn a
checked, symlink-free path into state (a container mounts nothing, and a rename across its bind
mount fails), and the pin's own walk refuses any symlink planted since.

:func:`prefix_warnings` tells the operator at start which ``--allow-volume`` prefixes reach
this state (``/run`` contains the MPS pipes), so that a refusal later is no surprise.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dlc.executor.mount_places import MountEntry, Place, place_of, read_mounts
from dlc.scheduler.jobs.spec_rules import PLATFORM_STATE, state_overlap

#: an inode on the host: ``(st_dev, st_ino)``
Inode = tuple[int, int]
#: more directories of DLC's state on this agent, ``:``-separated, from the agent's executor
#: environment (``dlc local`` names its work dir: the job store and the admin token)
STATE_DIRS_VARIABLE = "DLC_STATE_DIRS"
#: the components a Mesos sandbox ends with, below the agent's work dir
_SANDBOX_TAIL = ("slaves", "*", "frameworks", "*", "executors", "*", "runs", "*")


@dataclass(frozen=True)
class StatePath:
    """One place of platform state and what it holds (the words of the refusal)."""

    path: str
    what: str


def default_state_paths(env: Mapping[str, str] | None = None) -> tuple[StatePath, ...]:
    """The state every agent has: :data:`PLATFORM_STATE`, ``$DOCKER_HOST``'s socket, the
    Python environment and package the executor runs from, and ``$DLC_STATE_DIRS``."""
    env = os.environ if env is None else env
    paths = [StatePath(path, what) for path, what in PLATFORM_STATE]
    for path in env.get(STATE_DIRS_VARIABLE, "").split(":"):
        if path.startswith("/"):
            paths.append(StatePath(path, "DLC's state directory"))
    docker_host = env.get("DOCKER_HOST", "")
    if docker_host.startswith("unix://"):
        paths.append(StatePath(docker_host[len("unix://") :], "the Docker engine's socket"))
    paths.append(StatePath(str(Path(__file__).resolve().parents[1]), "DLC's code"))
    if sys.prefix != sys.base_prefix:  # a virtual environment: DLC's own (a system /usr is not)
        paths.append(StatePath(sys.prefix, "DLC's installation"))
    return tuple(paths)


def agent_work_dir(sandbox: str) -> str | None:
    """The Mesos agent's work dir above ``sandbox``
    (``<work_dir>/slaves/<a>/frameworks/<f>/executors/<e>/runs/<c>``), or ``None``."""
    parts = Path(sandbox).parts
    tail = parts[-len(_SANDBOX_TAIL) :]
    if len(parts) <= len(_SANDBOX_TAIL) or not all(
        want in ("*", got) for want, got in zip(_SANDBOX_TAIL, tail, strict=True)
    ):
        return None
    return str(Path(*parts[: -len(_SANDBOX_TAIL)]))


def runner_state_paths(
    sandbox: str,
    extra: Iterable[StatePath] = (),
    env: Mapping[str, str] | None = None,
) -> tuple[StatePath, ...]:
    """The defaults plus this executor's own places: the Mesos work dir above its sandbox
    (every task's sandbox on the agent), else the sandbox itself, and ``extra`` (the MPS and
    shim roots, the claim lock, as configured)."""
    work_dir = agent_work_dir(sandbox)
    own = (
        StatePath(work_dir, "the Mesos agent's work directory (every task's sandbox)")
        if work_dir
        else StatePath(sandbox, "this executor's sandbox")
    )
    return (*default_state_paths(env), own, *extra)


@dataclass(frozen=True)
class ResolvedState:
    """State paths as this host has them now (see :func:`resolve`).

    Attributes:
        named: ``(path, what)`` for each path as given and as resolved.
        inodes: each existing state path's inode -> ``(resolved path, what)``.
        holders: the inode of each existing state path and of each of its parents ->
            ``(resolved state path, what)``: a volume with one of these holds that state.
        places: each existing state path's place in its filesystem -> ``(resolved path,
            what)``.
        mounts: the mount table the places were read from (``/proc/self/mountinfo``).
    """

    named: tuple[tuple[str, str], ...] = ()
    inodes: dict[Inode, tuple[str, str]] = field(default_factory=dict)
    holders: dict[Inode, tuple[str, str]] = field(default_factory=dict)
    places: dict[Place, tuple[str, str]] = field(default_factory=dict)
    mounts: dict[int, MountEntry] = field(default_factory=dict)

    def problem(self, host_path: str, walked: Sequence[Inode]) -> str | None:
        """Why a volume may not be mounted by name or inode, or ``None`` (its place in its
        filesystem: :meth:`place_problem`).

        Args:
            host_path: the volume's walked (symlink-free) host path.
            walked: the inodes of ``/`` and each component of ``host_path``, in order.
        """
        reason = state_overlap(host_path, self.named)
        if reason or not walked:
            return reason
        for inode in walked:
            if inode in self.inodes:
                path, what = self.inodes[inode]
                verb = "is" if inode == walked[-1] else "lies inside"
                return f"it {verb} {what} {path} (the same directory by another name)"
        if walked[-1] in self.holders:
            path, what = self.holders[walked[-1]]
            return f"it contains {what} {path} (through another name of the same directory)"
        return None

    def place_problem(self, fd: int, host_path: str) -> str | None:
        """Why the walked volume open at ``fd`` (its symlink-free path ``host_path``) may not
        be mounted by its place in its filesystem: it is, lies inside or contains a state
        path's folder under another name (a bind mount below state, #63); ``None`` also when
        the kernel does not say (no ``/proc``: the name and inode checks still apply)."""
        place = place_of(fd, host_path, self.mounts)
        if place is None:
            return None
        for state, (path, what) in self.places.items():
            relation = place.relation(state)
            if relation == "is":
                return f"it is {what} {path} (the same directory by another name)"
            if relation == "lies inside":
                return f"it lies inside {what} {path} (a folder of it mounted by another name)"
            if relation == "contains":
                return f"it contains {what} {path} (through another name of a folder above it)"
        return None


def prefix_warning(prefix: str, state: ResolvedState) -> str | None:
    """One line for the operator when an ``--allow-volume`` ``prefix`` is, contains or lies
    inside a path of ``state`` (the check a volume under it gets, :func:`state_overlap`, on the
    prefix itself), else ``None``. A prefix that is or lies inside state allows nothing; one
    that contains state still allows the rest of its tree. ``{user}`` is compared as written.
    """
    found: dict[str, str] = {}  # resolved state path -> the reason, each place once
    for path, what in state.named:
        reason = state_overlap(prefix, [(path, what)])
        if reason:
            found.setdefault(os.path.realpath(path), reason)
    whole = [r for r in found.values() if not r.startswith("it contains")]
    if whole:
        return f"--allow-volume {prefix}: {whole[0]}; every job volume under it will be refused"
    if not found:
        return None
    first, *more = found.values()
    also = f" and {len(more)} more of DLC's state paths" if more else ""
    return (f"--allow-volume {prefix}: {first}{also}; job volumes that are, contain or lie "
            f"inside them will be refused (the rest of {prefix} stays allowed)")  # fmt: skip


def prefix_warnings(
    prefixes: Iterable[str], extra: Iterable[StatePath] = (), env: Mapping[str, str] | None = None
) -> list[str]:
    """:func:`prefix_warning` for each prefix against :func:`default_state_paths` and
    ``extra``, resolved on this host: what ``dlc scheduler`` and ``dlc local`` print at start
    (an agent may keep more, such as its Mesos work dir, and checks each volume again)."""
    state = resolve((*default_state_paths(env), *extra))
    return [line for p in prefixes if (line := prefix_warning(p, state))]


def _inode(path: str) -> Inode | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def resolve(paths: Iterable[StatePath]) -> ResolvedState:
    """Resolve ``paths`` on this host (symlinks followed; missing paths kept as strings)."""
    named: list[tuple[str, str]] = []
    inodes: dict[Inode, tuple[str, str]] = {}
    holders: dict[Inode, tuple[str, str]] = {}
    places: dict[Place, tuple[str, str]] = {}
    mounts = read_mounts()
    for item in paths:
        if not item.path.startswith("/"):
            continue  # a relative path names nothing fixed on the host
        real = os.path.realpath(item.path)
        named += [(item.path, item.what), (real, item.what)]
        here = _inode(real)
        if here is not None:
            inodes.setdefault(here, (real, item.what))
            place = _place(real, mounts)
            if place is not None:
                places.setdefault(place, (real, item.what))
        parent = real
        while True:
            found = _inode(parent)
            if found is not None:
                holders.setdefault(found, (real, item.what))
            if parent == "/":
                break
            parent = os.path.dirname(parent)
    return ResolvedState(tuple(named), inodes, holders, places, mounts)


def _place(real: str, mounts: dict[int, MountEntry]) -> Place | None:
    try:
        fd = os.open(real, getattr(os, "O_PATH", os.O_RDONLY) | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return place_of(fd, real, mounts)
    finally:
        os.close(fd)
