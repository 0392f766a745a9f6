"""The sharing-cost simulator's event loop: progress by co-tenants, faults and their reach.

Each running job progresses at a rate set by its GPU's backend, its kernel class and how many
shares run on that GPU (:class:`~dlc.sim.sharing.costs.SharingCostModel`; a whole-GPU job at
1). Each running share faults at ``fault_rate_per_hour`` (per share-hour of running, a Poisson
process drawn from the job's own seeded stream, so every policy sees the same fault clock per
job); the fault kills the jobs :func:`~dlc.sim.sharing.costs.blast_radius` names. A killed
job keeps the progress of its last checkpoint (every ``checkpoint_minutes`` of running), loses
the rest and goes back into the queue in submission order. Pure: no I/O.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from dlc.sim.sharing.cluster import Cluster, Gpu
from dlc.sim.sharing.costs import SharingCostModel, blast_radius
from dlc.sim.sharing.policy import BackendPolicy
from dlc.sim.sharing.workload import JobSpec
from dlc.sim.trace import NodeSpec

FINISH, FAULT, ARRIVE = 0, 1, 2


@dataclass(frozen=True)
class FaultSpec:
    """Faults and checkpoints: assumptions, not measured (docs/simulator.md)."""

    #: fatal CUDA faults per running share-hour (one per 50 share-hours by default)
    fault_rate_per_hour: float = 0.02
    checkpoint_minutes: float = 30.0
    #: queued jobs tried after resources come free (first-fit backfill window)
    scan: int = 64


@dataclass
class Run:
    """A job's progress (seconds of full-speed work) across its runs."""

    spec: JobSpec
    done: float = 0.0
    kept: float = 0.0
    rate: float = 0.0
    last: float = 0.0
    next_ckpt: float = math.inf
    started: float = -1.0
    ran: float = 0.0
    #: running seconds (over all its runs) at which the share faults next
    fault_at: float | None = None
    run_ver: int = 0
    fin_ver: int = 0
    gpus: list[Gpu] = field(default_factory=list)
    rng: np.random.Generator | None = None
    finished: bool = False


@dataclass
class Result:
    """What one run delivered (GPU-hours count a share by its fraction)."""

    policy: str
    seed: int
    allocated_gpu_h: float = 0.0
    useful_gpu_h: float = 0.0
    lost_own_gpu_h: float = 0.0
    lost_same_tenant_gpu_h: float = 0.0
    lost_other_tenant_gpu_h: float = 0.0
    faults: int = 0
    killed_same_tenant: int = 0
    killed_other_tenant: int = 0
    jobs: int = 0
    completed: int = 0
    queued_at_end: int = 0

    @property
    def lost_gpu_h(self) -> float:
        """All work lost to faults (own and others')."""
        return self.lost_own_gpu_h + self.lost_same_tenant_gpu_h + self.lost_other_tenant_gpu_h

    @property
    def killed_by_others(self) -> int:
        """Jobs killed by another job's fault."""
        return self.killed_same_tenant + self.killed_other_tenant


