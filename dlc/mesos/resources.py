"""Mesos resources and attributes: the mesos-agent flag syntax and the v1 JSON form.

``mesos-agent --resources='cpus:4;mem:4096;ports:[31000-31100];gpus:4;gpu_ids:{0,1,2,3}'`` and
``--attributes='dlc_topo:...;gpu_model:V100'`` are parsed here into the JSON dicts the v1 API
carries (``{"name": "gpu_ids", "type": "SET", "set": {"item": ["0", "1"]}, "role": "*"}``), and
:class:`Resources` does the arithmetic a master needs (containment, addition, subtraction) on
them. Pure code: no I/O, no pymesos.

Value rules follow Mesos (``src/common/values.cpp``, ``resources.cpp``, ``attributes.cpp``):
``[a-b,c-d]`` is RANGES, ``{x,y}`` is SET, a number is SCALAR, anything else is TEXT (attributes
only) made of ``[a-zA-Z0-9_/.-]``. Scalars are kept to three decimals like Mesos's fixed-point
arithmetic, and zero scalars / empty sets and ranges vanish.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from dlc.errors import ResourceSyntaxError
from dlc.topology.gpu_shares import normalise, subtract

Value = float | frozenset[str] | tuple[tuple[int, int], ...]
#: (name, reservation): the reservation is ``"*"`` (unreserved), a role (reserved statically for
#: it, as the flag ``gpus(dlc):4`` says), ``"+role"`` (reserved dynamically) or a refinement
#: stack joined by ``,`` (``"eng,+eng/dlc"``): :func:`reservation_key`
Key = tuple[str, str]

_NAME = re.compile(r"^([A-Za-z0-9_./-]+)(?:\(([^()]*)\))?$")
_TEXT = re.compile(r"^[A-Za-z0-9_/.-]+$")
_DEFAULT_ROLE = "*"


def reservation_key(res: Mapping[str, Any]) -> str:
    """The reservation part of a :data:`Key` for a v1 JSON Resource, read from either format
    the master speaks: ``reservations`` (``RESERVATION_REFINEMENT``) or ``role`` with an
    optional ``reservation`` (dynamic) of older frameworks."""
    stack = res.get("reservations") or ()
    if stack:
        return ",".join(
            ("+" if r.get("type", "STATIC") == "DYNAMIC" else "") + str(r.get("role") or "")
            for r in stack
        )
    role = res.get("role") or _DEFAULT_ROLE
    if role != _DEFAULT_ROLE and res.get("reservation") is not None:
        return "+" + role
    return role


def reserved_role(key: str) -> str | None:
    """The role a reservation key reserves for (its last layer); ``None``: unreserved."""
    if key == _DEFAULT_ROLE:
        return None
    return key.rsplit(",", 1)[-1].lstrip("+")


def is_dynamic(key: str) -> bool:
    """Whether the last layer of a reservation key is a dynamic reservation."""
    return key.rsplit(",", 1)[-1].startswith("+")


def offerable_to(key: str, role: str) -> bool:
    """Whether resources of this reservation may be offered to ``role``: unreserved ones, and
    those reserved for the role or one of its ancestors (``eng`` for ``eng/dlc``)."""
    owner = reserved_role(key)
    return owner is None or role == owner or role.startswith(owner + "/")


def reservation_json(key: str, refinement: bool) -> dict[str, Any]:
    """The role/reservation fields of a Resource in the format a framework reads."""
    if key == _DEFAULT_ROLE:
        return {} if refinement else {"role": _DEFAULT_ROLE}
    layers = key.split(",")
    if refinement:
        return {
            "reservations": [
                {
                    "type": "DYNAMIC" if layer.startswith("+") else "STATIC",
                    "role": layer.lstrip("+"),
                }
                for layer in layers
            ]
        }
    out: dict[str, Any] = {"role": layers[-1].lstrip("+")}
    if layers[-1].startswith("+"):
        out["reservation"] = {}
    return out


def reserve_items(text: str, role: str, names: Iterable[str]) -> str:
    """``--resources`` text with the items named ``names`` reserved for ``role``
    (``gpus:4`` -> ``gpus(role):4``); items already given a role are left as they are."""
    wanted = set(names)
    out = []
    for item in _split_items(text):
        head, colon, value = item.partition(":")
        name = head.strip()
        out.append(f"{name}({role}):{value}" if colon and name in wanted else item)
    return ";".join(out)


def _scalar(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and value not in (float("inf"), float("-inf")) else None


def _round(value: float) -> float:
    return round(value, 3)


def _ranges_contain(have: tuple[tuple[int, int], ...], want: tuple[tuple[int, int], ...]) -> bool:
    return all(any(b <= w_b and w_e <= e for b, e in have) for w_b, w_e in want)


def _parse_ranges(flag: str, item: str, text: str) -> tuple[tuple[int, int], ...]:
    inner = text[1:-1].strip()
    ranges = []
    for part in filter(None, (p.strip() for p in inner.split(","))):
        begin, dash, end = part.partition("-")
        if not dash or not begin.strip().isdigit() or not end.strip().isdigit():
            raise ResourceSyntaxError(
                flag, item, f"range {part!r} is not BEGIN-END, e.g. [31000-31100]"
            )
        b, e = int(begin), int(end)
        if b > e:
            raise ResourceSyntaxError(flag, item, f"range {part!r} ends before it begins")
        ranges.append((b, e))
    return normalise(ranges)


def _parse_value(flag: str, item: str, text: str) -> Value | str:
    """Parses one value in Mesos's text syntax; returns a str for TEXT."""
    text = text.strip()
    if text.startswith("["):
        if not text.endswith("]"):
            raise ResourceSyntaxError(flag, item, "a range list must end with ']'")
        return _parse_ranges(flag, item, text)
    if text.startswith("{"):
        if not text.endswith("}"):
            raise ResourceSyntaxError(flag, item, "a set must end with '}'")
        return frozenset(filter(None, (p.strip() for p in text[1:-1].split(","))))
    scalar = _scalar(text)
    if scalar is not None:
        return scalar
    if not _TEXT.match(text):
        raise ResourceSyntaxError(
            flag, item, "text values may only use letters, digits and '_', '/', '.', '-'"
        )
    return text


