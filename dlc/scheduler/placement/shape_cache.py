"""What one offer round already learned did not fit, and how many shapes a user may try.

Placement of one job over 1,000 agents costs milliseconds, so an offer round must not
try 1,000 jobs that all fail. Two parts keep a hostile queue (red-team finding 3 in
docs/security.md: ``--cpus 5.999, 5.998, ...``) within a small factor of an ordinary one:

* :class:`FailedShapes`, the round's failure cache. A job's *kind* is what placement
  compares exactly (GPUs, nodes, model, CUDA, vendor, ROCm, share size, exclusivity, a
  share's user); its *demand* is ``(cpus, mem, disk)``. A job is skipped only when a job of
  the same kind whose demand is no larger in every dimension already failed this round. Why
  that is sound: within a round the slots change only when a launch happens (the cache is then
  emptied), and every test placement makes on cpus/mem/disk is ``free >= demand`` on a
  slot, the rest not depending on them; so the set of slots that can hold a job shrinks
  as its demand grows, and a larger job fails wherever a smaller one of its kind did.
  Shares are the exception: their placement picks one GPU first and may then fail on that
  agent's ports or the share hold, so a larger share could land elsewhere; a share is
  skipped only after an equal one failed. No feasible job is ever skipped.
* :class:`ShapeBudget`, the bound for what the cache cannot cover (each job asking for a
  little *less* than the one before): at most ``limit`` failed placement attempts per
  user per round. A user's further jobs wait with :data:`DEFERRED_PREFIX` as their reason
  and go first among that user's jobs next round (:meth:`ShapeBudget.ordered`), so every
  job is tried within ``ceil(n / limit)`` rounds: no starvation. Placements that succeed
  cost nothing from the budget (they take resources, which quotas bound).
* :class:`CarriedFailures`, kept across rounds: a shape that failed is tried next round only
  on the agents that grew since, and a failure stands for the rest of its round after a
  launch (launches only shrink agents). These answers cost the budget as the attempts they
  replace would have, so the jobs tried and deferred do not change, only the cost.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dlc.scheduler.jobs.job import Job
from dlc.topology.gpu_shares import Ranges, subtract

#: how a job deferred by the budget's reason starts (it was not passed over for lack of room)
DEFERRED_PREFIX = "not tried this offer round"

#: tolerance of the demand comparison (placement compares with the same 1e-9)
_EPS = 1e-9

#: failed attempts per user per round by default (see docs/scheduler.md for the figures)
DEFAULT_TRIES_PER_USER = 4

#: what :func:`kind_of` compares exactly (spec fields, the user of a share)
Kind = tuple[Hashable, ...]
#: what :func:`_snapshot` reads of a slot (figures, GPU ids, ranges, attributes)
Snapshot = tuple[Any, ...]


def kind_of(job: Job, tenants_matter: bool = True) -> Kind:
    """What placement compares exactly (jobs of one kind differ only in their demand). A
    share's user counts while ``tenants_matter``: exclusive placement (or one tenant per MPS
    GPU) may keep one user's share off a GPU; where nobody is exclusive and no agent runs
    MPS every GPU is open to every user, and 500 users' look-alike shares are one kind. The
    vendor and ROCm release count too: without them one user's unplaceable AMD job kept
    every other user's like-sized NVIDIA job waiting (red-team 2026-11-26,
    docs/security.md). A gang that requires one switch fails where one that prefers it
    runs: the level counts."""
    spec = job.spec
    return (spec.gpus, spec.nodes, spec.gpu_model, spec.cuda_version, spec.gpu_fraction,
            spec.gpu_memory, spec.exclusive_per, spec.interactive, spec.gpu_vendor,
            spec.rocm_version, job.user if spec.is_share and tenants_matter else None,
            spec.gang_topology)  # fmt: skip


def demand_of(job: Job) -> tuple[float, float, float]:
    """The dimensions placement compares with ``free >= demand``: cpus, mem, disk."""
    spec = job.spec
    return (float(spec.cpus), float(spec.mem_mib), float(spec.disk_mib))


def _covers(small: tuple[float, ...], big: tuple[float, ...]) -> bool:
    return all(s <= b + _EPS for s, b in zip(small, big, strict=True))


@dataclass
class FailedShapes:
    """The round's failures: exact ``(kind, demand)`` and, per kind that is not a share,
    the minimal failed demands (an antichain: none covers another)."""

    _exact: dict[Kind, str] = field(default_factory=dict)
    _minimal: dict[Kind, list[tuple[tuple[float, float, float], str]]] = field(default_factory=dict)

    def known(self, kind: Kind, demand: tuple[float, float, float]) -> str | None:
        """Why a job of ``kind`` and ``demand`` cannot fit this round, or ``None`` when no
        job of its kind needing no more in every dimension failed (a share: no job of its
        kind and the same demand)."""
        reason = self._exact.get((kind, demand))
        if reason is not None:
            return reason
        for failed, why in self._minimal.get(kind, ()):
            if _covers(failed, demand):
                return f"{why} (found for a job of this kind that needs no more than this one)"
        return None

    def add(
        self, kind: Kind, demand: tuple[float, float, float], reason: str, monotone: bool = True
    ) -> None:
        """Remember a failure; ``monotone`` (not for shares): it also covers larger demands
        of its kind (dropping the minimal demands it covers)."""
        self._exact[(kind, demand)] = reason
        if not monotone:
            return
        kept = [(d, r) for d, r in self._minimal.get(kind, ()) if not _covers(demand, d)]
        kept.append((demand, reason))
        self._minimal[kind] = kept

    def clear(self) -> None:
        """Forget everything (a launch changed the slots)."""
        self._exact.clear()
        self._minimal.clear()


@dataclass
class ShapeBudget:
    """At most ``limit`` failed placement attempts per user per round, taken in turn.

    One object lives in the core across rounds: :meth:`start` begins a round,
    :meth:`ordered` puts the jobs deferred last round first among their user's jobs,
    :meth:`may_try` / :meth:`failed` count, :meth:`defer_reason` says why a job waits.
    """

    limit: int = DEFAULT_TRIES_PER_USER
    #: failed shapes kept from round to round (:class:`CarriedFailures`)
    carried: CarriedFailures = field(default_factory=lambda: CarriedFailures())
    _failures: dict[str, int] = field(default_factory=dict)
    _deferred: set[str] = field(default_factory=set)
    _deferred_before: set[str] = field(default_factory=set)

    def start(self) -> None:
        """Begin a round: last round's deferred jobs get the first turns in this one."""
        self._deferred_before = self._deferred
        self._deferred = set()
        self._failures = {}

    def ordered(self, queue: Sequence[Job]) -> list[Job]:
        """``queue`` with each user's jobs deferred last round moved ahead of that user's
        other jobs (taking their places; other users' positions do not change)."""
        if not self._deferred_before:
            return list(queue)
        users = {j.user for j in queue if j.job_id in self._deferred_before}
        mine: dict[str, list[Job]] = {}
        for job in queue:
            if job.user in users:
                mine.setdefault(job.user, []).append(job)
        turns = {
            user: iter(sorted(jobs, key=lambda j: j.job_id not in self._deferred_before))
            for user, jobs in mine.items()
        }
        return [next(turns[j.user]) if j.user in turns else j for j in queue]

    def may_try(self, job: Job) -> bool:
        """Whether ``job``'s user has failed attempts left this round."""
        return self._failures.get(job.user, 0) < self.limit

    def failed(self, job: Job) -> None:
        """Count one failed placement attempt of ``job``'s user."""
        self._failures[job.user] = self._failures.get(job.user, 0) + 1

    def defer(self, job: Job) -> str:
        """Defer ``job`` to a later round; returns its reason."""
        self._deferred.add(job.job_id)
        return (
            f"{DEFERRED_PREFIX}: {self.limit} other job shapes of the same user did not fit "
            f"in this round (DLC tries {self.limit} per user per round; this one goes first "
            "next round)"
        )