class Simulation:
    """One policy, one seed: call :meth:`run`."""

    def __init__(
        self,
        nodes: Sequence[NodeSpec],
        jobs: Sequence[JobSpec],
        policy: BackendPolicy,
        model: SharingCostModel,
        faults: FaultSpec,
        seed: int,
        hours: float,
        fault_gap: Callable[[Run], float] | None = None,
    ) -> None:
        """``fault_gap``: running seconds from one fault of a share to its next (default:
        exponential at ``faults.fault_rate_per_hour`` from the job's own seeded stream)."""
        self._gap = fault_gap or self._exponential_gap
        self.cluster = Cluster(nodes, policy)
        self.runs = [Run(j) for j in jobs]
        self.model, self.faults, self.seed = model, faults, seed
        self.horizon = hours * 3600.0
        self.result = Result(policy.name, seed, jobs=len(jobs))
        self.queue: list[int] = []
        self.heap: list[tuple[float, int, int, int, int]] = []
        self._seq = 0
        for r in self.runs:
            self._push(r.spec.arrival, ARRIVE, r.spec.idx, 0)

    def _push(self, t: float, kind: int, idx: int, ver: int) -> None:
        self._seq += 1
        heapq.heappush(self.heap, (t, kind, self._seq, idx, ver))

    def run(self) -> Result:
        """Simulate up to the horizon and return the metrics."""
        while self.heap and self.heap[0][0] < self.horizon:
            t, kind, _, idx, ver = heapq.heappop(self.heap)
            r = self.runs[idx]
            if kind == ARRIVE:
                bisect.insort(self.queue, idx)
                self._schedule(t, only_new=idx)
            elif kind == FINISH and ver == r.fin_ver and r.started >= 0:
                self._advance(r, t)
                r.done, r.kept, r.finished = r.spec.work, r.spec.work, True
                self._stop(r, t)
                self.result.completed += 1
                self._schedule(t)
            elif kind == FAULT and ver == r.run_ver and r.started >= 0:
                self._fault(r, t)
                self._schedule(t)
        return self._close()

    # -- progress -------------------------------------------------------------------------
    def _advance(self, r: Run, now: float) -> None:
        step = self.faults.checkpoint_minutes * 60.0
        while r.next_ckpt <= now:
            r.done += r.rate * (r.next_ckpt - r.last)
            r.last, r.kept = r.next_ckpt, min(r.done, r.spec.work)
            r.next_ckpt += step
        r.done += r.rate * (now - r.last)
        r.last = now

    def _rerate(self, gpus: Sequence[Gpu], now: float) -> None:
        """Co-tenants changed on ``gpus``: bring their jobs' progress and finish times up."""
        for gpu in gpus:
            k = len(gpu.jobs)
            for idx in gpu.jobs:
                r = self.runs[idx]
                if not r.spec.is_share:
                    continue
                self._advance(r, now)
                r.rate = self.model.rate(gpu.backend, r.spec.kernel, k)
                self._finish_at(r, now)

    def _finish_at(self, r: Run, now: float) -> None:
        r.fin_ver += 1
        left = max(r.spec.work - r.done, 0.0)
        self._push(now + left / r.rate, FINISH, r.spec.idx, r.fin_ver)

    # -- start, stop, fault ---------------------------------------------------------------
    def _schedule(self, now: float, only_new: int | None = None) -> None:
        if only_new is not None:
            candidates = [only_new] if self.queue and self.queue[-1] == only_new else []
        else:
            candidates = self.queue[: self.faults.scan]
        # an upper bound on what fits (placements only shrink it): most queued jobs are
        # turned away here without a walk over every GPU
        share_room, whole_room = self.cluster.room() if len(candidates) > 1 else (1000, 8)
        for idx in candidates:
            spec = self.runs[idx].spec
            if (spec.gpu_milli > share_room) if spec.is_share else (spec.num_gpu > whole_room):
                continue
            gpus = self.cluster.place(spec)
            if gpus is not None:
                self.queue.remove(idx)
                self._start(self.runs[idx], gpus, now)

    def _start(self, r: Run, gpus: list[Gpu], now: float) -> None:
        r.gpus, r.started, r.last = gpus, now, now
        r.next_ckpt = now + self.faults.checkpoint_minutes * 60.0
        r.run_ver += 1
        r.rate = 1.0
        if r.spec.is_share:
            if r.fault_at is None:
                r.fault_at = self._gap(r)
            if r.fault_at < math.inf:
                self._push(now + r.fault_at - r.ran, FAULT, r.spec.idx, r.run_ver)
            self._rerate(gpus, now)
        else:
            self._finish_at(r, now)

    def _stop(self, r: Run, now: float) -> None:
        self.result.allocated_gpu_h += r.spec.gpus * (now - r.started) / 3600.0
        r.ran += now - r.started
        r.started, r.run_ver, r.fin_ver = -1.0, r.run_ver + 1, r.fin_ver + 1
        gpus, r.gpus = r.gpus, []
        self.cluster.release(r.spec, gpus)
        self._rerate(gpus, now)

    def _fault(self, r: Run, now: float) -> None:
        gpu = r.gpus[0]
        res = self.result
        res.faults += 1
        for idx in blast_radius(gpu.backend, list(gpu.jobs), r.spec.idx):
            victim = self.runs[idx]
            self._advance(victim, now)
            lost = victim.spec.gpus * max(victim.done - victim.kept, 0.0) / 3600.0
            if idx == r.spec.idx:
                res.lost_own_gpu_h += lost
            elif victim.spec.tenant == r.spec.tenant:
                res.lost_same_tenant_gpu_h += lost
                res.killed_same_tenant += 1
            else:
                res.lost_other_tenant_gpu_h += lost
                res.killed_other_tenant += 1
            victim.done = victim.kept
            self._stop(victim, now)
            bisect.insort(self.queue, idx)
        r.fault_at = (r.fault_at or 0.0) + self._gap(r)

    def _exponential_gap(self, r: Run) -> float:
        rate = self.faults.fault_rate_per_hour
        if rate <= 0:
            return math.inf
        if r.rng is None:
            r.rng = np.random.default_rng((self.seed, r.spec.idx))
        return float(r.rng.exponential(3600.0 / rate))

    def _close(self) -> Result:
        res = self.result
        for r in self.runs:
            if r.started >= 0:
                self._advance(r, self.horizon)
                res.allocated_gpu_h += r.spec.gpus * (self.horizon - r.started) / 3600.0
            res.useful_gpu_h += r.spec.gpus * min(r.done, r.spec.work) / 3600.0
        res.queued_at_end = len(self.queue)
        return res
