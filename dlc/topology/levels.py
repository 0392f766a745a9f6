"""The PCIe level of every device pair, as printed or inferred (for :mod:`dlc.topology.tree`).

``topo -m`` prints a level for each GPU-GPU and NIC-GPU pair, except that NVLinked
pairs show ``NV#`` instead. :func:`level_matrix` fills those gaps: first with the
tightest ultrametric bound a third device gives, then from CPU/NUMA affinity, else
``SYS``; printed levels are kept as printed.
"""

from __future__ import annotations

from dlc.topology.model import Gpu, PcieLevel, Topology

#: stands for "no bound known yet" in the level matrix
_UNKNOWN = int(PcieLevel.SYS) + 1


def level_matrix(topo: Topology, devices: list[str]) -> tuple[list[list[int]], list[list[bool]]]:
    """Levels between ``devices`` (GPU node ids first, then ``nic:`` ids), gaps inferred.

    Returns:
        ``(matrix, known)``: ``matrix[i][j]`` is the :class:`PcieLevel` value of the
        pair (0 on the diagonal); ``known[i][j]`` is ``False`` where it was inferred.
    """
    matrix, known = _printed_levels(topo, devices)
    _infer_levels(topo, matrix, known)
    return matrix, known


def _printed_levels(topo: Topology, devices: list[str]) -> tuple[list[list[int]], list[list[bool]]]:
    """The printed levels between devices (GPUs first, then NICs); unknown = ``_UNKNOWN``."""
    size = len(devices)
    matrix = [[_UNKNOWN] * size for _ in range(size)]
    known = [[False] * size for _ in range(size)]
    pos = {g.index: i for i, g in enumerate(topo.gpus)}
    for i in range(size):
        matrix[i][i], known[i][i] = 0, True
    for (a, b), link in topo.links.items():
        if link.pcie_level is not None and a in pos and b in pos:
            _set(matrix, known, pos[a], pos[b], int(link.pcie_level))
    nic_pos = {nic.name: len(topo.gpus) + k for k, nic in enumerate(topo.nics)}
    for (nic, gpu), level in topo.nic_levels.items():
        if nic in nic_pos and gpu in pos:
            _set(matrix, known, nic_pos[nic], pos[gpu], int(level))
    return matrix, known


def _set(matrix: list[list[int]], known: list[list[bool]], i: int, j: int, level: int) -> None:
    matrix[i][j] = matrix[j][i] = level
    known[i][j] = known[j][i] = True


def _infer_levels(topo: Topology, matrix: list[list[int]], known: list[list[bool]]) -> None:
    """Fill unknown levels: third-device bound, then CPU/NUMA affinity, else SYS."""
    _close(matrix, known)
    gpu_count = len(topo.gpus)
    for i in range(gpu_count):
        for j in range(i + 1, gpu_count):
            if known[i][j]:
                continue
            same = _same_affinity(topo.gpus[i], topo.gpus[j])
            if (
                same is True
                and matrix[i][j] > PcieLevel.NODE
                and _may_share_node(matrix, known, i, j)
            ):
                matrix[i][j] = matrix[j][i] = int(PcieLevel.NODE)
            elif same is False and matrix[i][j] == _UNKNOWN:
                matrix[i][j] = matrix[j][i] = int(PcieLevel.SYS)
    _close(matrix, known)
    for row in matrix:
        for j, level in enumerate(row):
            if level == _UNKNOWN:
                row[j] = int(PcieLevel.SYS)


def _close(matrix: list[list[int]], known: list[list[bool]]) -> None:
    """Minimax (ultrametric) closure of the unknown entries only.

    Printed levels are facts and stay as printed even if a real machine's matrix
    is not a perfect ultrametric.
    """
    size = len(matrix)
    for k in range(size):
        row_k = matrix[k]
        for i in range(size):
            via = matrix[i][k]
            if via == _UNKNOWN:
                continue
            row_i = matrix[i]
            for j in range(size):
                bound = max(via, row_k[j])
                if bound < row_i[j] and not known[i][j]:
                    row_i[j] = bound


def _may_share_node(matrix: list[list[int]], known: list[list[bool]], i: int, j: int) -> bool:
    """Whether ``i`` and ``j`` on one NUMA node agrees with the printed levels.

    Some outputs give every GPU the same (bogus) CPU affinity; a device close to one
    of them but printed ``SYS`` from the other proves they are on different nodes.
    """
    for k, (to_i, to_j) in enumerate(zip(matrix[i], matrix[j], strict=True)):
        if (to_i <= PcieLevel.NODE and known[j][k] and to_j == PcieLevel.SYS) or (
            to_j <= PcieLevel.NODE and known[i][k] and to_i == PcieLevel.SYS
        ):
            return False
    return True


def _same_affinity(a: Gpu, b: Gpu) -> bool | None:
    """Whether two GPUs share a NUMA node / CPU set; ``None`` when unknown."""
    if a.numa_node is not None and b.numa_node is not None:
        return a.numa_node == b.numa_node
    cpus_a, cpus_b = a.cpus(), b.cpus()
    if cpus_a and cpus_b:
        return cpus_a == cpus_b
    return None
