"""What fair share over time bills a job: its GPU-equivalents, the largest of its resources.

Fair share (:mod:`~dlc.scheduler.tenancy.fair_share`) once counted GPUs only, so a group that
borrowed only CPUs (CPU-only jobs, or GPU jobs asking many CPUs per GPU) kept a usage of 0
and always borrowed first. As Slurm's fair share does with ``PriorityFlags=MAX_TRES`` (a job
is billed the largest of its weighted TRES), a job is billed, per hour it runs::

    max(its GPUs, its CPUs / CPUs per GPU, its memory / memory per GPU)

with, by default, the cluster's own ratios (its CPUs over its GPUs, its memory over its
GPUs: :func:`rates`). So a GPU job asking the cluster's share of CPUs and memory per GPU, or
less, is billed exactly its GPUs, as before; a CPU-only or CPU-heavy job is billed the GPUs
its CPUs or memory keep from others. On 4 agents of 8 GPUs and 64 CPUs (8 CPUs per GPU), a
``--gpus 0 --cpus 64`` job is billed 8 GPU-hours an hour and a ``--gpus 1 --cpus 8`` job 1.

``dlc scheduler --fair-share-billing cpus=N,mem=SIZE`` (Slurm's ``TRESBillingWeights``) sets
either ratio instead (N CPUs, or SIZE of memory, bill as one GPU; ``0``: not billed), e.g.
where a large CPU-only pool makes the cluster's ratio bill CPUs on the GPU agents too low.
The unit is always the GPU (the ledger's ``gpu_hours``), as Slurm bills one ``billing`` TRES
whatever a node has. A cluster with no GPU known (a CPU-only cluster, or one whose GPU agents
are all away) has no ratio of its own: CPUs bill at :data:`DEFAULT_CPUS_PER_GPU` (``cpus=N``
sets another), memory at the cluster's memory per CPU. It once billed CPU-equivalents there
(one CPU one unit) into the same ledger, so a GPU cluster whose GPU agents left for a while
billed its CPU-only jobs 8 to 40 times their rate, in a unit the views still called GPU-hours.
Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dlc.errors import TenancyError
from dlc.scheduler.tenancy.policy import Resources, parse_mem

_FIELD = "fair_share_billing"

#: CPUs billed as one GPU where the cluster has no GPU to take a ratio from (``cpus`` auto):
#: a common 8-GPU server's 64 CPUs per 8 GPUs
DEFAULT_CPUS_PER_GPU = 8.0


@dataclass(frozen=True)
class BillingWeights:
    """How many CPUs, and how much memory (MiB), bill as one GPU (``None``: the cluster's
    own ratio; ``0``: that resource is not billed)."""

    cpus_per_gpu: float | None = None
    mem_mib_per_gpu: float | None = None


def parse_billing(text: str) -> BillingWeights:
    """``auto``, or ``cpus=N,mem=SIZE`` (either may be ``auto`` or ``0``; one left out is
    ``auto``) -> :class:`BillingWeights`.

    Raises:
        TenancyError: one line naming ``fair_share_billing`` and the fix.
    """
    raw = text.strip().lower()
    if raw in ("", "auto"):
        return BillingWeights()
    given: dict[str, float | None] = {}
    for part in raw.split(","):
        name, sep, value = (p.strip() for p in part.partition("="))
        if not sep or name not in ("cpus", "mem") or name in given:
            raise TenancyError(_FIELD, f"{part.strip()[:30]!r} is not cpus=N or mem=SIZE; write "
                               "e.g. cpus=8,mem=64G (per GPU) or auto")  # fmt: skip
        given[name] = None if value == "auto" else _amount(name, value)
    return BillingWeights(given.get("cpus"), given.get("mem"))


def _amount(name: str, value: str) -> float:
    if name == "mem":
        amount = parse_mem(value.upper(), _FIELD)
    else:
        try:
            amount = float(value)
        except ValueError:
            raise TenancyError(_FIELD, f"cpus={value[:20]} is not a number of CPUs") from None
    if not 0 <= amount < 1e12:  # NaN fails this too
        raise TenancyError(_FIELD, f"{name}={value[:20]} is out of range; give 0 (off) or more")
    return amount


@dataclass(frozen=True)
class BillingRates:
    """GPUs one CPU and one MiB bill as (``cpus_default``: the cluster has no GPU, so CPUs
    bill at :data:`DEFAULT_CPUS_PER_GPU`). The unit is always the GPU-hour."""

    gpus_per_cpu: float = 0.0
    gpus_per_mib: float = 0.0
    cpus_default: bool = False

    def billed(self, held: Resources) -> float:
        """What holding ``held`` bills per hour: its largest weighted resource (a GPU job
        within the ratio is billed exactly its GPUs, not a float step more)."""
        return self.billed_amounts(held.gpus, held.cpus, held.mem_mib)

    def billed_amounts(self, gpus: float, cpus: float, mem_mib: float) -> float:
        """:meth:`billed` of the amounts (the core's per-job path: no
        :class:`~dlc.scheduler.tenancy.policy.Resources` made per job and round)."""
        other = max(cpus * self.gpus_per_cpu, mem_mib * self.gpus_per_mib)
        return other if other > gpus * (1 + 1e-9) + 1e-12 else gpus

    def cpus_per_gpu(self) -> float | None:
        """CPUs billed as one GPU (``None``: CPUs are not billed)."""
        return 1 / self.gpus_per_cpu if self.gpus_per_cpu > 0 else None

    def mem_mib_per_gpu(self) -> float | None:
        """Memory (MiB) billed as one GPU (``None``: memory is not billed)."""
        return 1 / self.gpus_per_mib if self.gpus_per_mib > 0 else None


def cluster_totals(pools: Iterable[Resources]) -> Resources:
    """The cluster's totals: the sum of the pools' (what the quota planner counts)."""
    total = Resources()
    for pool in pools:
        total = total + pool
    return total


def rates(weights: BillingWeights, totals: Resources) -> BillingRates | None:
    """The rates ``weights`` give on a cluster of ``totals`` (``None``: CPUs are billed at
    the cluster's ratio and no agent's CPUs are known yet, so nothing can be billed right;
    memory at the cluster's ratio with no memory known is not billed)."""
    given_cpu, given_mem = weights.cpus_per_gpu, weights.mem_mib_per_gpu
    if given_cpu is None and totals.cpus <= 0:  # (after a restart: only the GPUs of tasks)
        return None
    default = False
    if given_cpu is not None:
        per_cpu = 1 / given_cpu if given_cpu > 0 else 0.0
    elif totals.gpus > 0:
        per_cpu = totals.gpus / totals.cpus
    else:  # no GPU to take a ratio from: still GPU-hours, at the default ratio
        per_cpu, default = 1 / DEFAULT_CPUS_PER_GPU, True
    if given_mem is not None:
        per_mib = 1 / given_mem if given_mem > 0 else 0.0
    elif totals.mem_mib <= 0:
        per_mib = 0.0
    elif totals.gpus > 0:
        per_mib = totals.gpus / totals.mem_mib
    else:  # memory at the cluster's memory per CPU
        per_mib = per_cpu * totals.cpus / totals.mem_mib
    return BillingRates(per_cpu, per_mib, default)
