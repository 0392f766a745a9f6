"""Resources taken from offers, echoed exactly as offered (roles, reservations, allocation).

On a shared cluster an offer's resources carry more than a name and a value: the role they are
allocated to (``allocation_info``), their reservations (``reservations``: static or dynamic,
for which role) and, for frameworks without ``RESERVATION_REFINEMENT``, a ``role``. The master
takes a task only when each of its resources matches offered resources on all of those fields;
a plain ``gpus:2`` against ``gpus(reservations: [(STATIC,dlc)])`` is "more than available".

Placement decides amounts (CPUs, memory, disk, GPU ids, share ranges, ports) on flat numbers;
:func:`carve` then cuts those amounts out of the offered resource entries, reserved entries
first, and returns them with every metadata field copied. Pure: dicts in, dicts out.

The core reaches this through its engine codec (:meth:`dlc.mesos.codec.MesosCodec.echo_round`,
the :class:`~dlc.scheduler.core.ports.EngineCodec` port) and gets an
:class:`~dlc.scheduler.core.ports.EchoedRound` back.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dlc.mesos.offers import offer_ids
from dlc.mesos.reserver import Reserver
from dlc.scheduler.core.ports import EchoedRound
from dlc.topology.gpu_shares import normalise, subtract

Resource = dict[str, Any]

#: entries DLC never takes: persistent volumes and mount disks (taken whole, with their own
#: ids), revocable and shared resources (they can vanish or are someone else's)
_SKIP_KEYS = ("disk", "revocable", "shared", "provider_id")


class CarveError(ValueError):
    """The offered entries do not hold what a task asks for (one line, names the resource)."""


def reserved_for(res: Mapping[str, Any]) -> str | None:
    """The role a resource is reserved for (its last reservation; ``None``: unreserved).

    Reads both formats the master sends: ``reservations`` (refinement) and the older
    ``role`` + ``reservation``.
    """
    reservations = res.get("reservations") or ()
    if reservations:
        return str(reservations[-1].get("role") or "")
    role = res.get("role")
    return str(role) if role and role != "*" else None


def allocation_role(res: Mapping[str, Any]) -> str | None:
    """The role a resource (or an offer) is allocated to, when the master says."""
    info = res.get("allocation_info") or {}
    return info.get("role")


def usable(res: Mapping[str, Any], roles: Iterable[str] | None) -> bool:
    """Whether DLC may take this entry: not a volume/revocable/shared resource, and unreserved
    or reserved for one of ``roles`` (``None``: any role the master offered)."""
    if any(k in res for k in _SKIP_KEYS):
        return False
    owner = reserved_for(res)
    # a reservation for a parent role (eng) is offered to its children (eng/dlc) too
    return (
        owner is None
        or roles is None
        or any(r == owner or r.startswith(owner + "/") for r in roles)
    )


def _value(res: Mapping[str, Any]) -> Any:
    kind = res.get("type", "SCALAR")
    if kind == "SCALAR":
        return round(float(res["scalar"]["value"]), 3)
    if kind == "SET":
        return frozenset(str(i) for i in res["set"].get("item", ()))
    if kind == "RANGES":
        return normalise((int(r["begin"]), int(r["end"])) for r in res["ranges"].get("range", ()))
    raise CarveError(f"resource {res.get('name')!r} has type {kind!r}, which DLC does not take")


#: values a resource entry's metadata may hold that need no copy (immutable)
_PLAIN = (str, int, float, bool, type(None))


def _with_value(res: Mapping[str, Any], value: Any) -> Resource:
    # metadata is copied deeply (a TaskInfo must not share a dict with the offer or a pool);
    # plain values skip deepcopy's machinery: it ran some 2,500 times a round (issue 26)
    out = {
        k: v if isinstance(v, _PLAIN) else copy.deepcopy(v)
        for k, v in res.items()
        if k not in ("scalar", "set", "ranges")
    }
    if isinstance(value, float):
        out["scalar"] = {"value": value}
    elif isinstance(value, frozenset):
        out["set"] = {
            "item": sorted(value, key=lambda i: (not i.isdigit(), int(i) if i.isdigit() else 0, i))
        }
    else:
        out["ranges"] = {"range": [{"begin": b, "end": e} for b, e in value]}
    return out


def _empty(value: Any) -> bool:
    return value <= 1e-9 if isinstance(value, float) else not value


def _cut(have: Any, want: Any) -> tuple[Any, Any]:
    """``(taken, still wanted)`` when taking ``want`` from one entry holding ``have``."""
    if isinstance(want, float):
        took = min(have, want)
        return round(took, 3), round(want - took, 3)
    if isinstance(want, frozenset):
        took = have & want
        return took, want - took
    took = normalise(
        (max(b, wb), min(e, we)) for b, e in have for wb, we in want if max(b, wb) <= min(e, we)
    )
    return took, subtract(want, took)


def _remove(have: Any, took: Any) -> Any:
    if isinstance(have, float):
        return round(have - took, 3)
    if isinstance(have, frozenset):
        return have - took
    return subtract(have, took)


@dataclass
class Pool:
    """What an agent's offers (of one allocation role) still hold this round.

    Attributes:
        entries: offered resource entries, reserved ones first (the order :func:`carve` takes
            them in); values shrink as tasks take from them.
        offer_ids: the offers whose entries these are.
        role: the role they are allocated to (``None``: the master did not say).
    """

    entries: list[Resource] = field(default_factory=list)
    offer_ids: list[str] = field(default_factory=list)
    role: str | None = None
    #: id -> (entry, its value) for the entries the last carve rewrote or kept: a hit (the
    #: very entry, held here so its id is its own) needs no parse, and a carve rewrites only
    #: the entries it took from (entries are never changed in place, only replaced)
    _settled: dict[int, tuple[Resource, Any]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def carve(self, wanted: Sequence[Mapping[str, Any]]) -> list[Resource]:
        """Take ``wanted`` (flat resources, no role) out of this pool, reserved entries first.

        Returns:
            The resources to put into a TaskInfo/ExecutorInfo, with each entry's role,
            ``allocation_info`` and ``reservations`` as offered.

        Raises:
            CarveError: the pool lacks some of it; the pool is left unchanged.
        """
        settled, entries = self._settled, self.entries
        values = [_known_value(e, settled) for e in entries]
        by_name: dict[Any, list[int]] = {}  # entry positions per name, in pool order
        for i, entry in enumerate(entries):
            by_name.setdefault(entry.get("name"), []).append(i)
        taken: set[int] = set()
        out: list[Resource] = []
        for want_res in wanted:
            name, want = want_res["name"], _value(want_res)
            for i in by_name.get(name, ()):
                if _empty(want):
                    break
                entry = entries[i]
                if type(values[i]) is not type(want):
                    continue
                took, want = _cut(values[i], want)
                if _empty(took):
                    continue
                values[i] = _remove(values[i], took)
                taken.add(i)
                out.append(_with_value(entry, took))
            if not _empty(want):
                raise CarveError(f"the offers lack {name} {_text(want)} (role {self.role or '*'})")
        self._settle(values, taken)
        return _merge(out)

    def _settle(self, values: list[Any], taken: set[int]) -> None:
        """Every entry rewritten with its value (normalised: what the reserver reads), as
        ``_with_value(e, v)`` for all; an entry already so rewritten and not taken from is
        kept, since rewriting it gives an equal dict (a carve per task rewrote every entry
        of the agent's pool, twice per task, issue 26)."""
        old = self._settled
        entries: list[Resource] = []
        settled: dict[int, tuple[Resource, Any]] = {}
        for i, (entry, value) in enumerate(zip(self.entries, values, strict=True)):
            hit = old.get(id(entry))
            if i in taken or hit is None or hit[0] is not entry:
                entry = _with_value(entry, value)
            entries.append(entry)
            settled[id(entry)] = (entry, value)
        self.entries, self._settled = entries, settled


def _known_value(entry: Resource, settled: Mapping[int, tuple[Resource, Any]]) -> Any:
    """``_value(entry)``, read from ``settled`` when the pool rewrote this very entry."""
    hit = settled.get(id(entry))
    return hit[1] if hit is not None and hit[0] is entry else _value(entry)


def _text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, frozenset):
        return "{" + ",".join(sorted(value)) + "}"
    return "[" + ",".join(f"{b}-{e}" for b, e in value) + "]"


