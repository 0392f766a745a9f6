"""Groups, members, quotas per pool, user limits and the quota audit log in SQLite.

A mixin of :class:`dlc.store.sqlite.JobStore` (tables from migration 4 in
:mod:`dlc.store.schema`); an in-memory store mirrors these methods. Every change is one
transaction together with its audit line (who, when, what), so the log never misses one.
:meth:`TenancyStore.tenancy_policy` builds the core's :class:`~dlc.scheduler.tenancy.policy.Policy`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from dlc.errors import TenancyError
from dlc.scheduler.jobs.spec_fields import check_name
from dlc.scheduler.tenancy.fair_share import UsageRow
from dlc.scheduler.tenancy.policy import (
    DEFAULT_GRACE_S,
    DEFAULT_POOL,
    AuditEntry,
    Group,
    Policy,
    Quota,
    Resources,
    UserLimits,
    check_amounts,
)

_GRACE_KEY = "preempt_grace_s"
#: meta key: the time up to which the fair-share ledger counted what ran
FAIR_AT_KEY = "fair_usage_at"


def _ceiling(row) -> Resources | None:
    if row["ceil_gpus"] is None and row["ceil_cpus"] is None and row["ceil_mem_mib"] is None:
        return None
    big = float("inf")
    return Resources(
        big if row["ceil_gpus"] is None else row["ceil_gpus"],
        big if row["ceil_cpus"] is None else row["ceil_cpus"],
        big if row["ceil_mem_mib"] is None else row["ceil_mem_mib"],
    )


def _limits_of(row) -> UserLimits:
    return UserLimits(row["user"], row["max_running"], row["max_gpus"], row["max_interactive_s"],
                      row["max_interactive"], row["max_cpus"], row["max_mem_mib"])  # fmt: skip


class TenancyStore:
    """Tenancy methods; needs ``_tx``, ``_read``, ``_db``, ``_clock``, ``get_meta`` and
    ``set_meta`` of the store it is mixed into."""

    if TYPE_CHECKING:  # what :class:`dlc.store.sqlite.JobStore` gives
        _db: sqlite3.Connection
        _clock: Callable[[], float]

        def _tx(self, action: str) -> AbstractContextManager[sqlite3.Connection]: ...
        def _read(self, action: str) -> AbstractContextManager[None]: ...
        def get_meta(self, key: str) -> str | None: ...
        def set_meta(self, key: str, value: str | None) -> None: ...

    def tenancy_policy(self) -> Policy:
        """The whole policy as the core reads it."""
        with self._read("reading groups and quotas"):
            members: dict[str, set[str]] = {}
            for row in self._db.execute("SELECT user, group_name FROM group_members"):
                members.setdefault(row["group_name"], set()).add(row["user"])
            groups = {
                r["name"]: Group(r["name"], frozenset(members.get(r["name"], ())),
                                 r["default_pool"], bool(r["preempt_within"]))
                for r in self._db.execute("SELECT * FROM tenancy_groups ORDER BY name")
            }  # fmt: skip
            quotas = {
                (r["group_name"], r["pool"]): Quota(
                    r["group_name"], r["pool"], Resources(r["gpus"], r["cpus"], r["mem_mib"]),
                    _ceiling(r),
                )
                for r in self._db.execute("SELECT * FROM quotas")
            }  # fmt: skip
            limits = {
                r["user"]: _limits_of(r) for r in self._db.execute("SELECT * FROM user_limits")
            }
        grace = self.get_meta(_GRACE_KEY)
        return Policy(groups, quotas, limits, float(grace) if grace else DEFAULT_GRACE_S)

    def _audit(self, db, actor: str, action: str, detail: dict) -> None:
        db.execute(
            "INSERT INTO quota_audit (at, actor, action, detail) VALUES (?, ?, ?, ?)",
            (self._clock(), actor, action, json.dumps(detail, sort_keys=True)),
        )

    def _need_group(self, db, name: str) -> None:
        if db.execute("SELECT 1 FROM tenancy_groups WHERE name = ?", (name,)).fetchone() is None:
            raise TenancyError("group", f"no group {name!r}; create it with `dlc groups create`")

    def create_group(
        self, name: str, actor: str, default_pool: str = DEFAULT_POOL, preempt_within=False
    ) -> None:
        """Create (or update the settings of) a group."""
        check_name("group", name)
        check_name("pool", default_pool)
        with self._tx("saving a group") as db:
            db.execute(
                "INSERT INTO tenancy_groups (name, default_pool, preempt_within, created_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET"
                " default_pool = excluded.default_pool,"
                " preempt_within = excluded.preempt_within",
                (name, default_pool, int(preempt_within), self._clock()),
            )
            detail = {"group": name, "default_pool": default_pool,
                      "preempt_within": bool(preempt_within)}  # fmt: skip
            self._audit(db, actor, "group", detail)

    def add_member(self, group: str, user: str, actor: str) -> None:
        """Put ``user`` in ``group`` (a user is in one group: this moves them)."""
        if not user or len(user) > 255:
            raise TenancyError("user", "give a user name of 1 to 255 characters")
        with self._tx("adding a member") as db:
            self._need_group(db, group)
            db.execute(
                "INSERT INTO group_members (user, group_name) VALUES (?, ?)"
                " ON CONFLICT(user) DO UPDATE SET group_name = excluded.group_name",
                (user, group),
            )
            self._audit(db, actor, "member", {"group": group, "user": user})

    def remove_member(self, group: str, user: str, actor: str) -> None:
        """Take ``user`` out of ``group``."""
        with self._tx("removing a member") as db:
            gone = db.execute(
                "DELETE FROM group_members WHERE user = ? AND group_name = ?", (user, group)
            ).rowcount
            if not gone:
                raise TenancyError("user", f"{user} is not in group {group}; see `dlc groups`")
            self._audit(db, actor, "member-removed", {"group": group, "user": user})

    def set_quota(
        self, group: str, pool: str, guaranteed: Resources, actor: str,
        ceiling: Resources | None = None,
    ) -> None:  # fmt: skip
        """Set a group's guarantee (and ceiling) in a pool; audited."""
        check_quota(pool, guaranteed, ceiling)
        c = ceiling
        with self._tx("saving a quota") as db:
            self._need_group(db, group)
            db.execute(
                # the key is two columns: an explicit upsert (both engines; PostgreSQL's
                # INSERT OR REPLACE translation keys on the first column only)
                "INSERT INTO quotas (group_name, pool, gpus, cpus, mem_mib,"
                " ceil_gpus, ceil_cpus, ceil_mem_mib) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT(group_name, pool) DO UPDATE SET gpus = excluded.gpus,"
                " cpus = excluded.cpus, mem_mib = excluded.mem_mib,"
                " ceil_gpus = excluded.ceil_gpus, ceil_cpus = excluded.ceil_cpus,"
                " ceil_mem_mib = excluded.ceil_mem_mib",
                (group, pool, guaranteed.gpus, guaranteed.cpus, guaranteed.mem_mib,
                 _finite(c.gpus) if c else None, _finite(c.cpus) if c else None,
                 _finite(c.mem_mib) if c else None),
            )  # fmt: skip
            detail = {"group": group, "pool": pool, "guaranteed": guaranteed.to_dict(),
                      "ceiling": c.to_dict() if c else None}  # fmt: skip
            self._audit(db, actor, "quota", detail)

    def set_user_limits(self, limits: UserLimits, actor: str) -> None:
        """Set a user's caps (``None`` fields: no cap); audited."""
        check_limits(limits)
        with self._tx("saving user limits") as db:
            db.execute(
                "INSERT OR REPLACE INTO user_limits (user, max_running, max_gpus,"
                " max_interactive_s, max_interactive, max_cpus, max_mem_mib)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (limits.user, limits.max_running, limits.max_gpus, limits.max_interactive_s,
                 limits.max_interactive, limits.max_cpus, limits.max_mem_mib),
            )  # fmt: skip
            self._audit(db, actor, "limits", limits_detail(limits))

    def update_user_limits(
        self, user: str, changes: Mapping[str, float | None], actor: str
    ) -> None:
        """Change only the caps named in ``changes`` (a ``None`` value: that cap removed) and
        keep the user's others; a user left with no cap loses their row. Audited with the
        limits after the change and the names changed.

        One upsert of the named columns: two admins changing different caps at once both
        keep theirs (a read-modify-write of the whole row would lose one)."""
        check_changes(user, changes)
        if not changes:
            return
        names = sorted(changes)  # from _LIMITS only (check_changes): safe as column names
        cols = ", ".join(names)
        sets = ", ".join(f"{n} = excluded.{n}" for n in names)
        marks = ", ".join("?" for _ in names)
        with self._tx("saving user limits") as db:
            db.execute(
                f"INSERT INTO user_limits (user, {cols}) VALUES (?, {marks})"  # noqa: S608
                f" ON CONFLICT(user) DO UPDATE SET {sets}",
                (user, *(changes[n] for n in names)),
            )
            row = db.execute("SELECT * FROM user_limits WHERE user = ?", (user,)).fetchone()
            limits = _limits_of(row)
            if not has_cap(limits):
                db.execute("DELETE FROM user_limits WHERE user = ?", (user,))
            self._audit(db, actor, "limits", limits_detail(limits, names))

    def clear_user_limits(self, user: str, actor: str) -> bool:
        """Remove all of a user's caps (audited); ``False``: they had none (nothing written)."""
        with self._tx("removing user limits") as db:
            gone = db.execute("DELETE FROM user_limits WHERE user = ?", (user,)).rowcount > 0
            if gone:
                self._audit(db, actor, "limits-removed", {"user": user})
        return gone

    def set_grace(self, seconds: float, actor: str) -> None:
        """The grace period preempted jobs get (SIGTERM, then SIGKILL)."""
        check_grace(seconds)
        with self._tx("saving the grace period") as db:
            self.set_meta(_GRACE_KEY, str(float(seconds)))
            self._audit(db, actor, "grace", {"grace_s": seconds})

    def fair_usage(self) -> tuple[list[UsageRow], float | None]:
        """The fair-share ledger's rows and the time it counted up to (``None``: never)."""
        with self._read("reading fair-share usage"):
            rows = [UsageRow(r["group_name"], r["user"], r["gpu_hours"], r["at"])
                    for r in self._db.execute("SELECT * FROM fair_usage")]  # fmt: skip
        at = self.get_meta(FAIR_AT_KEY)
        return rows, float(at) if at else None

    def save_fair_usage(self, rows: list[UsageRow], at: float) -> None:
        """Write changed ledger rows and the time counted up to, in one transaction (only
        the rows of groups that ran since the last write: bounded by running users)."""
        with self._tx("saving fair-share usage") as db:
            for row in rows:
                db.execute(
                    # a two-column key: an explicit upsert (see set_quota)
                    "INSERT INTO fair_usage (group_name, user, gpu_hours, at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT(group_name, user) DO UPDATE SET"
                    " gpu_hours = excluded.gpu_hours, at = excluded.at",
                    (row.group, row.user, row.gpu_hours, row.at),
                )
            self.set_meta(FAIR_AT_KEY, repr(float(at)))

    def quota_audit(self, limit: int = 100) -> list[AuditEntry]:
        """The latest changes, newest first."""
        with self._read("reading the quota audit log"):
            rows = self._db.execute(
                "SELECT at, actor, action, detail FROM quota_audit ORDER BY id DESC LIMIT ?",
                (limit,),
            ).fetchall()
        return [AuditEntry(r["at"], r["actor"], r["action"], json.loads(r["detail"])) for r in rows]


