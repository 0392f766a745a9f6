"""Where agents stand in the network, and which agents a gang should share (pure).

Every agent has a place: the Mesos fault domain (``mesos-agent --domain``: a region and a
zone, carried on each offer and in ``/master/slaves`` as ``domain``, which the engine's codec
reads: :mod:`dlc.mesos.agents`) and, inside a zone, a
rack and a top-of-rack switch, carried as the agent attributes ``dlc_rack`` and
``dlc_switch`` (``dlc node-config --rack R --switch S``). :class:`Locality` holds the four.

A gang (``--nodes N``) trains faster when its nodes talk through one switch, then one
rack, then one zone. :class:`GangTopology` says how much a job cares (``--gang-topology
switch:required``; by default a gang *prefers* one switch) and :func:`choose_group`
orders the agents able to take one node so that the narrowest group holding the whole gang
comes first. Groups are keyed by the full path (zone, rack, switch), so two racks that both
call their switch ``tor1`` are never mixed up; an agent missing a level shares that level
with nobody.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from dlc.errors import ConfigError, JobSpecError

#: the agent attributes node-config writes (``--rack``, ``--switch``)
ATTR_RACK = "dlc_rack"
ATTR_SWITCH = "dlc_switch"
#: placement levels, narrowest first
LEVELS = ("switch", "rack", "zone")
MODES = ("preferred", "required")
#: what a gang gets when its spec says nothing
DEFAULT_TEXT = "switch:preferred"

# Mesos attribute text: a letter first (numeric-looking text turns SCALAR), then [a-zA-Z0-9_/.-]
_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,62}$")

T = TypeVar("T")


@dataclass(frozen=True)
class Locality:
    """An agent's place: fault domain region and zone, rack and switch ("" = unknown)."""

    region: str = ""
    zone: str = ""
    rack: str = ""
    switch: str = ""

    def with_attributes(self, attributes: Mapping[str, str]) -> Locality:
        """This fault domain with the rack and switch the agent's attributes name."""
        rack, switch = attributes.get(ATTR_RACK, ""), attributes.get(ATTR_SWITCH, "")
        if rack == self.rack and switch == self.switch:
            return self
        return Locality(region=self.region, zone=self.zone, rack=rack, switch=switch)

    def key(self, level: str) -> tuple[str, ...] | None:
        """The group this agent belongs to at ``level`` (``None``: it does not say)."""
        if level == "zone":
            return (self.region, self.zone) if self.zone else None
        if level == "rack":
            return (self.region, self.zone, self.rack) if self.rack else None
        if level == "switch":
            return (self.region, self.zone, self.rack, self.switch) if self.switch else None
        return ()

    @property
    def known(self) -> bool:
        """True when any level is known."""
        return bool(self.zone or self.rack or self.switch)


def check_place_name(kind: str, value: str) -> str:
    """A rack or switch name usable as a Mesos attribute value.

    Raises:
        ConfigError: naming ``--rack``/``--switch`` and what a name may hold.
    """
    if not _NAME_RE.match(value or ""):
        raise ConfigError(
            kind,
            f"{value[:40]!r} is not a valid {kind} name; pass --{kind} with up to 63 letters, "
            "digits, '_', '.', '-', starting with a letter",
        )
    return value


@dataclass(frozen=True)
class GangTopology:
    """How a gang wants its nodes grouped: at ``level``, ``required`` or ``preferred``."""

    level: str = "switch"
    mode: str = "preferred"

    @property
    def required(self) -> bool:
        """True when the gang waits rather than spread wider than :attr:`level`."""
        return self.mode == "required"

    @property
    def text(self) -> str:
        """``switch:required``: how the spec stores it."""
        return f"{self.level}:{self.mode}"

    @classmethod
    def parse(cls, value: Any) -> GangTopology:
        """From ``"rack"``, ``"rack:required"`` or ``{"level": "rack", "mode": "required"}``.

        Raises:
            JobSpecError: field ``gang_topology``, naming the levels and modes.
        """
        if isinstance(value, Mapping):
            extra = set(value) - {"level", "mode"}
            if extra:
                raise _bad(f"unknown key {sorted(extra)[0]!r}")
            level, mode = value.get("level", "switch"), value.get("mode", "preferred")
        elif isinstance(value, str):
            level, _, mode = value.strip().partition(":")
            mode = mode or "preferred"
        else:
            raise _bad(f"{str(value)[:40]!r} is not LEVEL[:MODE]")
        if level not in LEVELS:
            raise _bad(f"level {str(level)[:20]!r} is not one of {', '.join(LEVELS)}")
        if mode not in MODES:
            raise _bad(f"mode {str(mode)[:20]!r} is not one of {', '.join(MODES)}")
        return cls(level, mode)