def _merge(resources: list[Resource]) -> list[Resource]:
    """Join pieces of one entry taken for several wanted resources (same name and metadata)."""
    merged: dict[str, Resource] = {}
    for res in resources:
        key = repr(sorted((k, v) for k, v in res.items() if k not in ("scalar", "set", "ranges")))
        have = merged.get(key)
        if have is None:
            merged[key] = res
            continue
        a, b = _value(have), _value(res)
        if isinstance(a, float):
            total: Any = round(a + b, 3)
        elif isinstance(a, frozenset):
            total = a | b
        else:
            total = normalise(a + b)
        merged[key] = _with_value(have, total)
    return list(merged.values())


def pools_of(
    offers: Iterable[Mapping[str, Any]],
    roles: Iterable[str] | None = None,
    agents: Collection[str] | None = None,
) -> dict[tuple[str, str | None], Pool]:
    """One :class:`Pool` per (agent id, allocation role) of ``offers``.

    Entries reserved for a role DLC does not hold are left out (``roles``; ``None``: keep all
    the master offered). Reserved entries come first, so a task uses the operator's reserved
    pool before unreserved resources of the same kind. ``agents``: only these agents' offers
    (``None``: all).
    """
    roles = None if roles is None else tuple(roles)
    pools: dict[tuple[str, str | None], Pool] = {}
    for offer in offers:
        offer_id, agent = offer_ids(offer)
        if offer_id is None or agent is None or (agents is not None and agent not in agents):
            continue  # an offer without ids cannot be accepted (the parser declined it)
        role = allocation_role(offer)
        pool = pools.setdefault((agent, role), Pool(role=role))
        pool.offer_ids.append(offer_id)
        pool.entries += [dict(r) for r in offer.get("resources", ()) if usable(r, roles)]
    for pool in pools.values():
        pool.entries.sort(key=lambda r: reserved_for(r) is None)  # stable: reserved first
    return pools