#: the largest cap a limit takes: above it a cap means nothing, and an integer past 2^31
#: does not fit PostgreSQL's INTEGER column (refused here in one line, not by the database)
MAX_LIMIT = 1e9

_LIMITS = ("max_running", "max_gpus", "max_cpus", "max_mem_mib", "max_interactive_s",
           "max_interactive")  # fmt: skip


def check_limits(limits: UserLimits) -> None:
    """Refuse negative, not-a-number, infinite or absurd caps (both stores): NaN compares
    false with everything, so a NaN cap would hold nothing."""
    for name in _LIMITS:
        value = getattr(limits, name)
        if value is None:
            continue
        if value < 0:
            raise TenancyError(name, f"{value} is negative; give 0 or more, or leave it out")
        if not value <= MAX_LIMIT:  # NaN and infinity fail this too
            raise TenancyError(name, f"{value} is out of range; give 0 to {MAX_LIMIT:.0f}, or "
                               "leave it out for no cap")  # fmt: skip


def check_changes(user: str, changes: Mapping[str, float | None]) -> None:
    """Refuse a change naming no known limit, or a bad cap (``check_limits``), in one line
    naming the field."""
    for name in changes:
        if name not in _LIMITS:
            raise TenancyError(name, f"no such limit; the limits are {', '.join(_LIMITS)}")
    check_limits(UserLimits(user, **changes))  # type: ignore[arg-type]


