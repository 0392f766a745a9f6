"""What a user asks for: :class:`JobSpec`, parsed and checked field by field.

``dlc submit`` (flags or YAML) and ``POST /jobs`` carry a spec; :meth:`JobSpec.from_dict`
validates it with the field parsers of :mod:`~dlc.scheduler.jobs.spec_fields` and raises
:class:`~dlc.errors.JobSpecError` naming the field and the fix. The checks that depend on
the scheduler's settings (volumes, registries, the container user) are in
:mod:`~dlc.scheduler.jobs.spec_admission`; the job record and its states in
:mod:`~dlc.scheduler.jobs.job`, which re-exports all of these.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from dlc.errors import JobSpecError
from dlc.images.reference import ImageReferenceError, parse_reference
from dlc.scheduler.gangs.elastic import MAX_NODES, parse_nodes
from dlc.scheduler.gangs.topology import GangTopology
from dlc.scheduler.jobs.launch_spec import parse_user
from dlc.scheduler.jobs.spec_fields import (
    _CUDA_RE,
    _FIELD_RE,
    _FRAMEWORK_RE,
    _HOW,
    _NAME_RE,
    EXCLUSIVE_SCOPES,
    MAX_IMAGE,
    MAX_SPEC_BYTES,
    VolumeSpec,
    _command,
    _env,
    _fix,
    _flag,
    _float,
    _gpu_memory,
    _gpus,
    _int,
    _opt_str,
    _short,
    _volumes,
    check_name,
    mib_text,
    priority_of_class,
)
from dlc.scheduler.jobs.spec_rules import gpu_model_problem
from dlc.topology.model import VENDORS

#: snapshot ids as :mod:`dlc.store.blobs` makes them
_WORKDIR_RE = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class JobSpec:
    """What a user asks for.

    Attributes:
        framework: ``name:version`` from the image catalog (e.g. ``pytorch:2.3``),
            or ``None`` when ``image`` is given.
        image: an explicit image reference (wins over ``framework``).
        gpus: GPUs per node (0: a CPU-only job, :attr:`is_cpu_only`).
        nodes: number of agents the job spans (gang-placed all together); of an elastic
            gang, its MIN.
        nodes_max: an elastic gang's MAX (``--nodes MIN:MAX``, :mod:`~dlc.scheduler.gangs.elastic`);
            ``None``: a fixed size.
        gpu_model: substring the GPU model must contain (``V100``), if any; several
            allowed models are separated by ``|`` (``V100M16|V100M32``: either).
        cpus: CPUs per node.
        mem_mib: memory per node in MiB.
        disk_mib: disk per node in MiB (0: none asked).
        command: argv run in the container.
        env: extra environment variables.
        volumes: host mounts.
        priority: higher runs first (default 0).
        retries: how many times a failed or lost job is re-queued.
        name: a short human name (defaults to the framework).
        cuda_version: CUDA version of the image (filled from the catalog).
        gpu_vendor: ``nvidia`` or ``amd``: only that vendor's GPUs (a catalog image fills it).
        rocm_version: ROCm version of an AMD image (filled from the catalog).
        container_user: ``UID[:GID]`` the container should run as; only where the operator
            lets jobs choose (``--allow-job-user``); ``None``: the cluster's default user.
        workdir: id of an uploaded working-directory snapshot (``dlc submit --workdir``),
            unpacked at ``/workspace``, the job's working directory; ``None``: none.
        interactive: an environment (JupyterLab) reached through a port from the offer
            (docs/environments.md), stopped when idle for ``idle_timeout_s``.
        idle_timeout_s: seconds without activity before an interactive job stops.
        gpu_fraction: a share of ONE GPU, ``0 < F < 1`` of its compute and (unless
            ``gpu_memory`` is given) of its memory (``--gpus 0.5``, YAML ``gpus: 0.5``);
            ``None``: whole GPUs.
        gpu_memory: a memory share of ONE GPU in MiB (``--gpu-memory 4G``); without a
            fraction, compute is shared without a floor. ``None``: none asked.
        exclusive_per: a share's GPU is shared only with shares of the same ``user`` or
            ``group`` (``--exclusive-per-user``, docs/sharing.md); ``None``: with anyone.
        gang_topology: ``LEVEL:MODE`` (``switch:required``): how close a gang's nodes must
            be (:mod:`~dlc.scheduler.gangs.topology`); ``None``: ``switch:preferred``.
    """

    framework: str | None = None
    image: str | None = None
    gpus: int = 1
    nodes: int = 1
    gpu_model: str | None = None
    cpus: float = 1.0
    mem_mib: int = 1024
    disk_mib: int = 0
    command: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    volumes: tuple[VolumeSpec, ...] = ()
    priority: int = 0
    retries: int = 0
    name: str | None = None
    cuda_version: str | None = None
    container_user: str | None = None
    workdir: str | None = None
    interactive: bool = False
    idle_timeout_s: int = 3600
    pool: str | None = None
    priority_class: str | None = None
    gpu_fraction: float | None = None
    gpu_memory: int | None = None
    exclusive_per: str | None = None
    gpu_vendor: str | None = None
    rocm_version: str | None = None
    gang_topology: str | None = None
    nodes_max: int | None = None

    def _check_vendor(self) -> None:
        """A known vendor; no share on AMD, where nothing enforces one (docs/sharing.md)."""
        if self.gpu_vendor is None:
            return
        if self.gpu_vendor not in VENDORS:
            raise JobSpecError(
                "gpu_vendor", f"{_short(self.gpu_vendor)} is not a GPU vendor; {_fix('gpu_vendor')}"
            )
        if self.gpu_fraction is not None or self.gpu_memory is not None:
            from dlc.devices.registry import backend_for

            support = backend_for(self.gpu_vendor).sharing()
            if not support.allowed:
                raise JobSpecError("gpu_vendor", support.refusal)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the inverse of :meth:`from_dict`)."""
        # field by field, not dataclasses.asdict: asdict deep-copies every value, and an
        # offer round encoded every launched job's spec so (issue 26); the same dict results
        body = {name: getattr(self, name) for name in _SPEC_FIELD_NAMES}
        body["command"] = list(self.command)
        body["env"] = dict(self.env)
        body["volumes"] = [asdict(v) for v in self.volumes]
        if self.nodes_max is None:  # a fixed-size job's row stays readable by an older DLC
            del body["nodes_max"]
        return body

    @classmethod
    def from_dict(cls, data: Any) -> JobSpec:
        """Validate a spec from JSON/YAML data.

        Raises:
            JobSpecError: the first invalid field, named, with how to fix it.
        """
        _refuse_unknown(data, set(cls.__dataclass_fields__))
        spec = cls(**_parse_fields(data))
        if spec.priority_class is not None and data.get("priority") is None:
            spec = replace(spec, priority=priority_of_class(spec.priority_class))
        spec.check()
        size = len(json.dumps(spec.to_dict()))
        if size > MAX_SPEC_BYTES:
            raise JobSpecError(
                "spec",
                f"is {size} bytes, more than {MAX_SPEC_BYTES}; pass large data in a volume "
                "or a file in the image, not in env or command",
            )
        return spec

    def check(self) -> None:
        """Cross-field checks.

        Raises:
            JobSpecError: no image source, or a malformed framework/name.
        """
        self._check_source()
        self._check_share()
        self._check_cpu_only()
        if self.framework and not _FRAMEWORK_RE.match(self.framework):
            raise JobSpecError(
                "framework",
                f"{_short(self.framework)} is not NAME:VERSION; {_fix('framework')}, "
                "e.g. --framework pytorch:2.3 (`dlc images` lists them)",
            )
        if self.image is not None:
            try:
                parse_reference(self.image)
            except ImageReferenceError as exc:
                raise JobSpecError(
                    "image",
                    f"{_short(self.image)}: {exc}; {_fix('image')}, e.g. pytorch/pytorch:2.3.1",
                ) from None
        if self.gpu_model is not None and gpu_model_problem(self.gpu_model):
            problem = gpu_model_problem(self.gpu_model)
            raise JobSpecError("gpu_model", f"{_short(self.gpu_model)} {problem}")
        self._check_vendor()
        if self.cuda_version is not None and not _CUDA_RE.match(self.cuda_version):
            raise JobSpecError(
                "cuda_version", f"{_short(self.cuda_version)} is not X.Y; {_fix('cuda_version')}"
            )
        if self.container_user is not None:
            try:
                parse_user(self.container_user)
            except ValueError as exc:
                raise JobSpecError("container_user", f"{exc}; {_fix('container_user')}") from None
        if self.pool is not None:
            check_name("pool", self.pool)
        if self.gang_topology is not None and not self.is_gang:
            raise JobSpecError(
                "gang_topology",
                "places the nodes of a gang; pass --nodes 2 or more, or drop --gang-topology",
            )
        if self.nodes_max is not None and not self.nodes < self.nodes_max <= MAX_NODES:
            raise JobSpecError(
                "nodes",
                f"MAX ({self.nodes_max}) must be above MIN ({self.nodes}) and at most "
                f"{MAX_NODES}; pass --nodes MIN:MAX",
            )
        if self.priority_class is not None:
            priority_of_class(self.priority_class)
        if self.name is not None and not _NAME_RE.match(self.name):
            raise JobSpecError(
                "name",
                f"{_short(self.name)} is not a valid name; {_fix('name')} with up to 63 letters, "
                "digits, '_', '.', '-', starting with a letter or digit",
            )

    def _check_source(self) -> None:
        """An image source is given, the workdir is a snapshot id, an environment one node."""
        if not self.framework and not self.image:
            raise JobSpecError(
                "framework",
                "give a framework (e.g. pytorch:2.3) or an image; "
                f"{_fix('framework')} (`dlc images` lists them) or {_HOW['image']}",
            )
        if self.workdir is not None and not _WORKDIR_RE.match(self.workdir):
            raise JobSpecError(
                "workdir",
                f"{_short(self.workdir)} is not a snapshot id; pass a directory with "
                "`dlc submit --workdir DIR`, which uploads it",
            )
        if self.interactive and self.is_gang:
            raise JobSpecError(
                "interactive", "an environment runs on one node; drop --nodes or --interactive"
            )

    def _check_share(self) -> None:
        if self.exclusive_per is not None and self.exclusive_per not in EXCLUSIVE_SCOPES:
            raise JobSpecError(
                "exclusive_per",
                f"must be user or group, got {_short(self.exclusive_per)}; {_fix('exclusive_per')}",
            )
        if not self.is_share:
            if self.exclusive_per is not None:
                raise JobSpecError(
                    "exclusive_per",
                    "only a GPU share can be exclusive (whole GPUs are never shared); drop "
                    "--exclusive-per-user or ask for a share (--gpus 0.5, --gpu-memory 4G)",
                )
            return
        if self.gpus == 0:
            raise JobSpecError(
                "gpu_memory",
                "a CPU-only job (--gpus 0) takes no GPU memory; drop --gpu-memory, or drop "
                "--gpus 0 to ask a share of one GPU",
            )
        if self.gpus != 1:
            raise JobSpecError(
                "gpu_memory",
                f"a share is part of ONE GPU but --gpus {self.gpus} was asked; "
                "drop --gpu-memory or ask for whole GPUs only",
            )
        if self.is_gang:
            raise JobSpecError(
                "nodes",
                f"a GPU share runs on one node, not {self.nodes_text}; drop --nodes "
                "or ask for whole GPUs (--gpus N)",
            )

    def _check_cpu_only(self) -> None:
        if self.is_cpu_only and self.gpu_model is not None:
            raise JobSpecError(
                "gpu_model",
                "a CPU-only job (--gpus 0) runs on no GPU; drop --gpu-model or ask for GPUs",
            )

    @property
    def is_cpu_only(self) -> bool:
        """True for a job that asks no GPU (``gpus: 0``): it takes CPU and memory only."""
        return self.gpus == 0 and not self.is_share

    @property
    def is_gang(self) -> bool:
        """True for a multi-node job: more than one node, or an elastic gang."""
        return self.nodes > 1 or self.nodes_max is not None

    @property
    def nodes_text(self) -> str:
        """``4``, or ``2:4`` for an elastic gang."""
        return f"{self.nodes}:{self.nodes_max}" if self.nodes_max is not None else str(self.nodes)

    @property
    def is_share(self) -> bool:
        """True when the job asks for part of one GPU, not whole GPUs."""
        return self.gpu_fraction is not None or self.gpu_memory is not None

    @property
    def share_core_milli(self) -> int:
        """The compute share in thousandths (0: shared without a floor)."""
        return round(self.gpu_fraction * 1000) if self.gpu_fraction is not None else 0

    def share_memory_mib(self, gpu_memory_mib: int) -> int:
        """The memory share on a GPU of ``gpu_memory_mib`` MiB."""
        if self.gpu_memory is not None:
            return self.gpu_memory
        return int(gpu_memory_mib * (self.gpu_fraction or 0.0))

    @property
    def share_text(self) -> str | None:
        """``0.5 of a GPU``, ``4 GiB of a GPU``, or both; ``None`` for whole GPUs."""
        if not self.is_share:
            return None
        parts = []
        if self.gpu_fraction is not None:
            parts.append(f"{self.gpu_fraction:g}")
        if self.gpu_memory is not None:
            parts.append(mib_text(self.gpu_memory))
        return " + ".join(parts)

    @property
    def label(self) -> str:
        """What the job runs, for task names: the framework or the image."""
        return self.framework or self.image or "?"

    @property
    def total_gpus(self) -> int:
        """GPUs over all nodes."""
        return self.gpus * self.nodes


