"""Parse openb node and pod rows (the FGD paper's ``alibaba-gpu-v2023`` lists).

Pure: rows come in as mappings of column name to text (what :class:`csv.DictReader`
yields); files are read by :mod:`dlc.sim.io`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dlc.errors import FieldError

#: thousandths of one GPU
MILLI = 1000
#: the most GPUs an openb node has
MAX_GPUS_PER_NODE = 8

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


@dataclass(frozen=True)
class NodeSpec:
    """One machine: CPU in thousandths, host memory in MiB, GPUs and their model."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True)
class PodSpec:
    """One task: ``num_gpu`` GPUs of ``gpu_milli`` thousandths each (< 1000: a share).

    ``gpu_models`` is the set of allowed GPU models; empty means any model.
    """

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_models: frozenset[str] = frozenset()

    @property
    def total_gpu_milli(self) -> int:
        """GPU thousandths the pod asks for in all."""
        return self.num_gpu * self.gpu_milli

    @property
    def is_share(self) -> bool:
        """True for a pod that asks for part of one GPU."""
        return self.num_gpu == 1 and self.gpu_milli < MILLI


def _int_field(row: Mapping[str, str], column: str, where: str) -> int:
    text = (row.get(column) or "").strip()
    try:
        return int(float(text)) if text else 0
    except ValueError:
        raise FieldError(
            f"{where}", f"column {column!r} is {text!r}, not a number; fix the trace file"
        ) from None


def _check_columns(header: Iterable[str], needed: tuple[str, ...], what: str) -> None:
    missing = [c for c in needed if c not in set(header)]
    if missing:
        raise FieldError(
            f"{what}", f"missing column(s) {', '.join(missing)}; expected {', '.join(needed)}"
        )


def parse_nodes(rows: Iterable[Mapping[str, str]], source: str = "node list") -> list[NodeSpec]:
    """Nodes with at least one GPU (CPU-only machines take no part in the openb replay)."""
    nodes: list[NodeSpec] = []
    for i, row in enumerate(rows):
        if i == 0:
            _check_columns(row.keys(), NODE_COLUMNS, source)
        where = f"{source} line {i + 2}"
        gpus = _int_field(row, "gpu", where)
        if gpus < 0 or gpus > MAX_GPUS_PER_NODE:
            raise FieldError(f"{where}", f"gpu={gpus}; a node has 0 to {MAX_GPUS_PER_NODE} GPUs")
        if gpus == 0:
            continue
        nodes.append(
            NodeSpec(
                name=row["sn"],
                cpu_milli=_int_field(row, "cpu_milli", where),
                memory_mib=_int_field(row, "memory_mib", where),
                gpus=gpus,
                model=(row.get("model") or "").strip(),
            )
        )
    if not nodes:
        raise FieldError(f"{source}", "no node with a GPU; give an openb node list")
    return nodes


def _gpu_milli(num_gpu: int, raw: int) -> int:
    # As the paper's pod_csv_to_yaml.py: a GPU pod asks for (0, 1000] per GPU.
    if num_gpu == 0:
        return 0
    return min(max(raw, 0), MILLI)


def parse_pods(rows: Iterable[Mapping[str, str]], source: str = "pod list") -> list[PodSpec]:
    """Pods in file order; ``gpu_spec`` (``A|B``) becomes the allowed model set."""
    pods: list[PodSpec] = []
    for i, row in enumerate(rows):
        if i == 0:
            _check_columns(row.keys(), POD_COLUMNS, source)
        where = f"{source} line {i + 2}"
        num_gpu = _int_field(row, "num_gpu", where)
        if num_gpu < 0 or num_gpu > MAX_GPUS_PER_NODE:
            raise FieldError(f"{where}", f"num_gpu={num_gpu}; use 0 to {MAX_GPUS_PER_NODE}")
        milli = _gpu_milli(num_gpu, _int_field(row, "gpu_milli", where))
        if num_gpu and milli == 0:
            raise FieldError(f"{where}", f"num_gpu={num_gpu} with gpu_milli=0; give gpu_milli > 0")
        if num_gpu > 1 and milli != MILLI:
            raise FieldError(
                f"{where}", f"a {num_gpu}-GPU pod must take whole GPUs (gpu_milli=1000)"
            )
        spec = (row.get("gpu_spec") or "").strip()
        models = frozenset(m for m in spec.split("|") if m) if num_gpu else frozenset()
        pods.append(
            PodSpec(
                name=row["name"],
                # Kubernetes counts a pod without a CPU request as 100m when scoring.
                cpu_milli=_int_field(row, "cpu_milli", where) or 100,
                memory_mib=_int_field(row, "memory_mib", where),
                num_gpu=num_gpu,
                gpu_milli=milli,
                gpu_models=models,
            )
        )
    if not pods:
        raise FieldError(f"{source}", "no pods")
    return pods