def has_cap(limits: UserLimits) -> bool:
    """Whether any of ``limits`` caps something (0 does: nothing of that kind runs)."""
    return any(getattr(limits, name) is not None for name in _LIMITS)


def check_quota(pool: str, guaranteed: Resources, ceiling: Resources | None) -> None:
    """A quota both stores accept: a valid pool name, amounts, and a ceiling not below the
    guarantee (one-line :class:`TenancyError` naming the field)."""
    check_name("pool", pool)
    check_amounts(guaranteed, "quota")
    if ceiling is not None:
        check_amounts(ceiling, "ceiling")
        name = guaranteed.first_excess(ceiling)
        if name is not None:
            raise TenancyError("ceiling", f"{name} ceiling is below the guarantee; raise it")


def check_grace(seconds: float) -> None:
    """Refuse a grace period outside 0..3600 s (both stores)."""
    if not 0 <= seconds <= 3600:
        raise TenancyError("grace", f"{seconds:g} s is out of range; give 0 to 3600")


def limits_detail(limits: UserLimits, changed: list[str] | None = None) -> dict:
    """The audit detail of a limits change: the limits after it and, for a change of some
    of them, which (``changed``)."""
    detail: dict[str, object] = {"user": limits.user, "max_running": limits.max_running,
              "max_gpus": limits.max_gpus, "max_cpus": limits.max_cpus,
              "max_mem_mib": limits.max_mem_mib, "max_interactive_s": limits.max_interactive_s,
              "max_interactive": limits.max_interactive}  # fmt: skip
    if changed is not None:
        detail["changed"] = changed
    return detail


def _finite(value: float) -> float | None:
    return None if value == float("inf") else value
