"""``tkestack``: tkestack gpu-manager's tree walk (baseline).

After ``pkg/algorithm/nvidia/link.go`` (link mode): from every free leaf, walk up the
PCIe tree to the lowest node with at least ``count`` free GPUs; sort those
candidates by level (closest first), then fewest free GPUs (best-fit), then node
id; take the first ``count`` free leaves under the winner, in tree order. NVLink is
not a tree level there, so this baseline ignores NVLink, as the original does.

For one GPU, gpu-manager switches to its fragment mode; approximated here as: the
free leaf whose smallest enclosing group has the fewest free GPUs (best-fit).
Required GPUs are honoured (the original has no such input): the candidate node
must hold them, and they are taken first.
"""

from __future__ import annotations

from dlc.scheduler.allocator.base import AllocationRequest, eligible_gpus
from dlc.scheduler.allocator.prepared import tables_for
from dlc.topology.model import Topology
from dlc.topology.tree import TopologyTree


class TkestackPolicy:
    """Lowest tree node with enough free GPUs, closest level then best-fit."""

    name = "tkestack"

    def allocate(
        self, topology: Topology, free: frozenset[int], request: AllocationRequest
    ) -> tuple[int, ...]:
        """See :class:`dlc.scheduler.allocator.base.Policy`."""
        eligible = eligible_gpus(topology, free, request)
        tree = tables_for(topology).tree
        required, count = request.required, request.count
        if count == 1 and not required:
            return (_fragment_pick(tree, eligible),)
        candidates = set()
        for gpu in sorted(eligible):
            node = tree.gpu_node(gpu)
            while not (
                len(tree.gpus_under(node) & eligible) >= count and required <= tree.gpus_under(node)
            ):
                node = tree.parent(node) or "root"
                if node == "root":
                    break
            candidates.add(node)
        best = min(candidates, key=lambda n: _candidate_key(tree, n, eligible))
        leaves = [g for g in _leaf_order(tree, best) if g in eligible and g not in required]
        return tuple(sorted(required | set(leaves[: count - len(required)])))


def _candidate_key(tree: TopologyTree, node: str, free: frozenset[int]) -> tuple[int, int, str]:
    level = tree.graph.nodes[node]["level"]
    depth_rank = 0 if level is None else int(level)
    return (depth_rank, len(tree.gpus_under(node) & free), node)


def _leaf_order(tree: TopologyTree, node: str) -> list[int]:
    """GPU leaves under ``node`` in depth-first tree order."""
    data = tree.graph.nodes[node]
    if data["kind"] == "gpu":
        return [data["gpu"]]
    order: list[int] = []
    for child in tree.graph.successors(node):
        order.extend(_leaf_order(tree, child))
    return order


def _fragment_pick(tree: TopologyTree, free: frozenset[int]) -> int:
    def key(gpu: int) -> tuple[int, int]:
        node = tree.parent(tree.gpu_node(gpu)) or "root"
        while len(tree.gpus_under(node)) < 2 and node != "root":
            node = tree.parent(node) or "root"
        return (len(tree.gpus_under(node) & free), gpu)

    return min(free, key=key)


POLICY = TkestackPolicy()