#: how much a slot's figures may move before it counts as grown (placement's tolerance)
_GROWN_EPS = 1e-9

#: a carried failure is trusted for this many rounds after its shape was last tried on every
#: agent, then the shape is tried in full again (see :class:`CarriedFailures`)
FULL_RETRY_ROUNDS = 10


def _snapshot(slot: Any) -> Snapshot:
    """What placement reads of one agent's slot (:class:`~dlc.scheduler.placement.slots.Slot`):
    cpus, mem, disk, the ``gpus`` scalar, whole free GPUs, share ranges, free ports and the
    attributes (topology, driver, model, vendor come from these)."""
    count = getattr(slot, "port_count", None)  # a Slot counts its offered ports once
    if count is None:
        count = sum(e - b + 1 for b, e in slot.port_ranges)
    ports = count - len(slot.ports_taken)
    return (slot.cpus, slot.mem, slot.disk, slot.gpus, slot.free, slot.gpu_mem, slot.gpu_core,
            ports, slot.attributes)  # fmt: skip


def _ranges_grew(now: Ranges, before: Ranges) -> bool:
    return now != before and bool(subtract(now, before))


def grew(now: Snapshot, before: Snapshot | None) -> bool:
    """Whether a slot whose snapshot is ``now`` could hold a job that failed on one whose
    snapshot was ``before`` (``None``: not offered then): some figure is larger, a GPU or
    range is free that was not, or the attributes differ. Every test placement makes on a
    slot is ``free >= demand`` in these, so a slot that did not grow cannot take it."""
    if before is None:
        return True
    if now[8] is not before[8] and now[8] != before[8]:  # attributes (the same dict, mostly)
        return True
    if any(n > b + _GROWN_EPS for n, b in zip(now[:4], before[:4], strict=True)):
        return True
    if not now[4] <= before[4] or now[7] > before[7]:
        return True
    return _ranges_grew(now[5], before[5]) or _ranges_grew(now[6], before[6])


