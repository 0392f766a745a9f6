"""Plots of allocation curves (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dlc.sim.metrics import STEPS


def plot_curves(
    curves: dict[str, np.ndarray],
    path: Path,
    title: str,
    published: dict[str, np.ndarray] | None = None,
    start: int = 80,
) -> None:
    """Allocation ratio vs arrived demand; published curves dashed. PNG or SVG by suffix."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # SVG as text that diffs: fonts as text, not paths, and stable element ids
    matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "dlc"})

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=90)
    xs = STEPS[start:]
    for i, (name, ys) in enumerate(curves.items()):
        color = f"C{i}"
        ax.plot(xs, ys[start:], color=color, label=name, lw=1.6)
        if published and name in published:
            ax.plot(xs, published[name][start:], color=color, ls="--", lw=1.0)
    ax.plot(xs, np.minimum(xs, 100), color="grey", lw=0.8, ls=":", label="demand")
    ax.set_xlabel("arrived GPU demand (% of cluster GPUs)")
    ax.set_ylabel("GPU allocation ratio (%)")
    ax.set_title(title + ("  (dashed: published)" if published else ""), fontsize=10)
    ax.set_ylim(start - 5, 100)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
