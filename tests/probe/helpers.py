"""Shared data of the probe tests.

``data/dgx1_v100_synthetic.json`` is a SYNTHETIC sample, not a measurement: its
figures were chosen to match published DGX-1 V100 numbers (NVLink 2 ~24 GB/s per
link and direction, PCIe Gen3 staged copies ~9-10 GB/s, no PCIe P2P between the
two CPU sockets). It pairs with the real DGX-1 V100 ``topo -m`` fixture.
"""

from __future__ import annotations

import copy
import json
import stat
import sys
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
SAMPLE_PATH = DATA / "dgx1_v100_synthetic.json"
SAMPLE_DOC: dict[str, Any] = json.loads(SAMPLE_PATH.read_text())
DGX1_TOPO = "dgx1-v100_nv1-nv2_mlx5_oneflow.txt"


def sample_doc() -> dict[str, Any]:
    """A fresh deep copy of the synthetic sample (tests mutate it)."""
    return copy.deepcopy(SAMPLE_DOC)


def raw_pair(doc: dict[str, Any], src: int, dst: int) -> dict[str, Any]:
    """The pair ``src -> dst`` of a probe document, straight from the JSON."""
    for pair in doc["pairs"]:
        if pair["src"] == src and pair["dst"] == dst:
            return pair
    raise KeyError((src, dst))


def fake_probe(
    folder: Path, stdout: str = "", code: int = 0, stderr: str = "", sleep: float = 0.0
) -> Path:
    """An executable that records its argv in ``argv.json`` and answers like the probe."""
    script = folder / "fake_probe"
    out_file = folder / "stdout.txt"
    out_file.write_text(stdout)
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys, time\n"
        f"json.dump(sys.argv[1:], open({str(folder / 'argv.json')!r}, 'w'))\n"
        f"time.sleep({sleep})\n"
        f"sys.stdout.write(open({str(out_file)!r}).read())\n"
        f"sys.stderr.write({stderr!r})\n"
        f"sys.exit({code})\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def recorded_argv(folder: Path) -> list[str]:
    """The arguments the last :func:`fake_probe` run in ``folder`` received."""
    return json.loads((folder / "argv.json").read_text())