def _split_items(text: str) -> list[str]:
    return [item.strip() for item in text.split(";") if item.strip()]


def parse_attributes(text: str) -> list[dict[str, Any]]:
    """Parses ``mesos-agent --attributes`` text into v1 JSON Attribute dicts.

    Args:
        text: ``name:value`` items separated by ``;``, e.g. ``"rack:r1;gpu_model:V100"``.

    Returns:
        TEXT, SCALAR and RANGES attributes in the order given (numeric-looking text is SCALAR,
        as in Mesos).

    Raises:
        ResourceSyntaxError: an item has no ``:``, a SET value, or characters Mesos rejects.
    """
    attributes: list[dict[str, Any]] = []
    for item in _split_items(text):
        name, colon, raw = item.partition(":")
        name = name.strip()
        if not colon or not name or not _TEXT.match(name):
            raise ResourceSyntaxError("attributes", item, "expected NAME:VALUE, e.g. rack:r1")
        value = _parse_value("attributes", item, raw)
        if isinstance(value, str):
            attributes.append({"name": name, "type": "TEXT", "text": {"value": value}})
        elif isinstance(value, float):
            attributes.append({"name": name, "type": "SCALAR", "scalar": {"value": value}})
        elif isinstance(value, tuple):
            attributes.append({"name": name, "type": "RANGES", "ranges": _ranges_json(value)})
        else:
            raise ResourceSyntaxError("attributes", item, "Mesos has no SET attributes; use text")
    return attributes


