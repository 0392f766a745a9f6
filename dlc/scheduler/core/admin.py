"""The core's audited writes for the API: tokens and tenancy settings.

:class:`Admin`, a component of :class:`~dlc.scheduler.core.facade.SchedulerCore` (why components:
:mod:`~dlc.scheduler.core.state`). The API's routes never reach the store (issue 26, "narrow
ports"): they call these methods, which write through the store's
:class:`~dlc.scheduler.core.ports.TenancyAdmin` and :class:`~dlc.scheduler.core.ports.TokenIssuer`
ports and, for a tenancy change, read the whole policy back into the core at once, so the next offer
round already plans with it. :meth:`Admin.unknown_user` tells a limit set on a name the cluster has
never seen (a typo limits nobody), or a member added under one, through the
:class:`~dlc.scheduler.core.ports.UserDirectory` port.
"""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from dlc.errors import StoreError
from dlc.scheduler.core.ports import TenancyAdmin, TokenIssuer, UserDirectory
from dlc.scheduler.core.state import CoreState
from dlc.scheduler.core.tenancy import TenancyOps
from dlc.scheduler.tenancy.policy import (
    DEFAULT_POOL,
    AuditEntry,
    Policy,
    Resources,
    UserLimits,
)


@dataclass(frozen=True)
class UnknownUser:
    """A user name no token, group member or job of the cluster has: most likely a typo.

    Attributes:
        user: the name given.
        similar: known names close to it (``difflib``), closest first; may be empty.
    """

    user: str
    similar: tuple[str, ...] = ()

    def warning(self) -> str:
        """One line for the admin who set limits on the name: ``user 'alcie': no token,
        group member or job has that name (did you mean alice?); ...``, with the command that
        takes the limits back."""
        return (f"{self._unknown()}; the limits are stored and apply once a user of that "
                f"name submits; `dlc groups limit {_shell(self.user)} --clear` removes "
                "them")  # fmt: skip

    def member_warning(self, group: str) -> str:
        """One line for the admin who put the name in ``group``: as :meth:`warning`, with the
        command that takes the member out again."""
        shown = group if group.isprintable() else repr(group)
        return (f"{self._unknown()}; added to {shown} all the same; `dlc groups remove "
                f"{_shell(group)} {_shell(self.user)}` takes the name out")  # fmt: skip

    def _unknown(self) -> str:
        guess = f" (did you mean {' or '.join(self.similar)}?)" if self.similar else ""
        return f"user {self.user!r}: no token, group member or job has that name{guess}"


def _shell(name: str) -> str:
    """``name`` as a shell word; a name from a URL or body may hold a newline, which quoted
    for a shell would break the one line: then its ``repr``."""
    return shlex.quote(name) if name.isprintable() else repr(name)


class Admin:
    """Tokens, groups, quotas, user limits and the preemption grace, written through.

    Args:
        state: the core's shared state (its store is written through).
        tenancy_ops: takes the policy read back after each tenancy change.
    """

    def __init__(self, state: CoreState, tenancy_ops: TenancyOps) -> None:
        self.state = state
        self.tenancy_ops = tenancy_ops

    def add_token(
        self,
        user: str,
        admin: bool = False,
        max_priority: int | None = None,
        expires_at: float | None = None,
    ) -> str:
        """A new API token for ``user``; returns it (the store keeps only its hash)."""
        issuer = cast(TokenIssuer, self._port("add_token", "API tokens"))
        return issuer.add_token(user, admin=admin, max_priority=max_priority,
                                expires_at=expires_at)  # fmt: skip

    def create_group(
        self, name: str, actor: str, default_pool: str = DEFAULT_POOL, preempt_within: bool = False
    ) -> Policy:
        """Create (or update the settings of) a group; audited. Returns the new policy."""
        self._tenancy_store().create_group(name, actor, default_pool, preempt_within)
        return self._reread_tenancy()

    def add_member(self, group: str, user: str, actor: str) -> Policy:
        """Put ``user`` in ``group`` (moving them from any other); audited."""
        self._tenancy_store().add_member(group, user, actor)
        return self._reread_tenancy()

    def remove_member(self, group: str, user: str, actor: str) -> Policy:
        """Take ``user`` out of ``group``; audited."""
        self._tenancy_store().remove_member(group, user, actor)
        return self._reread_tenancy()

    def set_quota(
        self, group: str, pool: str, guaranteed: Resources, actor: str,
        ceiling: Resources | None = None,
    ) -> Policy:  # fmt: skip
        """Set a group's guarantee (and optional ceiling) in a pool; audited."""
        self._tenancy_store().set_quota(group, pool, guaranteed, actor, ceiling=ceiling)
        return self._reread_tenancy()

    def set_user_limits(self, limits: UserLimits, actor: str) -> Policy:
        """Set a user's caps (``None`` fields: no cap); audited."""
        self._tenancy_store().set_user_limits(limits, actor)
        return self._reread_tenancy()

    def update_user_limits(
        self, user: str, changes: Mapping[str, float | None], actor: str
    ) -> Policy:
        """Change only the caps named in ``changes`` (``None``: that cap removed); audited."""
        self._tenancy_store().update_user_limits(user, changes, actor)
        return self._reread_tenancy()

    def unknown_user(self, user: str) -> UnknownUser | None:
        """``user`` as an :class:`UnknownUser` when the store has never seen the name (no
        token, revoked ones included, no group member, no job), else ``None``; also ``None``
        when the store cannot tell (it keeps no users: a test's)."""
        store = self.state.store
        if not callable(getattr(store, "knows_user", None)):
            return None
        directory = cast(UserDirectory, store)
        if directory.knows_user(user):
            return None
        similar = difflib.get_close_matches(user, directory.user_names(), n=3, cutoff=0.6)
        return UnknownUser(user, tuple(similar))

    def clear_user_limits(self, user: str, actor: str) -> bool:
        """Remove all of ``user``'s caps (audited where they had some); ``False``: they had
        none."""
        gone = self._tenancy_store().clear_user_limits(user, actor)
        self._reread_tenancy()
        return gone

    def set_grace(self, seconds: float, actor: str) -> Policy:
        """The grace period of tasks launched from now on; audited."""
        self._tenancy_store().set_grace(seconds, actor)
        return self._reread_tenancy()

    def quota_audit(self, limit: int = 100) -> list[AuditEntry]:
        """The latest audited tenancy changes, newest first."""
        return self._tenancy_store().quota_audit(limit)

    def _reread_tenancy(self) -> Policy:
        policy = self._tenancy_store().tenancy_policy()
        self.tenancy_ops.set_tenancy(policy)
        return policy

    def _tenancy_store(self) -> TenancyAdmin:
        return cast(TenancyAdmin, self._port("tenancy_policy", "groups and quotas"))

    def _port(self, method: str, what: str) -> object:
        """The store, if it has ``method`` (every DLC store does; a test's may not)."""
        if not callable(getattr(self.state.store, method, None)):
            raise StoreError(f"this scheduler's job store keeps no {what}; "
                             "run it with the SQLite or PostgreSQL store")  # fmt: skip
        return self.state.store
