"""The cluster's agents as the Mesos master lists them (``GET /master/slaves``).

The scheduler suppresses offers while its queue is empty, so offers alone would
leave an idle cluster blank on the dashboard. The dashboard's sampler therefore
also reads the master's agent list now and then (the real master and DLC's
emulator serve the same JSON) and feeds it to the metrics' agent registry.
"""

from __future__ import annotations

import json
import logging
import re
import urllib.request
from dataclasses import dataclass

log = logging.getLogger(__name__)

_SET_ITEM = re.compile(r"\d+")


@dataclass(frozen=True)
class MasterAgent:
    """One agent from ``/master/slaves``: id, hostname, attributes as text, GPU indices."""

    agent_id: str
    hostname: str
    attributes: dict[str, str]
    gpu_ids: frozenset[int]


def parse_slaves(doc: dict) -> list[MasterAgent]:
    """Agents of a ``/master/slaves`` (or ``/master/state``) document; odd entries are skipped."""
    agents = []
    for entry in doc.get("slaves", ()):
        try:
            attrs = {k: _attr_text(v) for k, v in (entry.get("attributes") or {}).items()}
            ids = (entry.get("resources") or {}).get("gpu_ids", "")
            gpu_ids = frozenset(int(i) for i in _SET_ITEM.findall(str(ids)))
            agents.append(MasterAgent(entry["id"], entry.get("hostname", ""), attrs, gpu_ids))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return agents


def _attr_text(value: object) -> str:
    # The master renders SCALAR attributes as numbers; offers carry them as text without ".0".
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def fetch_agents(master_url: str, timeout_s: float = 3.0) -> list[MasterAgent]:
    """The master's agents, or ``[]`` when it cannot be read (the dashboard then waits
    for offers; nothing else depends on this)."""
    try:
        with urllib.request.urlopen(f"{master_url}/master/slaves", timeout=timeout_s) as resp:
            return parse_slaves(json.loads(resp.read()))
    except (OSError, ValueError) as exc:
        log.debug("cannot list agents at %s: %s", master_url, exc)
        return []