_COVERED = " (found for a job of this kind that needs no more than this one)"

#: one carried failure: (reason, the round since which it holds on agents that did not grow,
#: the round its shape was last tried on every agent)
_Carried = tuple[str, int, int]


@dataclass
class CarriedFailures:
    """Failed shapes kept across offer rounds until an agent they might fit on changes.

    :class:`FailedShapes` forgets at the end of a round and at every launch; at openb scale
    the next round then tried the same 2,000 failing shapes again though most agents were
    as before. This memory keeps the failures of single-node jobs, each with the round it
    was found in, and for every agent the last round it *grew* (:func:`grew`: more of
    anything, or new; compared at each round's start with the agent's snapshot at the last
    round's end). A job whose shape failed in round ``r`` is tried only on the agents that
    grew after ``r``; when it fails there it fails with the old reason, now found in this
    round. Why that is sound: a shape that failed on an agent fails on it while the agent
    does not grow (placement's tests are ``free >= demand``, and launches only shrink
    agents), so among the agents that did not grow none can take it, and placement on the
    grown ones decides exactly as placement on all would (the others are not candidates).
    The same holds inside a round after a launch: a failure of this round stands for the
    rest of it (:meth:`known_now`). Failures are kept over rounds in which their shape is
    not tried at all (the round cap, :mod:`~dlc.scheduler.placement.round_cap`, considers other jobs
    in turns).

    A safety bound: a failure is trusted for :data:`FULL_RETRY_ROUNDS` rounds after its
    shape was last tried on every agent, then forgotten (the shape is tried in full again),
    so a cause the snapshot does not see (a slot state placement reads that
    :func:`_snapshot` misses) delays a job by at most that many rounds instead of for ever.

    Not carried (tried in full each round, as before): gangs (a gang fails when too few
    agents fit *together*: one that fit alone may count again), shares under the share hold
    (the hold's verdict moves as GPUs are taken), a share refused for lack of a port on the
    agent it chose (another agent might have been chosen), jobs holding a reservation, and
    rounds cut into resource pools (:meth:`reset`: each pool has its own agents).
    """

    _exact: dict[tuple[Kind, tuple[float, float, float]], _Carried] = field(default_factory=dict)
    #: per kind that is not a share: the minimal failed demands (none covers another)
    _minimal: dict[Kind, list[tuple[tuple[float, float, float], _Carried]]] = field(
        default_factory=dict
    )
    _agents: dict[str, Snapshot] = field(default_factory=dict)
    #: agent id -> the last round it grew (or first showed)
    _grew_at: dict[str, int] = field(default_factory=dict)
    _slots: list[Any] = field(default_factory=list)
    _since: dict[int, list[Any]] = field(default_factory=dict)
    _round: int = 0
    #: agent id -> (the kept starting state its last round's slot was built from, that
    #: slot's starting snapshot); see :meth:`start`
    _starts: dict[str, tuple[Any, Snapshot]] = field(default_factory=dict)

    def start(self, slots: Sequence[Any]) -> list[Any]:
        """Begin a round over ``slots``; returns the ones that grew since the last round's
        end (in ``slots``' order), and forgets failures older than the safety bound.

        A slot built from a kept starting state (``slot.kept_state``, :class:`~dlc.scheduler.
        round_memo.RoundMemo`: the agent offers what it offered before) starts as the last
        slot of that state started, so that snapshot object is reused (reading 1,213 slots
        each round was a fixed part of it, issue 26); a new state (the offer changed) is
        read afresh."""
        self._round += 1
        now, agents = self._round, self._agents
        self._agents = {}
        starts, self._starts = self._starts, {}
        kept_starts, grew_before = self._starts, self._grew_at
        grown, grew_at = [], {}
        for slot in slots:  # 1,213 slots a round: one pass, no call per slot (issue 26)
            agent_id = slot.agent_id
            state = getattr(slot, "kept_state", None)
            kept = starts.get(agent_id)
            if state is not None and kept is not None and kept[0] is state:
                snap = kept[1]
                kept_starts[agent_id] = kept
            else:
                snap = _snapshot(slot)
                if state is not None:
                    kept_starts[agent_id] = (state, snap)
            grew_at[agent_id] = grew_before.get(agent_id, now)
            before = agents.get(agent_id)
            # the very snapshot it ended the last round with (an agent that offers the same
            # and took nothing): it did not grow, and grew() need not compare
            if before is not snap and grew(snap, before):
                grown.append(slot)
        for slot in grown:
            grew_at[slot.agent_id] = now
        self._grew_at = grew_at
        self._slots, self._since = list(slots), {}
        oldest = now - FULL_RETRY_ROUNDS
        if any(c[2] <= oldest for c in self._exact.values()):
            self._exact = {k: c for k, c in self._exact.items() if c[2] > oldest}
            self._minimal = {
                kind: recent
                for kind, entries in self._minimal.items()
                if (recent := [(d, c) for d, c in entries if c[2] > oldest])
            }
        return grown

    def _find(self, kind: Kind, demand: tuple[float, float, float]) -> _Carried | None:
        """The newest failure of ``kind`` needing no more than ``demand`` (a share: the
        same demand)."""
        best = self._exact.get((kind, demand))
        for failed, carried in self._minimal.get(kind, ()):
            if (best is None or carried[1] > best[1]) and _covers(failed, demand):
                why = carried[0] + _COVERED
                best = (why, carried[1], carried[2])
        return best

    def known_now(self, kind: Kind, demand: tuple[float, float, float]) -> str | None:
        """Why a job of this shape failed earlier in this round (it still does)."""
        found = self._find(kind, demand)
        return found[0] if found is not None and found[1] == self._round else None

    def known_before(
        self, kind: Kind, demand: tuple[float, float, float]
    ) -> tuple[str, list[Any]] | None:
        """``(why a job of this shape failed in an earlier round, the agents of this round
        that grew since: the only ones that might take it now)``, or ``None``."""
        found = self._find(kind, demand)
        if found is None:
            return None
        since = found[1]
        if since not in self._since:
            grew_at = self._grew_at
            self._since[since] = [s for s in self._slots if grew_at[s.agent_id] > since]
        return found[0], self._since[since]

    def add(self, kind: Kind, demand: tuple[float, float, float], reason: str,
            monotone: bool) -> None:  # fmt: skip
        """Remember a failure of this round (``monotone``: it also covers larger demands of
        its kind, as :meth:`FailedShapes.add`). A shape tried only on the agents that grew
        keeps the round it was last tried in full (the safety bound counts from there)."""
        earlier = self._find(kind, demand)
        tried_in_full = earlier[2] if earlier is not None else self._round
        reason = reason.split(_COVERED, 1)[0]  # the note is added where a larger job reads it
        carried = (reason, self._round, tried_in_full)
        self._exact[(kind, demand)] = carried
        if not monotone:
            return
        kept = [(d, c) for d, c in self._minimal.get(kind, ()) if not _covers(demand, d)]
        kept.append((demand, carried))
        self._minimal[kind] = kept

    def finish(self, slots: Sequence[Any]) -> None:
        """End the round: remember what every agent of ``slots`` has left (an agent left as
        it started keeps its starting snapshot object: next round's :meth:`start` then
        knows it did not grow by identity). A slot that says nothing was taken from it
        (``touched`` false, ``slots.Slot``) is not read again (1,213 snapshots a
        round, issue 26)."""
        starts = self._starts
        agents = self._agents = {}
        for slot in slots:
            kept = starts.get(slot.agent_id)
            state = getattr(slot, "kept_state", None)
            if kept is not None and kept[0] is state and not getattr(slot, "touched", True):
                agents[slot.agent_id] = kept[1]  # nothing taken or given: as it started
                continue
            snap = _snapshot(slot)
            if kept is not None and kept[0] is state and kept[1] == snap:
                snap = kept[1]  # equal values: grew() reads values only, so this is exact
            agents[slot.agent_id] = snap

    def reset(self) -> None:
        """Forget everything (a round cut into pools, or one that did not carry)."""
        self._exact, self._minimal, self._agents, self._grew_at = {}, {}, {}, {}
        self._starts = {}
