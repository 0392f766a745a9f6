"""Ports from offers and the environment that lets a gang's nodes find each other (pure).

A multi-node job (``--nodes N``) is useless unless its nodes can reach one another: PyTorch's
``torchrun`` needs the address and a port of node 0 (its static rendezvous), TensorFlow's
multi-worker strategies need every worker's ``host:port`` in ``TF_CONFIG``. DLC takes one port
per node from that node's offer (the agent's ``ports`` RANGES resource, so no other Mesos task
is handed it), launches the node's container on the host network (so the port and the
collective library's own connections are reachable from the peers) and gives every node:

==================  ===========================================================
``MASTER_ADDR``     node 0's agent address (the IP its agent advertises)
``MASTER_PORT``     the port DLC took on node 0
``WORLD_SIZE``      number of nodes (one launcher per node; ``torchrun`` sets the
                    per-process world size itself)
``NODE_RANK``       this node's rank, also as ``RANK``
``NPROC_PER_NODE``  GPUs per node (one process per GPU)
``PET_*``           the same for ``torchrun`` without flags (``PET_NNODES``,
                    ``PET_NODE_RANK``, ``PET_NPROC_PER_NODE``, ``PET_MASTER_ADDR``,
                    ``PET_MASTER_PORT``: torchrun reads its options from them)
``TF_CONFIG``       ``{"cluster": {"worker": [host:port, ...]}, "task": {...}}``
``DLC_PORTS``       the ports taken for this task, comma-separated
==================  ===========================================================
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

Ranges = tuple[tuple[int, int], ...]


def take_port(ranges: Ranges, taken: Iterable[int]) -> int | None:
    """The lowest port in ``ranges`` not in ``taken``, or ``None`` when all are taken."""
    used = set(taken)
    for begin, end in ranges:
        for port in range(begin, end + 1):
            if port not in used:
                return port
    return None


def ports_needed(nodes: int, interactive: bool = False) -> int:
    """Ports each task takes from its offer: one for a gang's rendezvous, one for an
    environment's web server (the last one taken)."""
    return (1 if nodes > 1 else 0) + (1 if interactive else 0)


def gang_env(rank: int, gpus_per_node: int, peers: Sequence[str]) -> dict[str, str]:
    """The rendezvous variables of node ``rank`` of a gang whose nodes listen at ``peers``.

    Args:
        rank: this node's rank (0 is the master).
        gpus_per_node: GPUs each node has (processes per node).
        peers: ``address:port`` of every node, in rank order.
    """
    nodes = len(peers)
    master_addr, _, master_port = peers[0].rpartition(":")
    env = {
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": master_port,
        "WORLD_SIZE": str(nodes),
        "NODE_RANK": str(rank),
        "RANK": str(rank),
        "NPROC_PER_NODE": str(gpus_per_node),
        "TF_CONFIG": json.dumps(
            {"cluster": {"worker": list(peers)}, "task": {"type": "worker", "index": rank}},
            separators=(",", ":"),
        ),
    }
    env.update(
        {
            "PET_NNODES": str(nodes),
            "PET_NODE_RANK": str(rank),
            "PET_NPROC_PER_NODE": str(gpus_per_node),
            "PET_MASTER_ADDR": master_addr,
            "PET_MASTER_PORT": master_port,
        }
    )
    return env
