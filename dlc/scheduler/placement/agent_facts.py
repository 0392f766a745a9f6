"""What placement reads of an agent: its attributes, topology, GPU vendor and driver.

:func:`agent_text`, :func:`agent_vendor`, :func:`default_topology_of` and
:func:`default_driver_ok` read an agent's attributes; :func:`gpu_facts` gives chosen GPUs'
UUIDs and device minors from its decoded topology.
"""

from __future__ import annotations

import functools

from dlc.errors import DlcError
from dlc.images import driver_supports
from dlc.topology.model import Topology
from dlc.topology.node_config import (
    ATTR_DRIVER,
    ATTR_ROCM,
    ATTR_TOPOLOGY,
    ATTR_VENDOR,
    parse_agent_attributes,
    topology_from_attributes,
)
from dlc.topology.node_config import ATTR_MODEL as ATTR_GPU_MODEL

# The agent attribute names (ATTR_*) are node-config's: one source, imported by the callers
# of this module from here as before.


def gpu_facts(
    topology: Topology | None, ids: tuple[int, ...]
) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The UUIDs and device minors of GPUs ``ids`` (in that order) from a decoded topology.

    Each list is all-or-nothing: one GPU without the fact empties it, so the executor
    never mixes scheduler facts with its own ``/proc`` reading.
    """
    if topology is None:
        return (), ()
    by_index = {g.index: g for g in topology.gpus}
    gpus = [by_index.get(i) for i in ids]
    uuids = tuple(g.uuid for g in gpus if g is not None and g.uuid)
    minors = tuple(g.minor for g in gpus if g is not None and g.minor is not None)
    return (uuids if len(uuids) == len(ids) else ()), (minors if len(minors) == len(ids) else ())


def agent_vendor(attributes: dict[str, str], topology: Topology | None) -> str:
    """The GPU vendor of an agent: its topology's, else ``gpu_vendor``, else ``nvidia``."""
    if topology is not None and topology.gpus:
        return topology.vendor
    return (agent_text(attributes, ATTR_VENDOR) or "nvidia").lower()


@functools.lru_cache(maxsize=4096)
def _read_attribute(name: str, value: str) -> str:
    try:
        info = parse_agent_attributes({name: value})
    except DlcError:  # hand-written or foreign attribute: use it as it stands
        return value
    known = {ATTR_GPU_MODEL: info.gpu_model, ATTR_DRIVER: info.driver_version}
    known |= {ATTR_VENDOR: info.gpu_vendor, ATTR_ROCM: info.rocm_version}
    return known.get(name) or value


def agent_text(attributes: dict[str, str], name: str) -> str | None:
    """A DLC text attribute without node-config's ``v`` prefix (``v535.1`` -> ``535.1``)."""
    value = attributes.get(name)
    return None if value is None else _read_attribute(name, value)


@functools.lru_cache(maxsize=4096)
def _decode_topology(text: str) -> Topology | None:
    try:
        return topology_from_attributes({ATTR_TOPOLOGY: text})
    except DlcError:  # a bad attribute must not stop placement: treat as unknown
        return None


def default_topology_of(attributes: dict[str, str]) -> Topology | None:
    """Decode an agent's ``dlc_topo`` attribute (cached: 1,000 agents share few layouts)."""
    text = attributes.get(ATTR_TOPOLOGY)
    return _decode_topology(text) if text else None


def default_driver_ok(driver_version: str, cuda_version: str) -> bool:
    """The image catalog's driver/CUDA rule (unknown version strings: let the executor decide)."""
    try:
        return bool(driver_supports(driver_version, cuda_version))
    except DlcError:
        return True