def echo_round(
    offers: Sequence[Mapping[str, Any]],
    jobs: Sequence[tuple[str, Sequence[dict[str, Any]]]],
    roles: Iterable[str] | None = None,
    reserver: Reserver | None = None,
    now: float = 0.0,
    role_of: Callable[[str], str | None] | None = None,
) -> EchoedRound:
    """Rewrite each task's (and its executor's) resources as cut from the offers.

    Args:
        offers: the round's v1 ``Offer`` dicts.
        jobs: ``(job_id, task_infos)`` per placed job, in launch order; the TaskInfos hold flat
            resources (no role) and are rewritten in place.
        roles: DLC's roles (entries reserved for any other role are never taken).
        reserver: with ``--reserve``: reserve the GPUs tasks take, release idle ones.
        now: the time (for the reserver's idle clock).
        role_of: job id -> the only role whose offers it may use (its group's role,
            ``--group-role``), or ``None``: any of DLC's roles.

    Returns:
        The accepts, the unused offers and the jobs that did not fit (all or nothing per job:
        a gang whose one node does not fit launches no node).
    """
    # without --reserve only the placed jobs' agents are cut from: the other offers are
    # declined whole, so copying their resources (1,213 agents' worth a round) is waste
    needed = None
    if reserver is None:
        needed = {info["agent_id"]["value"] for _, infos in jobs for info in infos}
    pools = pools_of(offers, roles, needed)
    by_agent: dict[str, list[Pool]] = {}
    for (agent, _), pool in pools.items():
        by_agent.setdefault(agent, []).append(pool)
    for candidates in by_agent.values():  # the roles with reserved GPUs first
        candidates.sort(key=lambda p: not any(reserved_for(e) for e in p.entries))
    result = EchoedRound()
    used: dict[int, list[dict[str, Any]]] = {}
    for job_id, infos in jobs:
        only = role_of(job_id) if role_of is not None else None
        try:
            chosen = _echo_job(infos, by_agent, only)
        except CarveError as exc:
            result.refused[job_id] = str(exc)
            continue
        for pool, info, task, executor in chosen:
            if reserver is not None and pool.role is not None and pool.role != "*":
                task, to_reserve = reserver.reserve(info["agent_id"]["value"], pool.role, task)
                if to_reserve:
                    ops = result.operations.setdefault(tuple(pool.offer_ids), [])
                    ops.append({"type": "RESERVE", "reserve": {"resources": to_reserve}})
            info["resources"] = task
            info["executor"]["resources"] = executor
            used.setdefault(id(pool), []).append(info)
    accepted: set[str] = set()
    for (agent, _), pool in pools.items():
        if reserver is not None:
            release = reserver.idle(agent, pool.role, pool.entries, now)
            if release:
                ops = result.operations.setdefault(tuple(pool.offer_ids), [])
                ops.append({"type": "UNRESERVE", "unreserve": {"resources": release}})
                accepted.update(pool.offer_ids)
        if id(pool) in used:
            result.accepts.append((list(pool.offer_ids), used[id(pool)]))
            accepted.update(pool.offer_ids)
    result.unused = [i for o in offers if (i := offer_ids(o)[0]) is not None and i not in accepted]
    return result


def _echo_job(
    infos: Sequence[dict[str, Any]], by_agent: Mapping[str, list[Pool]], only: str | None
) -> list[_Carved]:
    """Cut every task of one job (all or nothing: on a refusal the pools are left as they were).

    Raises:
        CarveError: some task does not fit its agent's pools (of role ``only`` when given).
    """
    # only the pools of the job's own agents can change: copying every agent's pools per
    # job made a round with 1,213 agents quadratic
    touched = [p for agent in {i["agent_id"]["value"] for i in infos}
               for p in by_agent.get(agent, ())]  # fmt: skip
    saved = {id(p): list(p.entries) for p in touched}
    chosen: list[_Carved] = []
    try:
        for info in infos:
            candidates = by_agent.get(info["agent_id"]["value"], [])
            if only is not None:
                candidates = [p for p in candidates if p.role == only]
                if not candidates:
                    raise CarveError(f"waiting for an offer of its group's role {only}")
            chosen.append(_echo_task(info, candidates))
    except CarveError:
        for pool in touched:
            pool.entries = saved[id(pool)]
        raise
    return chosen


#: one task cut from a pool: the pool, its TaskInfo, the task's and the executor's resources
_Carved = tuple[Pool, dict[str, Any], list[Resource], list[Resource]]


def _echo_task(info: dict[str, Any], candidates: Sequence[Pool]) -> _Carved:
    """The first pool that holds the task and its executor, and both resource lists."""
    error = CarveError(f"no offer of agent {info['agent_id']['value']} in this round")
    for pool in candidates:
        saved = list(pool.entries)
        try:
            task = pool.carve(info["resources"])
            executor = pool.carve(info["executor"]["resources"])
        except CarveError as exc:
            pool.entries, error = saved, exc
            continue
        return pool, info, task, executor
    raise error
