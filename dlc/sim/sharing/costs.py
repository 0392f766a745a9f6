"""What sharing a GPU costs, per backend: measured throughput and the blast radius of a fault.

Every number carries its source. "Total" is the throughput of ``k`` co-located tenants, all
running the same bf16 matmul in a loop, summed, relative to one tenant alone on the GPU with
no sharing mechanism. The simulator assumes each tenant progresses at its asked share times
that total (:meth:`SharingCostModel.rate`): the loss (or, for MPS with small kernels, the gain)
is spread evenly over the tenants, and a half-empty GPU gives nobody more than it asked.

Backends: ``mps`` (one MPS daemon per GPU) and ``time-slicing`` (``shim``, ``watchdog``,
``none``: a CUDA context per process; the shim adds nothing per kernel, row 4b against 4c).
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dlc.errors import FieldError

MPS = "mps"
TIME_SLICING = "time-slicing"
BACKENDS = (MPS, TIME_SLICING)
#: DLC's backend names and the simulator's two kinds (mig is not modelled: not measured)
BACKEND_OF = {
    "mps": MPS,
    "shim": TIME_SLICING,
    "watchdog": TIME_SLICING,
    "none": TIME_SLICING,
    "time-slicing": TIME_SLICING,
}

#: kernel classes by the matmul that measured them
KERNELS = ("large", "medium", "small")
KERNEL_SIZE = {"large": "8192^3", "medium": "4096^3", "small": "1024^3"}

ISSUE = "issue 27 table (H200, driver 580.159.04, CUDA 13.0; 2-8 tenants)"
H200_RUN = "bench/results/gpu/isolation-h200.md (DLC's H200 run, 2026-11-26)"


@dataclass(frozen=True)
class Figure:
    """One relative throughput and where it comes from."""

    value: float
    source: str


def _flat(value: float, note: str, ks: Sequence[int] = (2, 8)) -> dict[int, Figure]:
    return {1: Figure(1.0, "alone, by definition")} | {k: Figure(value, note) for k in ks}


#: total throughput of k tenants / one tenant alone, per (backend, kernel class) and k;
#: between measured k linear, past the last measured k the last value holds
MEASURED: dict[tuple[str, str], dict[int, Figure]] = {
    (MPS, "large"): _flat(0.995, f"{ISSUE}: 650-654 vs alone 652-660 TFLOP/s (-0.5%)"),
    (TIME_SLICING, "large"): _flat(0.92, f"{ISSUE}: 601-608 vs alone 652-660 TFLOP/s (-8%)"),
    (MPS, "small"): _flat(1.9, f"{ISSUE}: 270-300 vs alone 148 TFLOP/s (1.8-2.0x; midpoint)"),
    (TIME_SLICING, "small"): _flat(0.62, f"{ISSUE}: 90-93 vs alone 148 TFLOP/s (-38%)"),
    (MPS, "medium"): {
        1: Figure(648.2 / 656.9, f"{H200_RUN} row 4a k=1 648.2 vs plain 656.9 (row 4c)"),
        2: Figure(664.4 / 656.9, f"{H200_RUN} row 4a k=2 664.4 vs plain 656.9"),
        4: Figure(667.8 / 656.9, f"{H200_RUN} row 4a k=4 667.8 vs plain 656.9"),
    },
    (TIME_SLICING, "medium"): {
        1: Figure(1.0, f"{H200_RUN} row 4b k=1 657.4 vs plain 656.9 (the shim costs nothing)"),
        2: Figure(638.2 / 656.9, f"{H200_RUN} row 4b k=2 638.2 vs plain 656.9"),
        4: Figure(638.2 / 656.9, f"{H200_RUN} row 4b k=4 638.2 vs plain 656.9"),
    },
}


def parse_kernel_mix(text: str) -> dict[str, float]:
    """``large=1,medium=1,small=1`` -> weights summing to 1; bad text is a one-line error."""
    weights: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, eq, value = part.partition("=")
        name = name.strip()
        try:
            weight = float(value)
        except ValueError:
            weight = -1.0
        if not eq or name not in KERNELS or weight < 0:
            raise FieldError(
                "--kernel-mix", f"{part!r} is not KIND=WEIGHT with KIND in {', '.join(KERNELS)}"
            )
        weights[name] = weight
    total = sum(weights.values())
    if total <= 0:
        raise FieldError("--kernel-mix", "all weights are 0; give e.g. large=1,small=1")
    return {k: weights.get(k, 0.0) / total for k in KERNELS}


@dataclass(frozen=True)
class SharingCostModel:
    """Relative throughput per backend, kernel class and tenant count (from :data:`MEASURED`)."""

    table: Mapping[tuple[str, str], Mapping[int, Figure]]

    def total(self, backend: str, kernel: str, k: int) -> float:
        """Total throughput of ``k`` co-located tenants relative to one alone."""
        try:
            points = self.table[(backend, kernel)]
        except KeyError:
            raise FieldError("backend", f"no figures for {backend}/{kernel}") from None
        ks = sorted(points)
        if k <= ks[0]:
            return points[ks[0]].value
        for lo, hi in zip(ks, ks[1:], strict=False):
            if k <= hi:
                a, b = points[lo].value, points[hi].value
                return a + (b - a) * (k - lo) / (hi - lo)
        return points[ks[-1]].value

    def rate(self, backend: str, kernel: str, k: int) -> float:
        """Progress of one of ``k`` tenants relative to its share of an unshared GPU."""
        return self.total(backend, kernel, k)

    def sources(self) -> list[dict]:
        """Every figure with its source (for reports)."""
        return [
            {
                "backend": b,
                "kernel": kern,
                "size": KERNEL_SIZE[kern],
                "k": k,
                "relative_total": round(f.value, 4),
                "source": f.source,
            }
            for (b, kern), pts in self.table.items()
            for k, f in sorted(pts.items())
        ]


def default_model() -> SharingCostModel:
    """The model of the measured figures."""
    return SharingCostModel(MEASURED)


def blast_radius(backend: str, on_gpu: Sequence[int], faulting: int) -> list[int]:
    """Who a fatal fault of ``faulting`` kills among the shares running on its GPU.

    Under one MPS daemon every client of that GPU fails at the same instant (issue 27, rows
    3a and 3c of the H200 run); with a context per process only the faulting one does (row 3b).
    """
    if backend == MPS:
        return [faulting] + [j for j in on_gpu if j != faulting]
    return [faulting]
