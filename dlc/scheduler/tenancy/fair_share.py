"""Fair share over time: billed GPU-hours each group (and each user in it) used, decaying with a
half-life (as Slurm's multifactor fair share, Kueue's admission fair sharing and KAI's
time-based fair share do). Pure: no I/O; the core keeps a :class:`UsageLedger`, feeds it
what runs, and the store keeps its rows (``fair_usage``, migration 6) across restarts.

The arithmetic is exact, not stepped: a value ``u`` at time ``t0`` is worth
``u * 2 ** (-(t - t0) / h)`` at ``t``; a job holding ``g`` GPUs from ``t0`` to ``t`` adds
``g * h / ln 2 * (1 - 2 ** (-(t - t0) / h))`` hours-weighted (the integral of the decayed
holding). So the ledger gives the same value however often it is advanced (every round,
once a minute, or once after a restart), and an update costs O(running jobs), never a scan
of history. ``g`` is what the job is *billed*: the largest of its GPUs (a share by its part of
one GPU, :func:`~dlc.scheduler.tenancy.quotas.job_gpus`), its CPUs and its memory, each in
GPUs at the cluster's ratio (:mod:`~dlc.scheduler.tenancy.billing`), so CPU-only borrowing
counts too; a GPU job with the cluster's CPUs and memory per GPU is billed its GPUs.

The *weight* of a group is its guaranteed GPUs over all pools (at least one GPU: a group
guaranteed less, or none, or no group, weighs one). It is not billed as usage is: a CPU or
memory guarantee is often "all of it" (a cap-free placeholder, as the week simulator sets),
which billed would make every such group weigh the whole cluster. Borrowing order and reclaim order
compare ``usage / weight`` (:meth:`FairView.ratio`): lower borrows first, higher is
reclaimed first.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from dlc.errors import TenancyError
from dlc.scheduler.tenancy.billing import BillingRates
from dlc.scheduler.tenancy.policy import Quota

#: the default half-life (``dlc scheduler --fair-share-half-life``): one week
DEFAULT_HALF_LIFE_S = 7 * 86400.0
_UNITS = {"s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}


def parse_span(text: str | float, field: str = "fair_share_half_life") -> float:
    """``7d``, ``12h``, ``90m``, ``30s`` or seconds -> seconds (0 allowed: off)."""
    raw = str(text).strip().lower()
    number, unit = raw, "s"
    for name in sorted(_UNITS, key=len, reverse=True):
        if raw.endswith(name):
            number, unit = raw[: -len(name)], name
            break
    try:
        value = float(number) * _UNITS[unit]
    except ValueError:
        raise TenancyError(field, f"{raw[:20]!r} is not a time; write e.g. 7d, 12h, 90m") from None
    if not 0 <= value < 10 * 365 * 86400:
        raise TenancyError(field, f"{raw[:20]} is out of range; give 0 (off) up to 10 years")
    return value


def decay(value: float, elapsed_s: float, half_life_s: float) -> float:
    """``value`` after ``elapsed_s`` seconds of decay."""
    if half_life_s <= 0 or elapsed_s <= 0:
        return value
    return value * math.pow(2.0, -elapsed_s / half_life_s)


def accrued(gpus: float, elapsed_s: float, half_life_s: float) -> float:
    """GPU-hours that holding ``gpus`` for ``elapsed_s`` seconds is worth at its end."""
    if elapsed_s <= 0 or gpus <= 0:
        return 0.0
    if half_life_s <= 0:
        return gpus * elapsed_s / 3600.0
    rate = math.log(2) / half_life_s
    return gpus * -math.expm1(-elapsed_s * rate) / rate / 3600.0


@dataclass(frozen=True)
class UsageRow:
    """One stored row: decayed billed GPU-hours of ``user`` in ``group`` as of ``at``."""

    group: str
    user: str
    gpu_hours: float
    at: float


class UsageLedger:
    """Decayed billed GPU-hours per (group, user), advanced with what runs.

    Args:
        half_life_s: the half-life (> 0; a core with fair share off keeps no ledger).
        rows: what the store kept (a restart or a standby taking over).
        now: the time to start from when nothing was stored.
        at: the time the store says holdings were counted up to.
    """

    def __init__(
        self,
        half_life_s: float,
        rows: Iterable[UsageRow] = (),
        now: float = 0.0,
        at: float | None = None,
    ):
        self.half_life_s = half_life_s
        self._rows: dict[tuple[str, str], tuple[float, float]] = {}
        for row in rows:
            self._rows[(row.group, row.user)] = (row.gpu_hours, row.at)
        #: the time up to which holdings were counted: after a restart the stored one, so
        #: the jobs found running are counted from there
        newest = max((t for _, t in self._rows.values()), default=now)
        self.at = newest if at is None else at
        self._dirty: set[tuple[str, str]] = set()

    def advance(self, now: float, holdings: Mapping[tuple[str, str], float]) -> None:
        """Count ``holdings`` ((group, user) -> GPUs billed: :mod:`~dlc.scheduler.tenancy.billing`)
        from :attr:`at` to ``now``."""
        elapsed = now - self.at
        if elapsed <= 0:
            return
        for key, gpus in holdings.items():
            if gpus <= 0:
                continue
            value = self.value(key, self.at)
            # the decayed old value plus the accrual, both as of now
            self._rows[key] = (decay(value, elapsed, self.half_life_s)
                               + accrued(gpus, elapsed, self.half_life_s), now)  # fmt: skip
            self._dirty.add(key)
        self.at = now

    def value(self, key: tuple[str, str], now: float) -> float:
        """Decayed GPU-hours of (group, user) as of ``now``."""
        gpu_hours, at = self._rows.get(key, (0.0, now))
        return decay(gpu_hours, now - at, self.half_life_s)

    def groups(self, now: float) -> dict[str, float]:
        """Group -> decayed GPU-hours (the sum of its users') as of ``now``."""
        out: dict[str, float] = {}
        for key in self._rows:
            out[key[0]] = out.get(key[0], 0.0) + self.value(key, now)
        return out

    def users(self, now: float) -> dict[tuple[str, str], float]:
        """(group, user) -> decayed GPU-hours as of ``now``."""
        return {key: self.value(key, now) for key in self._rows}

    def take_dirty(self) -> list[UsageRow]:
        """Rows changed since the last call (what the store must write), and forget them."""
        rows = [UsageRow(k[0], k[1], *self._rows[k]) for k in sorted(self._dirty)]
        self._dirty.clear()
        return rows


@dataclass(frozen=True)
class FairView:
    """What the planner reads of fair share in one round.

    Attributes:
        group_ratio: group -> decayed GPU-hours over its weight.
        user_usage: (group, user) -> decayed GPU-hours.
    """

    group_ratio: Mapping[str, float]
    user_usage: Mapping[tuple[str, str], float]

    def ratio(self, group: str) -> float:
        """The group's usage over its weight (0 when it used nothing)."""
        return self.group_ratio.get(group, 0.0)


def group_weights(quotas: Iterable[Quota]) -> dict[str, float]:
    """Group -> guaranteed GPUs over all pools (:class:`~dlc.scheduler.tenancy.policy.Quota`)."""
    out: dict[str, float] = {}
    for quota in quotas:
        out[quota.group] = out.get(quota.group, 0.0) + quota.guaranteed.gpus
    return out


def fair_view(ledger: UsageLedger, quotas: Iterable[Quota], now: float) -> FairView:
    """The ledger's ratios as of ``now`` (weights from the quotas; at least one GPU)."""
    weights = group_weights(quotas)
    ratio = {g: u / max(weights.get(g, 0.0), 1.0) for g, u in ledger.groups(now).items()}
    return FairView(ratio, ledger.users(now))


@dataclass(frozen=True)
class UserShare:
    """A user's decayed GPU-hours within a group (a row of :class:`GroupShare`)."""

    user: str
    gpu_hours: float


@dataclass(frozen=True)
class GroupShare:
    """A group's decayed GPU-hours, its weight (guaranteed GPUs, at least one), its ratio
    (:meth:`FairView.ratio`) and its users' rows (those the viewer may see)."""

    group: str
    gpu_hours: float
    weight: float
    ratio: float
    users: tuple[UserShare, ...]


@dataclass(frozen=True)
class FairShare:
    """Fair share over time as ``dlc quota`` and the dashboard show it (the API's
    ``fair_share``): the half-life, each group's usage by group name, and what a CPU and a
    MiB are billed as (``None``: no agent known yet)."""

    half_life_s: float
    groups: tuple[GroupShare, ...]
    billing: BillingRates | None = None


def fair_share_report(
    ledger: UsageLedger, quotas: Collection[Quota], now: float, viewer: str | None = None,
    billing: BillingRates | None = None,
) -> FairShare:  # fmt: skip
    """The ledger as of ``now`` per group and user (``viewer``: a non-admin sees every
    group's total but only their own user row; ``None``: all rows; ``billing``: the rates
    in force, shown beside it)."""
    weights = group_weights(quotas)
    view = fair_view(ledger, quotas, now)
    groups = []
    for group, used in sorted(ledger.groups(now).items()):
        users = tuple(UserShare(u, h) for (g, u), h in sorted(view.user_usage.items())
                      if g == group and (viewer is None or u == viewer))  # fmt: skip
        weight = max(weights.get(group, 0.0), 1.0)
        groups.append(GroupShare(group, used, weight, view.ratio(group), users))
    return FairShare(ledger.half_life_s, tuple(groups), billing)
