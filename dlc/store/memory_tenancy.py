"""Groups, members, quotas, user limits and the quota audit log kept in memory.

The in-memory store's copy of :class:`dlc.store.tenancy.TenancyStore`: same methods, same
checks, same answers (``tests/store/test_store_tenancy.py`` runs on both), so the simulator
and core tests can use multi-tenant policies without SQLite.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
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
)
from dlc.store.tenancy import (
    _GRACE_KEY,
    FAIR_AT_KEY,
    check_changes,
    check_grace,
    check_limits,
    check_quota,
    has_cap,
    limits_detail,
)


class MemoryTenancy:
    """Tenancy methods; needs ``_lock``, ``_clock``, ``get_meta`` and ``set_meta``."""

    if TYPE_CHECKING:  # what :class:`dlc.store.memory.MemoryJobStore` gives
        _lock: threading.RLock
        _clock: Callable[[], float]

        def get_meta(self, key: str) -> str | None: ...
        def set_meta(self, key: str, value: str | None) -> None: ...

    def _init_tenancy(self) -> None:
        self._groups: dict[str, tuple[str, bool]] = {}  # name -> (default pool, preempt_within)
        self._members: dict[str, str] = {}  # user -> group
        self._quotas: dict[tuple[str, str], Quota] = {}
        self._limits: dict[str, UserLimits] = {}
        self._audit_log: list[AuditEntry] = []
        self._fair_rows: dict[tuple[str, str], UsageRow] = {}

    def fair_usage(self) -> tuple[list[UsageRow], float | None]:
        """The fair-share ledger's rows and the time it counted up to (``None``: never)."""
        with self._lock:
            at = self.get_meta(FAIR_AT_KEY)
            return list(self._fair_rows.values()), float(at) if at else None

    def save_fair_usage(self, rows: list[UsageRow], at: float) -> None:
        """Write changed ledger rows and the time counted up to."""
        with self._lock:
            for row in rows:
                self._fair_rows[(row.group, row.user)] = row
            self.set_meta(FAIR_AT_KEY, repr(float(at)))

    def tenancy_policy(self) -> Policy:
        """The whole policy as the core reads it."""
        with self._lock:
            members: dict[str, set[str]] = {}
            for user, group in self._members.items():
                members.setdefault(group, set()).add(user)
            groups = {
                name: Group(name, frozenset(members.get(name, ())), pool, within)
                for name, (pool, within) in sorted(self._groups.items())
            }
            grace = self.get_meta(_GRACE_KEY)
            return Policy(groups, dict(self._quotas), dict(self._limits),
                          float(grace) if grace else DEFAULT_GRACE_S)  # fmt: skip

    def _audit(self, actor: str, action: str, detail: dict) -> None:
        # through JSON, as the SQLite store keeps it
        detail = json.loads(json.dumps(detail, sort_keys=True))
        self._audit_log.append(AuditEntry(self._clock(), actor, action, detail))

    def _need_group(self, name: str) -> None:
        if name not in self._groups:
            raise TenancyError("group", f"no group {name!r}; create it with `dlc groups create`")

    def create_group(
        self, name: str, actor: str, default_pool: str = DEFAULT_POOL, preempt_within=False
    ) -> None:
        """Create (or update the settings of) a group."""
        check_name("group", name)
        check_name("pool", default_pool)
        with self._lock:
            self._groups[name] = (default_pool, bool(preempt_within))
            self._audit(actor, "group", {"group": name, "default_pool": default_pool,
                                         "preempt_within": bool(preempt_within)})  # fmt: skip

    def add_member(self, group: str, user: str, actor: str) -> None:
        """Put ``user`` in ``group`` (a user is in one group: this moves them)."""
        if not user or len(user) > 255:
            raise TenancyError("user", "give a user name of 1 to 255 characters")
        with self._lock:
            self._need_group(group)
            self._members[user] = group
            self._audit(actor, "member", {"group": group, "user": user})

    def remove_member(self, group: str, user: str, actor: str) -> None:
        """Take ``user`` out of ``group``."""
        with self._lock:
            if self._members.get(user) != group:
                raise TenancyError("user", f"{user} is not in group {group}; see `dlc groups`")
            del self._members[user]
            self._audit(actor, "member-removed", {"group": group, "user": user})

    def set_quota(
        self, group: str, pool: str, guaranteed: Resources, actor: str,
        ceiling: Resources | None = None,
    ) -> None:  # fmt: skip
        """Set a group's guarantee (and ceiling) in a pool; audited."""
        check_quota(pool, guaranteed, ceiling)
        if ceiling == Resources(*(float("inf"),) * 3):
            ceiling = None  # no cap on anything: as the SQLite store reads it back
        with self._lock:
            self._need_group(group)
            self._quotas[(group, pool)] = Quota(group, pool, guaranteed, ceiling)
            self._audit(
                actor,
                "quota",
                {
                    "group": group,
                    "pool": pool,
                    "guaranteed": guaranteed.to_dict(),
                    "ceiling": ceiling.to_dict() if ceiling else None,
                },
            )

    def set_user_limits(self, limits: UserLimits, actor: str) -> None:
        """Set a user's caps (``None`` fields: no cap); audited."""
        check_limits(limits)
        with self._lock:
            self._limits[limits.user] = limits
            self._audit(actor, "limits", limits_detail(limits))

    def update_user_limits(
        self, user: str, changes: Mapping[str, float | None], actor: str
    ) -> None:
        """Change only the caps named in ``changes`` (``None``: that cap removed), keep the
        others; a user left with no cap is dropped. Audited."""
        check_changes(user, changes)
        if not changes:
            return
        with self._lock:
            limits = replace(self._limits.get(user, UserLimits(user)), **changes)  # type: ignore[arg-type]
            if has_cap(limits):
                self._limits[user] = limits
            else:
                self._limits.pop(user, None)
            self._audit(actor, "limits", limits_detail(limits, sorted(changes)))

    def clear_user_limits(self, user: str, actor: str) -> bool:
        """Remove all of a user's caps (audited); ``False``: they had none."""
        with self._lock:
            gone = self._limits.pop(user, None) is not None
            if gone:
                self._audit(actor, "limits-removed", {"user": user})
        return gone

    def set_grace(self, seconds: float, actor: str) -> None:
        """The grace period preempted jobs get (SIGTERM, then SIGKILL)."""
        check_grace(seconds)
        with self._lock:
            self.set_meta(_GRACE_KEY, str(float(seconds)))
            self._audit(actor, "grace", {"grace_s": seconds})

    def quota_audit(self, limit: int = 100) -> list[AuditEntry]:
        """The latest changes, newest first."""
        with self._lock:
            return list(reversed(self._audit_log))[:limit]
