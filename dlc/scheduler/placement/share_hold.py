"""Share hold: an opt-in admission rule that keeps whole GPUs from shares few others fill.

While whole GPUs are less of the free GPU capacity of every agent the core knows than
``reserve`` times the whole-GPU part of the queued and running GPU demand, a share whose
leftover on a whole GPU few expected shares fit (an 0.81 share leaves 0.19, which only the
rare small shares fill) may not open a whole GPU: it joins a GPU already in use that has
room, or it waits, and the whole GPUs stay for whole-GPU jobs. A share held longer than
``max_wait_s`` is placed anyway, so nobody starves. The rule itself is
:func:`dlc.scheduler.allocator.fragscore.share_hold` (with :func:`~dlc.scheduler.allocator.
fragscore.leftover_fill`), the one the simulator's ``dlc-admit`` policy runs; this module
feeds it the scheduler's facts: the free GPU capacity of every known agent, and the
expected mix from the queued and running jobs (shares and whole-GPU jobs). docs/sharing.md
has the why and the trade-off. Pure: no I/O, no clock (the core passes ``now``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from dlc.errors import ConfigError
from dlc.scheduler.allocator import fragscore
from dlc.scheduler.allocator import shares as fgd
from dlc.scheduler.jobs.job import Job
from dlc.scheduler.placement.cluster import GPU_FREE, AgentView

#: every hold reason starts so (the core keeps when each held job was first held)
HELD_PREFIX = "held: "
#: fewer known shares than this give no basis for "few shares fit": nothing is held
MIN_SHARES = 8


@dataclass(frozen=True)
class ShareHoldSettings:
    """``--share-hold-reserve``, ``--share-hold-fill``, ``--share-hold-max-wait``.

    Attributes:
        reserve: the hold applies while whole GPUs are less of the free GPU capacity than
            this times the whole-GPU part of the expected GPU demand (0: off; 1: keep the
            free capacity shaped like the demand).
        fill: a leftover counts as unfillable when the expected shares that fit in it are
            less than this part of all expected shares.
        max_wait_s: a share held longer than this (since it was first held) is placed anyway.

    Raises:
        ConfigError: a value out of range, naming the flag and the fix.
    """

    reserve: float = 0.0
    fill: float = 0.1
    max_wait_s: float = 600.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.reserve <= 10.0:  # also refuses NaN
            raise ConfigError(
                "--share-hold-reserve",
                f"{self.reserve:g} is not a factor in 0..10; give 0 (off) to 10, e.g. 1",
            )
        if not 0.0 <= self.fill <= 1.0:
            raise ConfigError(
                "--share-hold-fill",
                f"{self.fill:g} is not a fraction; give 0..1, e.g. 0.1 (the part of expected "
                "shares a leftover must fit)",
            )
        if not self.max_wait_s >= 0 or math.isinf(self.max_wait_s):
            raise ConfigError(
                "--share-hold-max-wait",
                f"{self.max_wait_s:g} is not a number of seconds; give 0 or more, e.g. 600",
            )

    @property
    def enabled(self) -> bool:
        """Whether the hold is on."""
        return self.reserve > 0

    def params(self) -> fragscore.ScoreParams:
        """fragscore's knobs for :func:`~dlc.scheduler.allocator.fragscore.share_hold`."""
        return replace(fragscore.DEFAULT_PARAMS, hold_reserve=self.reserve,
                       hold_fill_below=self.fill)  # fmt: skip


def gpu_left_of(
    agents: Iterable[AgentView], share_used: Mapping[tuple[str, int], int] | None = None
) -> tuple[np.ndarray, dict[str, int], int]:
    """``([agents, G] free thousandths, agent id -> row, GPU count)`` of the known agents.

    1000 marks a whole free GPU (no task holds it and its latest offered ranges are whole);
    a GPU a whole-GPU task holds is 0; a GPU DLC's shares use keeps at most 1000 minus
    their thousandths (``share_used``: (agent id, GPU) -> thousandths), whatever an older
    offer said; rows are padded with 0 (padding is no GPU: the count says).
    """
    share_used = share_used or {}
    rows: list[list[int]] = []
    index: dict[str, int] = {}
    count = 0
    for agent in agents:
        row = [0] * (max(agent.gpu_ids, default=-1) + 1)
        for gpu in agent.gpus:
            count += 1
            if gpu.state != GPU_FREE:
                continue
            whole_mem = gpu.free_memory_mib is None or gpu.memory_mib is None or (
                gpu.free_memory_mib >= gpu.memory_mib)  # fmt: skip
            milli = gpu.free_compute_milli
            left = fgd.MILLI if milli >= fgd.MILLI and whole_mem else min(milli, 999)
            used = share_used.get((agent.agent_id, gpu.index), 0)
            row[gpu.index] = min(left, fgd.MILLI - used) if used else left
        index[agent.agent_id] = len(rows)
        rows.append(row)
    width = max((len(r) for r in rows), default=0)
    table = np.zeros((len(rows), max(width, 1)), dtype=np.int64)
    for k, row in enumerate(rows):
        table[k, : len(row)] = row
    return table, index, count