def attributes_summary(attributes: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Renders JSON attributes the way ``/master/state`` does: ``{"rack": "r1", "n": 4.0}``."""
    out: dict[str, Any] = {}
    for attr in attributes:
        kind = attr.get("type")
        if kind == "TEXT":
            out[attr["name"]] = attr["text"]["value"]
        elif kind == "SCALAR":
            out[attr["name"]] = attr["scalar"]["value"]
        elif kind == "RANGES":
            out[attr["name"]] = _ranges_text(_ranges_from_json(attr["ranges"]))
    return out


def _ranges_json(ranges: tuple[tuple[int, int], ...]) -> dict[str, Any]:
    return {"range": [{"begin": b, "end": e} for b, e in ranges]}


def _ranges_from_json(ranges: Mapping[str, Any]) -> tuple[tuple[int, int], ...]:
    return normalise((int(r["begin"]), int(r["end"])) for r in ranges.get("range", []))


def _ranges_text(ranges: tuple[tuple[int, int], ...]) -> str:
    return "[" + ", ".join(f"{b}-{e}" for b, e in ranges) + "]"


def _format_scalar(value: float) -> str:
    return f"{value:g}" if value == int(value) else f"{value:.3f}".rstrip("0")


class Resources:
    """An immutable bag of Mesos resources keyed by (name, role).

    Build one with :meth:`parse` (flag text) or :meth:`from_json` (v1 JSON list); combine with
    ``+`` and ``-``; test containment with :meth:`contains`.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[Key, Value] | None = None) -> None:
        cleaned: dict[Key, Value] = {}
        for key, value in (items or {}).items():
            if isinstance(value, float):
                value = _round(value)
            if value:
                cleaned[key] = value
        self._items = cleaned

    # -- construction ----------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> Resources:
        """Parses ``mesos-agent --resources`` text (or the JSON list form Mesos also accepts).

        Raises:
            ResourceSyntaxError: an item is not ``name[(role)]:value`` or a value is malformed.
        """
        if text.strip().startswith("[{") or text.strip() == "[]":
            try:
                return cls.from_json(json.loads(text))
            except (ValueError, KeyError, TypeError) as exc:
                raise ResourceSyntaxError("resources", text[:40], f"bad JSON: {exc}") from None
        items: dict[Key, Value] = {}
        for item in _split_items(text):
            head, colon, raw = item.partition(":")
            match = _NAME.match(head.strip())
            if not colon or not match:
                raise ResourceSyntaxError("resources", item, "expected NAME[(ROLE)]:VALUE")
            value = _parse_value("resources", item, raw)
            if isinstance(value, str):
                raise ResourceSyntaxError(
                    "resources", item, "a resource value is a number, [a-b] ranges or {x,y} set"
                )
            if isinstance(value, float) and value < 0:
                raise ResourceSyntaxError("resources", item, "a scalar resource cannot be negative")
            key = (match.group(1), match.group(2) or _DEFAULT_ROLE)
            if key in items:
                raise ResourceSyntaxError("resources", item, f"{key[0]} is given twice")
            items[key] = value
        return cls(items)

    @classmethod
    def from_json(cls, resources: Iterable[Mapping[str, Any]]) -> Resources:
        """Builds a bag from v1 JSON Resource dicts (duplicates are added up).

        Raises:
            KeyError, ValueError, TypeError: a dict lacks its type's value field.
        """
        bag = cls()
        for res in resources:
            role = reservation_key(res)
            kind = res.get("type", "SCALAR")
            if kind == "SCALAR":
                value: Value = float(res["scalar"]["value"])
            elif kind == "SET":
                value = frozenset(str(i) for i in res["set"].get("item", []))
            elif kind == "RANGES":
                value = _ranges_from_json(res["ranges"])
            else:
                raise ValueError(f"unknown resource type {kind!r} for {res.get('name')!r}")
            bag = bag + cls({(str(res["name"]), role): value})
        return bag

    # -- arithmetic ------------------------------------------------------------------------------

    def __add__(self, other: Resources) -> Resources:
        items = dict(self._items)
        for key, value in other._items.items():
            have = items.get(key)
            if have is None:
                items[key] = value
            elif isinstance(have, float) and isinstance(value, float):
                items[key] = have + value
            elif isinstance(have, frozenset) and isinstance(value, frozenset):
                items[key] = have | value
            elif isinstance(have, tuple) and isinstance(value, tuple):
                items[key] = normalise(have + value)
            else:
                raise ValueError(f"resource {key[0]!r} has two different types")
        return Resources(items)

    def __sub__(self, other: Resources) -> Resources:
        items = dict(self._items)
        for key, value in other._items.items():
            have = items.get(key)
            if have is None:
                continue
            if isinstance(have, float) and isinstance(value, float):
                items[key] = max(0.0, have - value)
            elif isinstance(have, frozenset) and isinstance(value, frozenset):
                items[key] = have - value
            elif isinstance(have, tuple) and isinstance(value, tuple):
                items[key] = subtract(have, value)
        return Resources(items)

    def contains(self, other: Resources) -> bool:
        """True when every resource in ``other`` is available in this bag."""
        for key, want in other._items.items():
            have = self._items.get(key)
            if have is None:
                return False
            if isinstance(want, float):
                if not isinstance(have, float) or _round(have - want) < 0:
                    return False
            elif isinstance(want, frozenset):
                if not isinstance(have, frozenset) or not want <= have:
                    return False
            elif not isinstance(have, tuple) or not _ranges_contain(have, want):
                return False
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Resources) and self._items == other._items

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def __bool__(self) -> bool:
        return bool(self._items)

    # -- queries ---------------------------------------------------------------------------------

    def names(self) -> set[str]:
        """The resource names present, any role."""
        return {name for name, _ in self._items}

    def scalar(self, name: str) -> float:
        """The total of a SCALAR resource over all roles (0 when absent)."""
        return _round(
            sum(v for (n, _), v in self._items.items() if n == name and isinstance(v, float))
        )

    def set_items(self, name: str) -> frozenset[str]:
        """The union of a SET resource's items over all roles."""
        out: frozenset[str] = frozenset()
        for (n, _), value in self._items.items():
            if n == name and isinstance(value, frozenset):
                out |= value
        return out

    def to_json(
        self, refinement: bool = False, allocated: str | None = None
    ) -> list[dict[str, Any]]:
        """Renders the bag as v1 JSON Resource dicts (SET items sorted, as strings).

        Args:
            refinement: reservations as ``reservations`` stacks (frameworks with
                ``RESERVATION_REFINEMENT``) rather than ``role`` (+ ``reservation``).
            allocated: the role the resources are allocated to (``allocation_info``, which
                the master adds for ``MULTI_ROLE`` frameworks).
        """
        out = []
        for (name, role), value in self._items.items():
            res: dict[str, Any] = {"name": name}
            if isinstance(value, float):
                res.update(type="SCALAR", scalar={"value": value})
            elif isinstance(value, frozenset):
                res.update(type="SET", set={"item": sorted(value, key=_natural)})
            else:
                res.update(type="RANGES", ranges=_ranges_json(value))
            res.update(reservation_json(role, refinement))
            if allocated is not None:
                res["allocation_info"] = {"role": allocated}
            out.append(res)
        return out

    def select(self, keep: Callable[[str, str], bool]) -> Resources:
        """The part of the bag whose ``(name, reservation)`` keys ``keep`` accepts."""
        return Resources({k: v for k, v in self._items.items() if keep(*k)})

    def popped(self) -> Resources:
        """The bag with each reservation's last layer removed: what an ``UNRESERVE`` gives
        back (and what a ``RESERVE`` takes from)."""
        bag = Resources()
        for (name, role), value in self._items.items():
            below = role.rsplit(",", 1)[0] if "," in role else _DEFAULT_ROLE
            bag = bag + Resources({(name, below): value})
        return bag

    def by_reservation(self) -> dict[str, Resources]:
        """The bag split by reservation key (``"*"``: unreserved)."""
        out: dict[str, dict[Key, Value]] = {}
        for key, value in self._items.items():
            out.setdefault(key[1], {})[key] = value
        return {k: Resources(v) for k, v in out.items()}

    def summary(self) -> dict[str, Any]:
        """Renders the bag as ``/master/state`` does: ``{"cpus": 4.0, "gpu_ids": "{0, 1}"}``."""
        out: dict[str, Any] = {}
        for (name, _), value in self._items.items():
            if isinstance(value, float):
                out[name] = _round(out.get(name, 0.0) + value)
            elif isinstance(value, frozenset):
                out[name] = "{" + ", ".join(sorted(value, key=_natural)) + "}"
            else:
                out[name] = _ranges_text(value)
        return out

    def __str__(self) -> str:
        parts = []
        for (name, role), value in self._items.items():
            label = name if role == _DEFAULT_ROLE else f"{name}({_role_text(role)})"
            if isinstance(value, float):
                parts.append(f"{label}:{_format_scalar(value)}")
            elif isinstance(value, frozenset):
                parts.append(f"{label}:{{{', '.join(sorted(value, key=_natural))}}}")
            else:
                parts.append(f"{label}:{_ranges_text(value)}")
        return "; ".join(parts)

    def __repr__(self) -> str:
        return f"Resources({str(self)!r})"


def _natural(item: str) -> tuple[int, int | str]:
    """Sorts numeric SET items numerically ("2" before "10") and the rest after them."""
    return (0, int(item)) if item.isdigit() else (1, item)


def _role_text(key: str) -> str:
    """A reservation key as Mesos prints it in messages (``[(STATIC,dlc)]``) for non-static."""
    if "," not in key and not key.startswith("+"):
        return key
    layers = ",".join(
        f"({'DYNAMIC' if k.startswith('+') else 'STATIC'},{k.lstrip('+')})" for k in key.split(",")
    )
    return f"reservations: [{layers}]"
