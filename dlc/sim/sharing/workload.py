"""The workload of the sharing-cost simulator: openb shapes and lengths as timed jobs.

The openb pod list gives each pod's shape (GPUs, thousandths, CPU, memory) and its life
(``deletion_time - creation_time``); its arrival times are spread over 149 days and would
leave the cluster idle, so jobs are drawn from the GPU pods with replacement and arrive as a
Poisson process that offers ``load`` times the cluster's GPUs. openb has no users, so each job
gets a tenant (Zipf popularity) and a kernel class: both are assumptions, named in
:class:`WorkloadSpec`. Pure: rows in, jobs out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from dlc.errors import FieldError
from dlc.sim.sharing.costs import KERNELS
from dlc.sim.trace import MILLI, NodeSpec


@dataclass(frozen=True)
class PodLife:
    """One openb GPU pod: its shape and how long it ran (seconds)."""

    num_gpu: int
    gpu_milli: int
    cpu_milli: int
    memory_mib: int
    seconds: float


@dataclass(frozen=True)
class JobSpec:
    """One simulated job: ``work`` seconds at full speed on what it asks for."""

    idx: int
    arrival: float
    tenant: str
    num_gpu: int
    gpu_milli: int
    cpu_milli: int
    memory_mib: int
    work: float
    kernel: str

    @property
    def is_share(self) -> bool:
        """True for part of one GPU."""
        return self.num_gpu == 1 and self.gpu_milli < MILLI

    @property
    def gpus(self) -> float:
        """GPUs it holds (a share counts its fraction)."""
        return self.num_gpu * self.gpu_milli / MILLI


@dataclass(frozen=True)
class WorkloadSpec:
    """Assumptions of the workload (none of them is in the trace)."""

    hours: float = 48.0
    #: offered GPU demand per hour over the cluster's GPUs (1.0: exactly full at full speed)
    load: float = 1.0
    nodes: int = 32
    tenants: int = 20
    #: Zipf exponent of tenant popularity (0: all tenants equally busy)
    tenant_skew: float = 1.0
    kernel_mix: Mapping[str, float] = field(
        default_factory=lambda: {k: 1 / len(KERNELS) for k in KERNELS}
    )
    min_seconds: float = 300.0
    max_seconds: float = 86400.0

    def check(self) -> None:
        """One-line errors naming the field."""
        for name, value, lo in (
            ("hours", self.hours, 0.01),
            ("load", self.load, 0.01),
            ("nodes", self.nodes, 1),
            ("tenants", self.tenants, 1),
        ):
            if value < lo:
                raise FieldError(f"--{name}", f"{value} is too small; give at least {lo}")


def parse_lives(rows: Iterable[Mapping[str, str]]) -> list[PodLife]:
    """The GPU pods of an openb pod list (CPU-only pods are left out: they never share)."""
    lives = []
    for row in rows:
        num_gpu = int(float(row.get("num_gpu") or 0))
        if num_gpu <= 0:
            continue
        milli = min(max(int(float(row.get("gpu_milli") or 0)), 1), MILLI)
        start, end = float(row.get("creation_time") or 0), float(row.get("deletion_time") or 0)
        lives.append(
            PodLife(
                num_gpu,
                MILLI if num_gpu > 1 else milli,
                int(float(row.get("cpu_milli") or 0)) or 100,
                int(float(row.get("memory_mib") or 0)),
                max(end - start, 0.0),
            )
        )
    if not lives:
        raise FieldError("--trace", "the pod list has no GPU pod; give an openb pod list")
    return lives


def sample_nodes(nodes: Sequence[NodeSpec], n: int, rng: np.random.Generator) -> list[NodeSpec]:
    """``n`` of the openb GPU nodes, drawn without replacement, in list order."""
    n = min(n, len(nodes))
    return [nodes[i] for i in sorted(rng.choice(len(nodes), n, replace=False))]


def make_jobs(
    lives: Sequence[PodLife], cluster_gpus: int, spec: WorkloadSpec, rng: np.random.Generator
) -> list[JobSpec]:
    """Poisson arrivals over ``spec.hours`` offering ``spec.load`` x ``cluster_gpus``."""
    secs = np.clip([p.seconds for p in lives], spec.min_seconds, spec.max_seconds)
    gpus = np.array([p.num_gpu * (MILLI if p.num_gpu > 1 else p.gpu_milli) / MILLI for p in lives])
    per_hour = spec.load * cluster_gpus * 3600.0 / float(np.mean(gpus * secs))
    weights = 1.0 / np.arange(1, spec.tenants + 1) ** spec.tenant_skew
    weights /= weights.sum()
    kinds = list(spec.kernel_mix)
    kind_p = np.array([spec.kernel_mix[k] for k in kinds])
    jobs: list[JobSpec] = []
    t = 0.0
    horizon = spec.hours * 3600.0
    while True:
        t += rng.exponential(3600.0 / per_hour)
        if t >= horizon:
            return jobs
        i = int(rng.integers(len(lives)))
        p = lives[i]
        jobs.append(
            JobSpec(
                idx=len(jobs),
                arrival=t,
                tenant=f"t{int(rng.choice(spec.tenants, p=weights))}",
                num_gpu=p.num_gpu,
                gpu_milli=MILLI if p.num_gpu > 1 else p.gpu_milli,
                cpu_milli=p.cpu_milli,
                memory_mib=p.memory_mib,
                work=float(secs[i]),
                kernel=kinds[int(rng.choice(len(kinds), p=kind_p))],
            )
        )