def share_mix(demands: Iterable[tuple[int, int]]) -> fgd.MixArrays | None:
    """The expected workload from ``(GPU thousandths, GPUs)`` per job, weighted by how many
    ask each (``None``: fewer than :data:`MIN_SHARES` shares, no basis to call a leftover
    unfillable). Whole-GPU jobs (1000 thousandths) set how many whole GPUs to keep."""
    counts: dict[tuple[int, int], int] = {}
    for milli, gpus in demands:
        if 0 < milli <= fgd.MILLI and gpus > 0:
            key = (min(milli, fgd.MILLI), gpus if milli >= fgd.MILLI else 1)
            counts[key] = counts.get(key, 0) + 1
    if sum(n for (milli, _), n in counts.items() if milli < fgd.MILLI) < MIN_SHARES:
        return None
    shapes = tuple(
        fgd.ShareRequest(cpu_milli=0, mem_mib=0, num_gpus=gpus, gpu_milli=milli)
        for milli, gpus in sorted(counts)
    )
    weights = tuple(float(counts[(s.gpu_milli, s.num_gpus)]) for s in shapes)
    return fragscore.mix_arrays(fgd.WorkloadMix(shapes, weights), ["gpu"])


@dataclass(kw_only=True)
class ShareHold:
    """One offer round's hold: the settings, the cluster's whole GPUs and the share mix.

    Attributes:
        settings: the ``--share-hold-*`` values.
        gpu_left, rows, gpu_count: :func:`gpu_left_of` over every known agent.
        mix: :func:`share_mix` of the queued and running jobs (``None``: no basis).
        now: the round's time.
        since: job id -> when it was first held (a job not in it was not held yet).
    """

    settings: ShareHoldSettings
    gpu_left: np.ndarray
    rows: dict[str, int]
    gpu_count: int
    mix: fgd.MixArrays | None
    now: float
    since: Mapping[str, float]

    def waited(self, job: Job) -> float:
        """Seconds ``job`` has been held (0 when it was not held yet)."""
        return max(0.0, self.now - self.since.get(job.job_id, self.now))

    def exempt(self, job: Job) -> bool:
        """Whether ``job`` has been held long enough to be placed anyway."""
        return self.since.get(job.job_id) is not None and (
            self.waited(job) >= self.settings.max_wait_s)  # fmt: skip

    def barred(self, job: Job, share_milli: int) -> Callable[[str, int], bool] | None:
        """``(agent id, GPU index) -> bool``: the whole free GPUs a share of ``share_milli``
        thousandths may not open, from fragscore's mask; ``None`` when it is not held."""
        if self.mix is None or not self.gpu_count or self.exempt(job):
            return None
        mask = fragscore.share_hold(share_milli, self.gpu_left, self.mix, self.settings.params())
        if mask is None:
            return None
        rows, width = self.rows, mask.shape[1]

        def bars(agent_id: str, gpu: int) -> bool:
            row = rows.get(agent_id)
            return row is not None and gpu < width and bool(np.isinf(mask[row, gpu]))

        return bars

    def took(self, agent_id: str, gpus: Iterable[int], share_milli: int | None = None) -> None:
        """A task placed this round holds ``gpus`` of ``agent_id`` (whole, or a share of
        ``share_milli`` thousandths: 0 when unknown), so the next share of the round sees
        them as the simulator does: the rule is checked per share, not once per round."""
        row = self.rows.get(agent_id)
        for gpu in gpus if row is not None else ():
            if gpu < self.gpu_left.shape[1]:
                left = int(self.gpu_left[row, gpu])
                if share_milli is None:
                    self.gpu_left[row, gpu] = 0
                else:
                    self.gpu_left[row, gpu] = min(max(left - share_milli, 0), fgd.MILLI - 1)

    def reason(self, share_milli: int) -> str:
        """Why a share of ``share_milli`` thousandths waits (without the per-job tail)."""
        fill = fragscore.leftover_fill(share_milli, self.mix) if self.mix is not None else 1.0
        keep = self.settings.reserve * fragscore.whole_demand(self.mix) if self.mix else 0.0
        whole = int((self.gpu_left == fgd.MILLI).sum()) * fgd.MILLI
        free = max(int(self.gpu_left.sum()), 1)
        return (
            f"{HELD_PREFIX}a {share_milli / 1000:.2f}-GPU share would leave "
            f"{_percent(1 - share_milli / 1000)} of a whole GPU that few queued or running "
            f"shares fit ({_percent(fill)} of them), and whole GPUs are only "
            f"{_percent(whole / free)} of the free GPU capacity (the hold keeps {_percent(keep)}, "
            "the whole-GPU jobs' part of the demand)"
        )

    def tail(self, job: Job) -> str:
        """``; waits for a shared GPU with room, at most 10 min more`` for ``job``."""
        left = max(0.0, self.settings.max_wait_s - self.waited(job))
        return f"; waits for a shared GPU with room, at most {math.ceil(left / 60)} min more"


def _percent(fraction: float) -> str:
    return f"{round(fraction * 100)}%"


def build(
    settings: ShareHoldSettings,
    agents: Iterable[AgentView],
    demands: Iterable[tuple[int, int]],
    now: float,
    since: Mapping[str, float],
    share_used: Mapping[tuple[str, int], int] | None = None,
) -> ShareHold | None:
    """The round's :class:`ShareHold` (``None`` when the setting is off)."""
    if not settings.enabled:
        return None
    gpu_left, rows, count = gpu_left_of(agents, share_used)
    return ShareHold(
        settings=settings,
        gpu_left=gpu_left,
        rows=rows,
        gpu_count=count,
        mix=share_mix(demands),
        now=now,
        since=since,
    )


__all__ = ["HELD_PREFIX", "MIN_SHARES", "ShareHold", "ShareHoldSettings", "build", "share_mix"]
