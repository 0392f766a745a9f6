"""File adapters of the simulator: trace CSVs in, expected results in, JSON out.

Trace files are discovered by glob, so any ``openb_pod_list_<name>.csv`` in the
trace folder is a workload named ``<name>``.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

from dlc.errors import DlcError, FieldError
from dlc.sim.trace import NodeSpec, PodSpec, parse_nodes, parse_pods

#: where the shared traces live relative to a checkout, unless $DLC_TRACES says otherwise
DEFAULT_TRACE_ROOT = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
OPENB_DIR = "alibaba-gpu-v2023"
EXPECTED_DIR = "fgd-expected-results"
POD_PREFIX = "openb_pod_list_"
NODE_FILE = "openb_node_list_gpu_node.csv"


class TraceNotFound(DlcError):
    """A trace folder or file is missing."""


def trace_root(explicit: str | os.PathLike | None = None) -> Path:
    """The folder holding ``alibaba-gpu-v2023/`` (``--trace-dir``, $DLC_TRACES, or shared)."""
    root = Path(explicit or os.environ.get("DLC_TRACES") or DEFAULT_TRACE_ROOT).resolve()
    if not (root / OPENB_DIR).is_dir():
        raise TraceNotFound(f"no {OPENB_DIR}/ under {root}; pass --trace-dir DIR or set DLC_TRACES")
    return root


def available_traces(root: Path) -> list[str]:
    """Names of the openb pod lists present (``default``, ``gpushare100``, ...)."""
    files = sorted((root / OPENB_DIR).glob(f"{POD_PREFIX}*.csv"))
    return [f.name[len(POD_PREFIX) : -len(".csv")] for f in files]


def _rows(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(newline="") as fh:
            return list(csv.DictReader(fh))
    except OSError as exc:
        raise TraceNotFound(f"cannot read {path}: {exc.strerror}") from None


def load_nodes(root: Path) -> list[NodeSpec]:
    """The openb GPU nodes."""
    path = root / OPENB_DIR / NODE_FILE
    return parse_nodes(_rows(path), source=path.name)


def load_pods(root: Path, name: str) -> list[PodSpec]:
    """The pods of trace ``name``; an unknown name lists the ones present."""
    path = root / OPENB_DIR / f"{POD_PREFIX}{name}.csv"
    if not path.is_file():
        have = ", ".join(available_traces(root)) or "none"
        raise FieldError("--trace", f"no trace {name!r} (present: {have})")
    return parse_pods(_rows(path), source=path.name)


#: the expected results' policy labels by our policy names
PAPER_POLICY_LABELS = {
    "random": "01-Random",
    "dotprod": "02-DotProd",
    "clustering": "03-GpuClustering",
    "packing": "04-GpuPacking",
    "bestfit": "05-BestFit",
    "fgd": "06-FGD",
}


def load_expected(root: Path, trace: str) -> dict[str, dict[int, list[float]]]:
    """Published allocation curves: policy -> seed -> 131 values (NaN where missing)."""
    path = root / EXPECTED_DIR / "analysis_allo_discrete.csv"
    if not path.is_file():
        return {}
    labels = {v: k for k, v in PAPER_POLICY_LABELS.items()}
    out: dict[str, dict[int, list[float]]] = {}
    for row in _rows(path):
        if row["workload"] != f"{POD_PREFIX}{trace}" or row["sc_policy"] not in labels:
            continue
        curve = [float(row[str(k)]) if row.get(str(k)) else float("nan") for k in range(131)]
        out.setdefault(labels[row["sc_policy"]], {})[int(row["seed"])] = curve
    return out


def write_json(path: Path, data) -> None:
    """Write ``data`` as indented JSON, creating the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, allow_nan=True) + "\n")


def read_json(path: Path):
    """Read a JSON file written by :func:`write_json`."""
    return json.loads(Path(path).read_text())
