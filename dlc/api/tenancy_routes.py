"""Routes of the multi-tenant policy: the queue in run order, quotas, groups, user limits,
agents by pool (``dlc queue``/``quota``/``groups``/``nodes`` and the dashboard's section).

Reading is open to every signed-in user (like ``squeue``/``sinfo``), but a non-admin sees
only their own jobs in the queue in full: other users' jobs are anonymous rows with their
position (red-team finding 5, docs/security.md: ids, users and reasons of jobs that
``GET /v1/jobs/ID`` then calls "no job"). Changing groups,
quotas and limits needs an admin token and is audited in the store. A bad setting raises
:class:`~dlc.errors.TenancyError` (a ``JobSpecError``: a 400 naming the
field). A change takes effect
in the core's next round (:meth:`~dlc.scheduler.core.facade.SchedulerCore.set_tenancy`).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Query, Request
from starlette.exceptions import HTTPException

from dlc.api.models import ERRORS, GraceIn, GroupIn, LimitsIn, MemberIn, QuotaIn
from dlc.scheduler.placement.agent_facts import agent_vendor, default_topology_of
from dlc.scheduler.tenancy.fair_share import FairShare
from dlc.scheduler.tenancy.policy import ZERO, AuditEntry, Resources, UserLimits, parse_mem
from dlc.scheduler.tenancy.quotas import agent_pool, demand, job_demand, job_gpus, key_of
from dlc.scheduler.tenancy.user_holdings import UserHeld
from dlc.topology.gpu_shares import ATTR_SHARING


def _caller(request: Request) -> tuple[str, bool]:
    user, admin, _ = request.scope["dlc.auth"]
    return user, admin


def _viewer(request: Request) -> str | None:
    """Whose jobs the caller sees in full: ``None`` (everyone's) for an admin."""
    user, admin = _caller(request)
    return None if admin else user


#: the refusals of a non-admin's request, one per kind of request (a read is no change)
CHANGE_REFUSAL = "changing groups, quotas or limits needs an admin token"
LIMITS_REFUSAL = "reading another user's limits needs an admin token"
AUDIT_REFUSAL = (
    "reading the quota audit needs an admin token; ask an admin to run `dlc quota audit`"
)


def _admin(request: Request, refusal: str = CHANGE_REFUSAL) -> str:
    """The caller, an admin; else a 403 saying ``refusal``."""
    user, admin = _caller(request)
    if not admin:
        raise HTTPException(403, refusal)
    return user


def queue_view(core: Any, viewer: str | None = None) -> list[dict]:
    """Every waiting job in run order with its group, pool, priority, what it asks (``gpus``
    and ``cpus`` over all its nodes; ``cpu_only``: a ``--gpus 0`` job) and reason (``viewer``:
    a non-admin, who sees other users' jobs as ``{"position", "hidden"}``)."""
    tenancy = core.plan_queue(core.queued_jobs())
    sizes = core.gpu_sizes()
    out: list[dict[str, Any]] = []
    for index, row in enumerate(tenancy.rows, 1):
        job = row.job
        if viewer is not None and job.user != viewer:
            out.append({"position": index, "hidden": True})
            continue
        reason = row.reason or core.queue_reason(job.job_id) or ""
        out.append({
            "position": index, "group_position": row.position, "id": job.job_id,
            "user": job.user, "group": row.group, "pool": row.pool,
            "priority": job.spec.priority, "priority_class": job.spec.priority_class,
            "gpus": job_gpus(core.tenancy, job, sizes), "cpus": demand(job.spec).cpus,
            "cpu_only": job.spec.is_cpu_only, "nodes": job.spec.nodes, "admitted": row.admitted,
            "preempted_before": job.message.startswith("preempted"),
            "reason": reason.split("; ", 1)[1] if reason.startswith("position ") else reason,
        })  # fmt: skip
    return out


def quota_view(core: Any, viewer: str | None = None) -> dict:
    """Usage against guarantees per group and pool, with what is borrowed and waiting, each
    group's decayed GPU-hours (``fair_share``) and the per-user ``limits``, each with what
    the user ``held`` now as the limits count it (``viewer``: a non-admin, who sees only
    their own user's row of both)."""
    policy = core.tenancy
    capacity = core.pool_capacity()
    tenancy = core.plan_queue(core.queued_jobs())
    waiting: dict = {}
    sizes = core.gpu_sizes()
    for job in core.queued_jobs():
        key = key_of(policy, job)
        waiting[key] = waiting.get(key, ZERO) + job_demand(policy, job, sizes)
    keys = set(policy.quotas) | set(tenancy.usage) | set(waiting)
    rows = []
    for group, pool in sorted(keys):
        quota = policy.quota(group, pool)
        used = tenancy.usage.get((group, pool), ZERO)
        rows.append({
            "group": group, "pool": pool, "guaranteed": quota.guaranteed.to_dict(),
            "ceiling": _finite(quota.ceiling.to_dict()) if quota.ceiling else None,
            "used": used.to_dict(), "borrowed": used.over(quota.guaranteed).to_dict(),
            "waiting": waiting.get((group, pool), ZERO).to_dict(),
        })  # fmt: skip
    pools = {p: c.to_dict() for p, c in sorted(capacity.items())}
    fair = fair_share_json(core.fair_share(viewer)) if hasattr(core, "fair_share") else None
    held = core.user_holdings()
    limits = [{**limits_json(lim), "held": asdict(held.get(user, UserHeld()))}
              for user, lim in sorted(policy.limits.items())
              if viewer is None or user == viewer]  # fmt: skip
    return {"quotas": rows, "pools": pools, "grace_s": policy.grace_s, "fair_share": fair,
            "limits": limits}  # fmt: skip


def limits_json(limits: UserLimits) -> dict[str, Any]:
    """A user's caps as ``PUT /v1/limits`` answers them and ``GET /v1/quota`` lists them
    (``None``: no cap)."""
    return {"user": limits.user, "max_running": limits.max_running, "max_gpus": limits.max_gpus,
            "max_cpus": limits.max_cpus, "max_mem_mib": limits.max_mem_mib,
            "max_interactive_s": limits.max_interactive_s,
            "max_interactive": limits.max_interactive}  # fmt: skip


def fair_share_json(fair: FairShare | None) -> dict[str, Any] | None:
    """The core's :class:`~dlc.scheduler.tenancy.fair_share.FairShare` as the API's
    ``fair_share`` (``None``: fair share off)."""
    if fair is None:
        return None
    groups = [{"group": g.group, "gpu_hours": g.gpu_hours, "weight": g.weight, "ratio": g.ratio,
               "users": [{"user": u.user, "gpu_hours": u.gpu_hours} for u in g.users]}
              for g in fair.groups]  # fmt: skip
    bill = fair.billing
    billing = None if bill is None else {
        # one unit always (kept for clients); cpus_default: no GPU known, the default ratio
        "unit": "GPU", "cpus_default": bill.cpus_default, "cpus_per_gpu": bill.cpus_per_gpu(),
        "mem_mib_per_gpu": bill.mem_mib_per_gpu(),
    }  # fmt: skip
    return {"half_life_s": fair.half_life_s, "groups": groups, "billing": billing}


def audit_json(entry: AuditEntry) -> dict[str, Any]:
    """One :class:`~dlc.scheduler.tenancy.policy.AuditEntry` as ``GET /v1/quota/audit``
    lists it."""
    return {"at": entry.at, "actor": entry.actor, "action": entry.action, "detail": entry.detail}


def nodes_view(core: Any) -> list[dict]:
    """Agents by pool: GPUs in all, taken whole by DLC's tasks, holding shares (and the
    share memory they hold), draining, free; the share backend (``dlc_sharing``) and, per
    shared GPU, the users whose shares run there."""
    taken: dict[str, set[int]] = {}
    # shares: agent -> GPU -> MiB the shares on it hold (their GPUs are neither free nor taken)
    shares: dict[str, dict[int, int]] = {}
    sharers: dict[str, dict[int, set[str]]] = {}
    for job in core.active_jobs():
        for task in job.tasks:
            taken.setdefault(task.agent_id, set()).update(task.gpu_ids)
            if task.share_gpu is not None:
                held = shares.setdefault(task.agent_id, {})
                held[task.share_gpu] = held.get(task.share_gpu, 0) + task.share_memory_mib
                by_gpu = sharers.setdefault(task.agent_id, {})
                by_gpu.setdefault(task.share_gpu, set()).add(job.user)
    out = []
    for agent in sorted(
        core.inventory.agents(), key=lambda a: (agent_pool(a.attributes), a.hostname or a.agent_id)
    ):
        used = taken.get(agent.agent_id, set()) & agent.gpu_ids
        held = {i: m for i, m in shares.get(agent.agent_id, {}).items() if i in agent.gpu_ids}
        draining = set(core.draining_gpus(agent.agent_id)) - used - set(held)
        out.append({
            "agent_id": agent.agent_id, "hostname": agent.hostname,
            "pool": agent_pool(agent.attributes), "gpu_model": agent.gpu_model,
            "gpu_vendor": agent_vendor(agent.attributes, default_topology_of(agent.attributes)),
            "gpus": len(agent.gpu_ids), "taken": len(used), "draining": len(draining),
            "shared": len(held), "share_mem_mib": sum(held.values()),
            "free": len(agent.gpu_ids) - len(used) - len(held) - len(draining),
            "cpus": agent.cpus, "mem_mib": agent.mem_mib,
            "sharing": agent.attributes.get(ATTR_SHARING),
            **_place_of(agent.locality),
            "shared_gpus": [{"gpu": gpu, "tenants": sorted(users)} for gpu, users
                            in sorted(sharers.get(agent.agent_id, {}).items())],
        })  # fmt: skip
    return out


def _place_of(locality: Any) -> dict[str, str]:
    """An agent's ``region``/``zone`` (Mesos fault domain), ``rack`` and ``switch``
    (``dlc node-config --rack/--switch``); empty where unknown."""
    return {"region": locality.region, "zone": locality.zone, "rack": locality.rack,
            "switch": locality.switch}  # fmt: skip


def groups_view(core: Any) -> list[dict]:
    """Groups with members, default pool and preemption setting."""
    return [
        {"name": g.name, "members": sorted(g.members), "default_pool": g.default_pool,
         "preempt_within": g.preempt_within}
        for g in sorted(core.tenancy.groups.values(), key=lambda g: g.name)
    ]  # fmt: skip


def _finite(body: dict) -> dict:
    return {k: (None if v == float("inf") else v) for k, v in body.items()}


def router(api: Any) -> APIRouter:
    """The tenancy routes bound to one API server (``api.core``)."""
    core = api.core  # its writes re-read the policy: the next round plans with it
    routes = APIRouter()

    @routes.get("/v1/queue", responses=ERRORS)
    def queue(request: Request) -> dict:
        """Every waiting job in run order: position, priority, group, pool, reason (a
        non-admin: other users' jobs as anonymous rows with their position)."""
        return {"queue": queue_view(core, _viewer(request))}

    @routes.get("/v1/quota", responses=ERRORS)
    def quota(request: Request) -> dict:
        """Each group's usage against its guarantee per pool, and what it borrows."""
        _caller(request)
        return quota_view(core, _viewer(request))

    @routes.put("/v1/quota/{group}", responses=ERRORS)
    def set_quota(group: str, body: QuotaIn, request: Request) -> dict:
        """Set a group's guarantee (and optional ceiling) in a pool (admin; audited)."""
        actor = _admin(request)
        guaranteed = Resources(body.gpus, body.cpus, parse_mem(body.mem))
        ceiling = None
        if (body.ceiling_gpus, body.ceiling_cpus, body.ceiling_mem) != (None, None, None):
            inf = float("inf")
            ceiling = Resources(
                inf if body.ceiling_gpus is None else body.ceiling_gpus,
                inf if body.ceiling_cpus is None else body.ceiling_cpus,
                inf if body.ceiling_mem is None else parse_mem(body.ceiling_mem, "ceiling"),
            )
        core.set_quota(group, body.pool, guaranteed, actor, ceiling=ceiling)
        return quota_view(core)

    @routes.put("/v1/preemption-grace", responses=ERRORS)
    def set_grace(body: GraceIn, request: Request) -> dict:
        """The grace period of tasks launched from now on (admin; audited)."""
        actor = _admin(request)
        core.set_grace(float(body.grace_s), actor)
        return {"grace_s": core.tenancy.grace_s}

    @routes.get("/v1/quota/audit", responses=ERRORS)
    def audit(request: Request, limit: int = Query(100, ge=1, le=1000)) -> dict:
        """The latest quota, group and limit changes (admin)."""
        _admin(request, AUDIT_REFUSAL)
        return {"audit": [audit_json(e) for e in core.quota_audit(limit)]}

    @routes.get("/v1/groups", responses=ERRORS)
    def groups(request: Request) -> dict:
        """Groups and their members."""
        _caller(request)
        return {"groups": groups_view(core)}

    @routes.post("/v1/groups", status_code=201, responses=ERRORS)
    def create_group(body: GroupIn, request: Request) -> dict:
        """Create a group or change its settings (admin; audited)."""
        actor = _admin(request)
        core.create_group(body.name, actor, body.default_pool, body.preempt_within)
        return {"groups": groups_view(core)}

    @routes.post("/v1/groups/{group}/members", responses=ERRORS)
    def add_member(group: str, body: MemberIn, request: Request) -> dict:
        """Put a user in a group (a user is in one group; admin; audited). Answers the
        groups, and a ``warning`` when no token, group member or job had the name (a typo
        puts nobody in the group; the member is added all the same: an admin may add a user
        before their first token)."""
        actor = _admin(request)
        unknown = core.unknown_user(body.user)  # asked first: once added, the name is known
        core.add_member(group, body.user, actor)
        out = {"groups": groups_view(core)}
        return out if unknown is None else {**out, "warning": unknown.member_warning(group)}

    @routes.delete("/v1/groups/{group}/members/{user}", responses=ERRORS)
    def remove_member(group: str, user: str, request: Request) -> dict:
        """Take a user out of a group (admin; audited)."""
        actor = _admin(request)
        core.remove_member(group, user, actor)
        return {"groups": groups_view(core)}

    @routes.get("/v1/limits/{user}", responses=ERRORS)
    def limits(user: str, request: Request) -> dict:
        """A user's caps (``null``: no cap); a non-admin may read only their own."""
        viewer = _viewer(request)
        if viewer is not None and viewer != user:
            raise HTTPException(403, LIMITS_REFUSAL)
        return limits_json(core.tenancy.limits.get(user) or UserLimits(user))

    def change(user: str, body: LimitsIn, request: Request) -> dict:
        actor = _admin(request)
        changes = {name: getattr(body, name) for name in body.model_fields_set}
        if changes:  # an empty change writes nothing (and no audit line)
            core.update_user_limits(user, changes, actor)
        limits = core.tenancy.limits.get(user)
        out = limits_json(limits or UserLimits(user))
        # a cap on a name the cluster never saw holds nobody: say so, keep it (set before a
        # user's first job is fine); a change that left no cap holds nobody either way
        unknown = core.unknown_user(user) if changes and limits is not None else None
        return out if unknown is None else {**out, "warning": unknown.warning()}

    @routes.put("/v1/limits/{user}", responses=ERRORS)
    def set_limits(user: str, body: LimitsIn, request: Request) -> dict:
        """Per-user caps: running jobs, GPUs, CPUs and memory (MiB) held, longest interactive
        run, interactive environments at once (admin; audited). Those given are set
        (``null``: that cap removed), those left out are kept, as ``PATCH`` does: a client
        older than ``max_cpus``/``max_mem_mib`` sends the four caps it knows and keeps the
        user's others (until session 13 a cap left out was removed). Answers all six caps,
        and a ``warning`` when no token, group member or job has the name."""
        return change(user, body, request)

    @routes.patch("/v1/limits/{user}", responses=ERRORS)
    def change_limits(user: str, body: LimitsIn, request: Request) -> dict:
        """Change only the caps given (``null``: that cap removed, no cap; one left out:
        kept) and answer all of the user's caps (admin; audited), with a ``warning`` when no
        token, group member or job has the name (a typo limits nobody; the limits are
        stored all the same: an admin may set them before a user's first job)."""
        return change(user, body, request)

    @routes.delete("/v1/limits/{user}", responses=ERRORS)
    def clear_limits(user: str, request: Request) -> dict:
        """Remove all of a user's caps (admin; audited where they had some)."""
        actor = _admin(request)
        removed = core.clear_user_limits(user, actor)
        return {**limits_json(UserLimits(user)), "removed": removed}

    @routes.get("/v1/tenancy", responses=ERRORS)
    def tenancy(request: Request) -> dict:
        """The dashboard's section: quotas with usage and the queue in run order (redacted
        for a non-admin as in ``/v1/queue``)."""
        viewer = _viewer(request)
        return {"quota": quota_view(core, viewer), "queue": queue_view(core, viewer)}

    @routes.get("/v1/nodes", responses=ERRORS)
    def nodes(request: Request) -> dict:
        """Agents by pool: GPUs in all, taken, draining, free."""
        _caller(request)
        return {"nodes": nodes_view(core)}

    return routes
