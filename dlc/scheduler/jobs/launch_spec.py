"""The contract between the scheduler and the executor: what one task must run.

The scheduler serialises a :class:`LaunchSpec` into ``TaskInfo.data`` (base64 of
compact JSON, as the Mesos v1 JSON mapping carries bytes); the executor decodes it
on LAUNCH. Both sides import only this module of each other, so it is plain data
with no dependency on pymesos or docker.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field, fields
from typing import Any

from dlc.errors import DlcError

#: bumped when a field changes meaning; the executor refuses unknown versions.
SPEC_VERSION = 1


@dataclass(frozen=True)
class Volume:
    """A host path mounted into the container."""

    host_path: str
    container_path: str
    read_only: bool = True


_USER_RE = re.compile(r"^([0-9]{1,10})(?::([0-9]{1,10}))?$")

#: the default container user: ``nobody:nogroup`` (never root unless the operator allows it)
DEFAULT_CONTAINER_USER = "65534:65534"


def parse_user(text: str) -> tuple[int, int]:
    """``UID[:GID]`` (numbers only) -> ``(uid, gid)``; the gid defaults to the uid.

    Names are refused: they would be looked up in the image's own ``/etc/passwd``, which the
    image's author controls (a ``nobody`` entry with uid 0).

    Raises:
        ValueError: not numeric ``UID[:GID]``.
    """
    match = _USER_RE.match(text)
    if not match:
        raise ValueError(f"{text[:40]!r} is not UID[:GID] in numbers")
    uid = int(match.group(1))
    return uid, int(match.group(2) or uid)


@dataclass(frozen=True)
class TaskPolicy:
    """The operator's security settings, carried to the agent, which enforces them.

    The scheduler fills it from its flags; a spec without one gets these defaults, which
    allow nothing risky (no volumes, no root, any registry).

    Attributes:
        allowed_volumes: host path prefixes volumes must stay under (``--allow-volume``).
        container_user: ``UID:GID`` the container's process runs as (``--container-user``).
        allow_root: whether uid/gid 0 may be used (``--allow-root``).
        allow_job_user: whether a job may choose its own ``UID:GID`` (``--allow-job-user``);
            the scheduler then puts the job's choice in ``container_user``.
        allowed_registries: registries images may come from (``--allow-registry``; empty: any).
    """

    allowed_volumes: tuple[str, ...] = ()
    container_user: str = DEFAULT_CONTAINER_USER
    allow_root: bool = False
    allowed_registries: tuple[str, ...] = ()
    allow_job_user: bool = False

    def check(self) -> None:
        """Refuse an unusable operator setting at start-up rather than on every task.

        Raises:
            DlcError: a malformed ``--container-user``, or root without ``--allow-root``.
        """
        try:
            uid, gid = parse_user(self.container_user)
        except ValueError as exc:
            raise DlcError(
                f"--container-user: {exc}; pass e.g. --container-user 1000:1000"
            ) from None
        if 0 in (uid, gid) and not self.allow_root:
            raise DlcError(
                f"--container-user {self.container_user} is root; pass a non-zero UID:GID, "
                "or add --allow-root to run containers as root"
            )

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> TaskPolicy:
        """Inverse of ``asdict`` (lists back to tuples; unknown keys ignored)."""
        return cls(
            allowed_volumes=tuple(str(p) for p in body.get("allowed_volumes", ())),
            container_user=str(body.get("container_user", DEFAULT_CONTAINER_USER)),
            allow_root=body.get("allow_root") is True,
            allowed_registries=tuple(str(r) for r in body.get("allowed_registries", ())),
            allow_job_user=body.get("allow_job_user") is True,
        )


#: enforcement backends a share can name (``dlc_sharing`` agent attribute)
SHARE_BACKENDS = ("mps", "watchdog", "mig", "none", "shim")


@dataclass(frozen=True)
class GpuShare:
    """A share of ONE GPU (the task holds no whole GPU: ``gpu_ids`` stays empty).

    Attributes:
        gpu_index: host index of the GPU.
        gpu_uuid: its UUID (``GPU-...``), or a MIG device's (``MIG-...``) for ``mig``.
        memory_mib: the memory share in MiB (0: no memory floor or limit).
        core_milli: the compute share in thousandths of the GPU (0: shared without a floor).
        backend: how the agent enforces it: ``mps``, ``watchdog``, ``mig``, ``none`` or
            ``shim``.
        gpu_minor: ``/dev/nvidia<minor>`` of the GPU when known (legacy GPU style).
    """

    gpu_index: int
    gpu_uuid: str | None = None
    memory_mib: int = 0
    core_milli: int = 0
    backend: str = "mps"
    gpu_minor: int | None = None

    def __post_init__(self) -> None:
        if (
            isinstance(self.gpu_index, bool)
            or not isinstance(self.gpu_index, int)
            or self.gpu_index < 0
        ):
            raise DlcError(f"share.gpu_index: {self.gpu_index!r} is not a GPU index")
        if not isinstance(self.memory_mib, int) or self.memory_mib < 0:
            raise DlcError(f"share.memory_mib: {self.memory_mib!r} is not a whole MiB >= 0")
        if not isinstance(self.core_milli, int) or not 0 <= self.core_milli <= 1000:
            raise DlcError(f"share.core_milli: {self.core_milli!r} is not in 0..1000")
        if self.backend not in SHARE_BACKENDS:
            raise DlcError(
                f"share.backend: {self.backend!r} is not one of {', '.join(SHARE_BACKENDS)}"
            )

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> GpuShare:
        """Inverse of ``asdict`` (unknown keys ignored).

        Raises:
            DlcError: a missing or malformed field.
        """
        if not isinstance(body, dict) or "gpu_index" not in body:
            raise DlcError("task data: share must be a JSON object with gpu_index")
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in body.items() if k in known})


@dataclass(frozen=True)
class LaunchSpec:
    """Everything the executor needs to start one job's container.

    Attributes:
        job_id: DLC job id (also in the container's labels).
        image: full image reference, e.g. ``pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime``.
        framework: the ML framework ``name:version`` the user asked for (``"pytorch:2.3"``),
            or ``None`` when the user gave an image directly (not the Mesos framework; the
            task label says ``dlc.ml_framework``; the field keeps its name for stored specs).
        command: argv of the process to run in the container (empty: image default).
        env: extra environment variables.
        gpu_ids: host GPU indices chosen by the allocator, in the order the
            container numbers them (``CUDA_VISIBLE_DEVICES=0..k-1`` maps onto these).
        gpu_uuids: the same GPUs' UUIDs when the scheduler knows them.
        cpus: CPU limit (fractional cores).
        mem_mib: memory limit in MiB.
        workdir: working directory inside the container, if any.
        volumes: host mounts (checked again on the agent: :mod:`dlc.executor.host_paths`).
        user: the submitting user (for labels and logs).
        cuda_version: CUDA version inside the image, for the driver check.
        gpu_minors: ``/dev/nvidia<minor>`` numbers of ``gpu_ids`` when the scheduler knows
            them (agent attributes); empty: the executor reads them on the host.
        driver_version: the agent's NVIDIA driver when known; empty: read on the host.
        policy: the operator's security settings (volumes, container user, registries).
        share: a share of one GPU instead of whole GPUs (``None``: whole GPUs or none).
        network: Docker network mode the task needs (``host`` for multi-node gangs); empty:
            the executor's own ``--network``.
        ports: host ports the task took from its offer (``DLC_PORTS`` in its environment).
        workdir_url: where the executor fetches the job's ``--workdir`` snapshot (empty: none).
        job_secret: the job's secret for the scheduler API's agent routes.
        publish: ``(container port, host port)`` pairs to publish (an environment's server).
        idle_timeout_s: stop an environment after this long without activity (0: never).
    """

    job_id: str
    image: str
    framework: str | None = None
    command: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    gpu_ids: tuple[int, ...] = ()
    gpu_uuids: tuple[str, ...] = ()
    cpus: float = 1.0
    mem_mib: int = 1024
    workdir: str | None = None
    volumes: tuple[Volume, ...] = ()
    user: str = "anonymous"
    cuda_version: str | None = None
    gpu_minors: tuple[int, ...] = ()
    driver_version: str | None = None
    policy: TaskPolicy = field(default_factory=TaskPolicy)
    share: GpuShare | None = None
    network: str = ""
    ports: tuple[int, ...] = ()
    workdir_url: str = ""
    job_secret: str = ""
    publish: tuple[tuple[int, int], ...] = ()
    idle_timeout_s: float = 0.0

    @property
    def gpus_used(self) -> tuple[int, ...]:
        """Host GPU ids the task runs on: its whole GPUs, or the one GPU of its share."""
        return (self.share.gpu_index,) if self.share is not None else self.gpu_ids

    def to_json(self) -> str:
        """Compact JSON text of this spec (with its version)."""
        body = self._plain()
        body["version"] = SPEC_VERSION
        return json.dumps(body, sort_keys=True, separators=(",", ":"))

    def _plain(self) -> dict[str, Any]:
        """``dataclasses.asdict(self)`` as JSON sees it, made shallowly: ``asdict`` deep-copies
        every value and was most of building a TaskInfo (issue 26). Only the nested
        dataclasses need converting; tuples, dicts and plain values dump as they are."""
        body = _shallow(self)
        body["volumes"] = [_shallow(v) for v in self.volumes]
        body["policy"] = _shallow(self.policy)
        body["share"] = None if self.share is None else _shallow(self.share)
        return body

    def encode(self) -> str:
        """Base64 of :meth:`to_json`, ready for ``TaskInfo.data``."""
        return base64.b64encode(self.to_json().encode()).decode()

    @classmethod
    def from_json(cls, text: str) -> LaunchSpec:
        """Parse :meth:`to_json` output.

        Raises:
            DlcError: malformed JSON, an unknown version or a missing field.
        """
        try:
            body = json.loads(text)
        except ValueError as exc:
            raise DlcError(f"task data is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise DlcError("task data must be a JSON object")
        if body.pop("version", None) != SPEC_VERSION:
            raise DlcError(f"task data has an unsupported spec version (want {SPEC_VERSION})")
        known = {f.name for f in fields(cls)}
        missing = {"job_id", "image"} - set(body)
        if missing:
            raise DlcError(f"task data lacks {sorted(missing)}")
        body = {k: v for k, v in body.items() if k in known}
        body["command"] = tuple(body.get("command", ()))
        body["gpu_ids"] = tuple(int(i) for i in body.get("gpu_ids", ()))
        body["gpu_uuids"] = tuple(body.get("gpu_uuids", ()))
        body["gpu_minors"] = tuple(int(i) for i in body.get("gpu_minors", ()))
        body["ports"] = tuple(int(p) for p in body.get("ports", ()))
        body["publish"] = tuple((int(c), int(h)) for c, h in body.get("publish", ()))
        if body.get("network", "") not in ("", "host", "bridge", "none"):
            raise DlcError("task data: network must be host, bridge, none or empty")
        body["volumes"] = tuple(Volume(**v) for v in body.get("volumes", ()))
        policy = body.get("policy") or {}
        if not isinstance(policy, dict):
            raise DlcError("task data: policy must be a JSON object")
        body["policy"] = TaskPolicy.from_dict(policy)
        share = body.get("share")
        body["share"] = None if share is None else GpuShare.from_dict(share)
        return cls(**body)

    @classmethod
    def decode(cls, data: str) -> LaunchSpec:
        """Parse :meth:`encode` output (base64 JSON).

        Raises:
            DlcError: the data is not base64 JSON of a spec.
        """
        try:
            text = base64.b64decode(data, validate=True).decode()
        except (ValueError, UnicodeDecodeError):
            raise DlcError("task data is not base64-encoded UTF-8") from None
        return cls.from_json(text)


#: class -> its field names in order (read once: ``fields()`` per task is not free)
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _shallow(obj: Any) -> dict[str, Any]:
    """A dataclass's fields as a dict, values as they are (they are plain data: strings,
    numbers, tuples and dicts of those, which JSON dumps as ``asdict``'s copies)."""
    names = _FIELD_NAMES.get(type(obj))
    if names is None:
        names = _FIELD_NAMES[type(obj)] = tuple(f.name for f in fields(obj))
    return {name: getattr(obj, name) for name in names}