def _bad(problem: str) -> JobSpecError:
    return JobSpecError(
        "gang_topology",
        f"{problem}; pass --gang-topology LEVEL[:MODE] with LEVEL switch, rack or zone and "
        "MODE preferred or required (spec file: gang_topology: {level: rack, mode: required})",
    )


@functools.lru_cache(maxsize=16)
def wanted(text: str | None) -> GangTopology:
    """The spec's stored ``gang_topology`` (``None``: :data:`DEFAULT_TEXT`)."""
    return GangTopology.parse(text or DEFAULT_TEXT)


@dataclass(frozen=True, kw_only=True)
class GroupChoice(Generic[T]):
    """The agents a gang should try, best first, and where they stand.

    Attributes:
        order: the able agents to try, the chosen group's first (``required``: only those).
        level: the narrowest level whose one group holds the whole gang (``""``: none).
        group: that group's key.
        size: how many agents of :attr:`order`, from the front, are in that group.
    """

    order: list[T]
    level: str = ""
    group: tuple[str, ...] = ()
    size: int = 0


def choose_group(
    able: Sequence[T], nodes: int, locality_of: Callable[[T], Locality], want: GangTopology
) -> GroupChoice[T] | None:
    """Order ``able`` (agents that can each take one node, best fit first) for a gang.

    Tries each level from the narrowest up to ``want.level`` (and, when ``preferred``, on
    to anywhere): the first level where some group holds ``nodes`` able agents wins, and of
    its groups the smallest that does (big groups stay whole for big gangs; ties: the
    group of the best-fitting agent). ``None`` when ``required`` and no group at
    ``want.level`` or narrower holds the gang.
    """
    last = LEVELS.index(want.level)
    places = [locality_of(agent) for agent in able]
    for level in LEVELS:
        if LEVELS.index(level) > last and want.required:
            break
        keys = [place.key(level) for place in places]
        groups: dict[tuple[str, ...], list[T]] = {}
        for agent, key in zip(able, keys, strict=True):
            if key is not None:
                groups.setdefault(key, []).append(agent)
        fits = [(len(members), n, key) for n, (key, members) in enumerate(groups.items())
                if len(members) >= nodes]  # fmt: skip
        if fits:
            _, _, key = min(fits)
            inside = groups[key]
            rest = [a for a, k in zip(able, keys, strict=True) if k != key]
            order = inside if want.required else inside + rest
            return GroupChoice(order=order, level=level, group=key, size=len(inside))
    if want.required:
        return None
    return GroupChoice(order=list(able))


def spread(places: Sequence[Locality]) -> str:
    """Where a gang's nodes went, for its message: ``one switch r1/tor1``, ``one rack r1``,
    ``one zone eu-1a``, ``2 racks``; empty when the agents do not say."""
    if not any(p.known for p in places):
        return ""
    for level in LEVELS:
        keys = {p.key(level) for p in places}
        if len(keys) == 1 and None not in keys:
            first = places[0]
            name = {"switch": f"{first.rack}/{first.switch}" if first.rack else first.switch,
                    "rack": first.rack, "zone": first.zone}[level]  # fmt: skip
            return f"one {level} {name}"
    racks = {p.key("rack") for p in places}
    return f"{len(racks)} racks" if None not in racks else "agents without a rack"


def missing(want: GangTopology, nodes: int, gpus: int) -> str:
    """Why a ``required`` gang waits: ``no switch has 4 agents with 8 free GPUs each`` (a
    CPU-only gang: ``... with room for a node each``)."""
    each = f"{gpus} free GPUs each" if gpus else "room for a node each (CPUs, memory)"
    return f"no {want.level} has {nodes} agents with {each}"
