"""The one client of the Mesos master's state endpoints (``/master/slaves``, ``/version``).

The framework reads the agents' totals after each (re)registration and now and then
(:func:`fetch_slaves`, fed to the core's inventory); the dashboard's sampler reads them
too, since the scheduler suppresses offers while its queue is empty and offers alone would
leave an idle cluster blank. The real master and DLC's emulator serve the same JSON.
Every reader answers "nothing" (``None`` or ``[]``) rather than raising: nothing in DLC
stops because the master's state cannot be read for a moment.
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


def _get_json(url: str, timeout_s: float) -> object | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310
            return json.loads(resp.read())
    except (OSError, ValueError) as exc:
        log.debug("cannot read %s: %s", url, exc)
        return None


def fetch_slaves(master_url: str, timeout_s: float = 2.0) -> list[dict] | None:
    """``GET <master>/master/slaves`` -> its raw ``slaves`` list (what
    :meth:`~dlc.scheduler.core.facade.SchedulerCore.update_agents` takes and its codec decodes,
    :func:`dlc.mesos.agents.decode_agents`), or ``None`` on no good answer."""
    body = _get_json(f"{master_url}/master/slaves", timeout_s)
    slaves = body.get("slaves") if isinstance(body, dict) else None
    return slaves if isinstance(slaves, list) else None


def fetch_version(master_url: str, timeout_s: float = 2.0) -> dict | None:
    """``GET <master>/version`` as JSON, or ``None`` when it does not answer with JSON."""
    body = _get_json(f"{master_url}/version", timeout_s)
    return body if isinstance(body, dict) else None


def fetch_agents(master_url: str, timeout_s: float = 3.0) -> list[MasterAgent]:
    """The master's agents parsed, or ``[]`` when they cannot be read."""
    slaves = fetch_slaves(master_url, timeout_s)
    return parse_slaves({"slaves": slaves or []})
