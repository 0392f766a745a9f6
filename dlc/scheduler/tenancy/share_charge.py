"""What a GPU memory share is charged, in GPUs, on a cluster of mixed GPU sizes.

A ``--gpu-memory 16G`` share fills a 16 GiB GPU but is a fifth of an 80 GiB one. Quotas,
per-user limits, ``dlc queue``/``quota`` and the dashboard all count it with the one
number :func:`charged_mib` picks (docs/quotas.md):

* a share that runs is charged by the GPU it landed on (its memory over that GPU's);
* a share that waits is charged, at admission, by the *smallest* GPU of the pool it may
  use: wherever it lands, it is then charged no less than it will be once it runs.

Red-team finding 4 (docs/security.md): charging every share against the largest GPU of
the whole cluster let a user limited to 1 GPU hold five whole 16 GiB GPUs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from dlc.scheduler.jobs.job import Job, JobState


class SizedAgent(Protocol):
    """What :meth:`GpuSizes.of` reads of an agent (``gpu_memory`` too, where it has one)."""

    @property
    def agent_id(self) -> str: ...

    @property
    def attributes(self) -> Mapping[str, str]: ...


@dataclass(frozen=True)
class GpuSizes:
    """GPU memory sizes (MiB) memory shares are charged against.

    Attributes:
        by_gpu: ``(agent id, GPU index)`` -> that GPU's memory.
        by_pool: pool -> the smallest GPU memory of its agents.
        smallest: the smallest GPU memory of all agents (a pool with none known).
    """

    by_gpu: Mapping[tuple[str, int], int] = field(default_factory=dict)
    by_pool: Mapping[str, int] = field(default_factory=dict)
    smallest: int | None = None

    @classmethod
    def of(
        cls, agents: Iterable[SizedAgent], pool_of: Callable[[Mapping[str, str]], str]
    ) -> GpuSizes:
        """The sizes of ``agents`` (with ``agent_id``, ``attributes`` and ``gpu_memory``:
        index -> MiB); ``pool_of(attributes)`` names an agent's pool."""
        by_gpu: dict[tuple[str, int], int] = {}
        by_pool: dict[str, int] = {}
        for agent in agents:
            sizes = {i: m for i, m in getattr(agent, "gpu_memory", {}).items() if m > 0}
            if not sizes:
                continue
            by_gpu.update({(agent.agent_id, i): m for i, m in sizes.items()})
            pool = pool_of(agent.attributes)
            by_pool[pool] = min(by_pool.get(pool, min(sizes.values())), *sizes.values())
        return cls(by_gpu, by_pool, min(by_pool.values()) if by_pool else None)

    @classmethod
    def uniform(cls, gpu_mib: int | None) -> GpuSizes:
        """Every GPU ``gpu_mib`` (``None``: no size known)."""
        return cls(smallest=gpu_mib)

    def admission_mib(self, pool: str | None) -> int | None:
        """The GPU size a waiting share of ``pool`` is charged against: the pool's smallest
        GPU, else the cluster's smallest, else ``None`` (nothing known)."""
        if pool is not None and pool in self.by_pool:
            return self.by_pool[pool]
        return self.smallest

    def charged_mib(self, job: Job, pool: str | None) -> int | None:
        """The GPU size ``job``'s share is charged against: the GPU it runs on when that is
        known, else (a queued job above all, whatever an earlier run used)
        :meth:`admission_mib`."""
        for task in job.tasks if job.state is not JobState.QUEUED else ():
            if task.share_gpu is not None:
                landed = self.by_gpu.get((task.agent_id, task.share_gpu))
                if landed:
                    return landed
        return self.admission_mib(pool)


def as_sizes(sizes: GpuSizes | int | None) -> GpuSizes:
    """``sizes`` as :class:`GpuSizes` (an int: one GPU size for the whole cluster)."""
    return sizes if isinstance(sizes, GpuSizes) else GpuSizes.uniform(sizes)
