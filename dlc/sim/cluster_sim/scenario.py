"""Scenario files (YAML): the cluster, the people, the workload and the policies.

Every assumption is a field of the file (``examples/sim/aistation.yaml`` documents each);
:func:`load_scenario` checks them and names the field and the fix of the first bad one.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlc.errors import FieldError

#: what each section must hold: field -> (type, low, high); lists are checked item-wise
_NUM = (int, float)
_SCHEMA: dict[str, dict[str, tuple]] = {
    "cluster": {
        "nodes": (int, 1, 4096), "gpus_per_node": (int, 1, 64),
        "gpu_memory_gib": (_NUM, 1, 1024), "cpus_per_node": (_NUM, 1, 4096),
        "mem_gib_per_node": (_NUM, 1, 1 << 20), "gpu_model": (str, None, None),
        "topology_file": (str, None, None),
    },
    "population": {"groups": (int, 1, 1000), "users_per_group": (int, 1, 10000)},
    "quotas": {
        "guaranteed_gpus": (_NUM, 0, 1e6), "ceiling_gpus": (_NUM, 0, 1e6),
        "scale_with_cluster": (bool, None, None), "reference_gpus": (_NUM, 1, 1e6),
    },
    "sessions": {
        "per_user_per_day": (list, 0, 100), "window_hours": (list, 0, 24),
        "peaks_hours": (list, 0, 24), "peak_width_hours": (_NUM, 0.1, 24),
        "median_hours": (_NUM, 0.01, 100), "sigma": (_NUM, 0, 5), "max_hours": (_NUM, 0.01, 100),
        "sm_duty": (_NUM, 0, 1), "burst_sm": (_NUM, 0, 1), "mem_gib_typical": (_NUM, 0, 1024),
        "mem_over_probability": (_NUM, 0, 1), "mem_over_gib": (list, 0, 1024),
        "share_gib": (_NUM, 0.25, 1024), "patience_minutes": (_NUM, 0, 1e6),
        "cpus": (_NUM, 0.1, 1024), "mem_gib": (_NUM, 0.1, 4096), "priority": (int, -1000, 1000),
        "weekdays_only": (bool, None, None),
    },
    "training": {
        "outstanding_per_user": (int, 0, 100), "think_hours_median": (_NUM, 0, 1000),
        "think_sigma": (_NUM, 0, 5), "gpus": (dict, None, None), "median_hours": (_NUM, 0.01, 1000),
        "sigma": (_NUM, 0, 5), "max_hours": (_NUM, 0.01, 1000), "sm_range": (list, 0, 1),
        "cpus_per_gpu": (_NUM, 0.1, 256), "mem_gib_per_gpu": (_NUM, 0.1, 4096),
        "open_per_user_per_day": (_NUM, 0, 1000), "open_window_hours": (list, 0, 24),
        "open_weekdays_only": (bool, None, None),
    },
    "engine": {
        "offer_delay_s": (_NUM, 0, 3600), "tick_s": (_NUM, 1, 86400), "start_s": (_NUM, 0, 3600),
        "kill_s": (_NUM, 0, 3600), "checkpoint_loss_minutes": (_NUM, 0, 1e4),
    },
    "metrics": {"active_threshold": (_NUM, 0, 1), "slot_s": (_NUM, 1, 3600)},
    "slo": {"session_start_p95_minutes": (_NUM, 0, 1e6), "training_jct_p95_factor": (_NUM, 1, 1e6)},
}  # fmt: skip
#: list fields that must be ``[low, high]`` (windows: low < high)
_PAIRS = {
    "sessions": ("window_hours", "mem_over_gib"),
    "training": ("sm_range", "open_window_hours"),
}
_POLICY_FIELDS = {"quotas": bool, "priorities": bool, "sessions": str, "allocator": str,
                  "replicas": int, "preempt_within": bool,
                  "consolidation_moves_per_hour": int,
                  "fair_share_half_life_s": float, "protect": str}  # fmt: skip
_SESSION_MODES = ("whole", "share", "timeslice")


@dataclass(frozen=True)
class Scenario:
    """A checked scenario file.

    Attributes:
        name: a short label for tables and plots.
        days: virtual days simulated, starting on a Monday at 00:00.
        sections: the checked sections, by name (see ``_SCHEMA``).
        policies: policy name -> its settings (``quotas``, ``priorities``, ``sessions``
            (whole|share|timeslice), ``allocator``, ``replicas``, ``preempt_within``,
            ``consolidation_moves_per_hour``, ``fair_share_half_life_s``, ``protect``:
            ``--protect`` rules, comma-separated, ``normal=30m,low=5m``).
    """

    name: str
    days: float
    sections: dict[str, dict[str, Any]]
    policies: dict[str, dict[str, Any]]

    def __getitem__(self, section: str) -> dict[str, Any]:
        return self.sections[section]

    def with_value(self, path: str, value: Any) -> Scenario:
        """A copy with ``section.field`` set to ``value`` (for sweeps), checked again.

        Raises:
            FieldError: unknown field, or a value out of range.
        """
        section, _, name = path.partition(".")
        if section not in self.sections or name not in _SCHEMA.get(section, {}):
            raise FieldError("--sweep/--set", f"{path!r} is not a field; use SECTION.FIELD")
        sections = copy.deepcopy(self.sections)
        sections[section][name] = value
        _check_section(section, sections[section])
        return Scenario(self.name, self.days, sections, self.policies)


def load_scenario(path: Path) -> Scenario:
    """Read and check a scenario file.

    Raises:
        FieldError: a missing or bad field (named, with its allowed range).
    """
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise FieldError(
            "scenario", f"cannot read {path}: {exc.strerror}; check the path"
        ) from None
    except yaml.YAMLError as exc:
        raise FieldError(
            "scenario", f"{path} is not valid YAML ({exc.__class__.__name__})"
        ) from None
    scenario = parse_scenario(data)
    topo = scenario["cluster"]["topology_file"]
    if topo and not Path(topo).is_absolute():
        scenario["cluster"]["topology_file"] = str(Path(path).parent / topo)
    return scenario


def parse_scenario(data: Any) -> Scenario:
    """Check a scenario given as data (the parsed YAML)."""
    if not isinstance(data, dict):
        raise FieldError("scenario", "must be a mapping with cluster, population, ... sections")
    sections = {}
    for section in _SCHEMA:
        body = data.get(section)
        if not isinstance(body, dict):
            raise FieldError(section, "missing section; copy it from examples/sim/aistation.yaml")
        sections[section] = _check_section(section, dict(body))
    days = data.get("days", 7)
    if not isinstance(days, _NUM) or not 0 < days <= 366:
        raise FieldError("days", f"{days!r} is not a number of days in (0, 366]")
    policies = data.get("policies")
    if not isinstance(policies, dict) or not policies:
        raise FieldError("policies", "missing; define P0..P4 as in examples/sim/aistation.yaml")
    checked = {str(name): _check_policy(str(name), body) for name, body in policies.items()}
    return Scenario(str(data.get("name", "scenario")), float(days), sections, checked)


def _check_section(section: str, body: dict[str, Any]) -> dict[str, Any]:
    schema = _SCHEMA[section]
    for name in body:
        if name not in schema:
            raise FieldError(f"{section}.{name}", f"unknown field; known: {', '.join(schema)}")
    for name, (kind, low, high) in schema.items():
        where = f"{section}.{name}"
        if name not in body:
            raise FieldError(where, "missing; every assumption is a field of the file")
        value = body[name]
        if kind is list:
            if not isinstance(value, list) or not all(isinstance(v, _NUM) for v in value):
                raise FieldError(where, f"{value!r} is not a list of numbers, e.g. [1, 3]")
            values = value
        elif kind is dict:
            if not isinstance(value, dict) or not value:
                raise FieldError(where, "must map GPUs to weights, e.g. {1: 0.5, 8: 0.1}")
            values = []
        elif kind is bool or kind is str:
            if not isinstance(value, kind):
                raise FieldError(where, f"{value!r} is not a {kind.__name__}")
            values = []
        else:
            if isinstance(value, bool) or not isinstance(value, kind):
                raise FieldError(where, f"{value!r} is not a number")
            values = [value]
        for v in values:
            if (low is not None and v < low) or (high is not None and v > high):
                raise FieldError(where, f"{v!r} is out of range; give a value in [{low}, {high}]")
    for name in _PAIRS.get(section, ()):
        pair = body[name]
        strict = name.endswith("window_hours")  # an empty window has no arrivals to spread
        if len(pair) != 2 or not (pair[0] < pair[1] if strict else pair[0] <= pair[1]):
            need = "start < end" if strict else "low <= high"
            raise FieldError(f"{section}.{name}", f"{pair!r}; give [start, end] with {need}")
    return body


def _check_policy(name: str, body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise FieldError(f"policies.{name}", "must be a mapping of settings")
    for key, value in body.items():
        kind = _POLICY_FIELDS.get(key)
        if kind is None:
            known = ", ".join(_POLICY_FIELDS)
            raise FieldError(f"policies.{name}.{key}", f"unknown setting; known: {known}")
        if kind is float and isinstance(value, int):
            value = float(value)  # a whole number of seconds is a float too
        if not isinstance(value, kind) or (kind in (int, float) and isinstance(value, bool)):
            raise FieldError(f"policies.{name}.{key}", f"{value!r} is not a {kind.__name__}")
    mode = body.get("sessions", "whole")
    if mode not in _SESSION_MODES:
        raise FieldError(f"policies.{name}.sessions", f"{mode!r}; use {'|'.join(_SESSION_MODES)}")
    from dlc.scheduler.placement.model import check_policy
    from dlc.scheduler.tenancy.preemption import parse_protection

    check_policy(body.get("allocator", "first-fit"))
    parse_protection(r.strip() for r in body.get("protect", "").split(",") if r.strip())
    return body