def _refuse_unknown(data: Any, known: set[str]) -> None:
    """Refuse data that is not a mapping, or holds a key that is no spec field.

    Raises:
        JobSpecError: field ``spec``, or the first unknown key, with the known fields.
    """
    if not isinstance(data, dict):
        raise JobSpecError(
            "spec",
            "must be a mapping of fields (framework, gpus, command ...); "
            "write one `field: value` per line",
        )
    # a key is shown as written when it looks like a field name, else quoted and cut short
    unknown = sorted(
        k if isinstance(k, str) and _FIELD_RE.fullmatch(k) else _short(k, 40)
        for k in set(data) - known
    )
    if unknown:
        names = ", ".join(sorted(known))
        raise JobSpecError(
            unknown[0], f"unknown field; known fields: {names}; fix its spelling or remove it"
        )


def _parse_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """Each field of the spec parsed on its own (:mod:`~dlc.scheduler.jobs.spec_fields`)."""
    gpus, fraction = _gpus(data)
    nodes, nodes_max = parse_nodes(data.get("nodes"), data.get("nodes_max"))
    return dict(
        framework=_opt_str(data, "framework"),
        image=_opt_str(data, "image", MAX_IMAGE),
        gpus=gpus,
        nodes=_int({"nodes": nodes}, "nodes", 1, lo=1, hi=MAX_NODES),
        nodes_max=nodes_max,
        gpu_model=_opt_str(data, "gpu_model"),
        cpus=_float(data, "cpus", 1.0),
        mem_mib=_int(data, "mem_mib", 1024, lo=32, hi=1 << 30),
        disk_mib=_int(data, "disk_mib", 0, lo=0, hi=1 << 40),
        command=_command(data.get("command", ())),
        env=_env(data.get("env") or {}),
        volumes=_volumes(data.get("volumes") or ()),
        priority=_int(data, "priority", 0, lo=-1000, hi=1000),
        retries=_int(data, "retries", 0, lo=0, hi=100),
        name=_opt_str(data, "name"),
        cuda_version=_opt_str(data, "cuda_version"),
        container_user=_opt_str(data, "container_user"),
        workdir=_opt_str(data, "workdir"),
        interactive=_flag(data, "interactive"),
        idle_timeout_s=_int(data, "idle_timeout_s", 3600, lo=10, hi=30 * 86400),
        pool=_opt_str(data, "pool"),
        priority_class=_opt_str(data, "priority_class"),
        gpu_fraction=fraction,
        gpu_memory=_gpu_memory(data.get("gpu_memory")),
        exclusive_per=_opt_str(data, "exclusive_per"),
        gpu_vendor=(_opt_str(data, "gpu_vendor") or "").lower() or None,
        rocm_version=_opt_str(data, "rocm_version"),
        gang_topology=_gang_topology(data.get("gang_topology")),
    )


def _gang_topology(value: Any) -> str | None:
    """``gang_topology`` as ``LEVEL:MODE`` text (from text or a level/mode mapping)."""
    if value is None:
        return None
    return GangTopology.parse(value).text


#: JobSpec's fields in declaration order (:meth:`JobSpec.to_dict`)
_SPEC_FIELD_NAMES = tuple(JobSpec.__dataclass_fields__)
