"""``bench/svg_compact.py``: a matplotlib SVG in fewer bytes draws the same picture
(``bench/sim_variants_table.py`` writes ``docs/images/sim-variants-diff.svg`` through it)."""

from __future__ import annotations

import io
import math
import random
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import cairosvg
import matplotlib
import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import svg_compact  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _subpaths(data: str) -> list[list[tuple[float, float]]]:
    """Compact path data (relative ``m``/``l``/``z``) back as absolute points per subpath."""
    tokens = re.findall(r"[mlz]|-?(?:\d+\.?\d*|\.\d+)", data)
    paths: list[list[tuple[float, float]]] = []
    x = y = 0.0
    i, command = 0, ""
    while i < len(tokens):
        if tokens[i] in ("m", "l", "z"):
            command = tokens[i]
            i += 1
            if command == "z":
                x, y = paths[-1][0]
            continue
        x, y = x + float(tokens[i]), y + float(tokens[i + 1])
        if command == "m":
            paths.append([])
            command = "l"  # the pairs after a moveto are linetos
        paths[-1].append((x, y))
        i += 2
    return paths


def _distance(point, a, b) -> float:
    (px, py), (ax, ay), (bx, by) = point, a, b
    dx, dy = bx - ax, by - ay
    t = max(0.0, min(1.0, ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy or 1.0)))
    return math.hypot(px - ax - t * dx, py - ay - t * dy)


def _matplotlib_data(paths: list[list[tuple[float, float]]], closed: set[int]) -> str:
    out = []
    for n, points in enumerate(paths):
        out += [f"M {points[0][0]} {points[0][1]}"] + [f"L {x} {y}" for x, y in points[1:]]
        out += ["z"] if n in closed else []
    return " \n".join(out) + " \n"


def test_path_data_comes_back_as_the_points_on_the_grid(monkeypatch):
    monkeypatch.setattr(svg_compact, "TOLERANCE", 0.0)
    rng = random.Random(7)
    for _ in range(200):
        sizes = [rng.randint(1, 12) for _ in range(rng.randint(1, 3))]
        paths = [[(rng.uniform(-900, 900), rng.uniform(-9, 900)) for _ in range(n)] for n in sizes]
        closed = {n for n in range(len(paths)) if rng.random() < 0.5}
        got = _subpaths(svg_compact.compact_path(_matplotlib_data(paths, closed)))
        want = [[(round(x * 10) / 10, round(y * 10) / 10) for x, y in p] for p in paths]
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert np.allclose(g, w, atol=1e-9), (g, w)


def test_a_simplified_curve_keeps_its_ends_and_every_vertex_under_half_a_point():
    rng = random.Random(11)
    for _ in range(50):
        y, points = 100.0, []
        for step in range(131):  # the plot's curves: a step every 1.37 points, jagged or flat
            y += rng.choice([0.0, 0.0, rng.uniform(-3, 3), rng.uniform(-0.2, 0.2)])
            points.append((47.58 + 1.3696 * step, y))
        (kept,) = _subpaths(svg_compact.compact_path(_matplotlib_data([points], set())))
        assert len(kept) < len(points)
        assert np.allclose([kept[0], kept[-1]], [points[0], points[-1]], atol=0.051)
        for point in points:
            gap = min(_distance(point, a, b) for a, b in zip(kept, kept[1:], strict=False))
            assert gap <= svg_compact.TOLERANCE + 0.075 < 0.5, (point, gap)
    straight = [(x, 2.0 * x) for x in range(40)]
    assert _subpaths(svg_compact.compact_path(_matplotlib_data([straight], set()))) == [
        [(0.0, 0.0), (39.0, 78.0)]
    ]


def test_path_data_with_other_commands_is_left_as_written():
    curve = "M 0 0 \nC 1.123456 1 2 2 3 3 \nz\n"
    assert svg_compact.compact_path(curve) == curve
    assert svg_compact.compact_path("M 1 2 3 4") == "M 1 2 3 4"  # an implicit lineto


def _figure_svg() -> str:
    matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "test"})
    rng = np.random.default_rng(3)
    fig, axes = plt.subplots(2, 2, figsize=(8, 5), sharex=True)
    x = np.arange(131)
    for n, ax in enumerate(axes.flat):
        mean = np.cumsum(rng.normal(0, 0.05, 131)) * (n + 1)
        ax.fill_between(x, mean - rng.uniform(0, 0.3, 131), mean + rng.uniform(0, 0.3, 131),
                        color="tab:blue", alpha=0.3, lw=0)  # fmt: skip
        ax.plot(x, mean, color="black", lw=1.2)
        ax.plot(x, mean * 0.8, color="tab:orange", lw=1.0, ls="--")
        ax.axhline(-0.25, color="red", lw=0.6, ls="--")
        ax.set_title(f"trace {n}: 130% {mean[-1]:+.2f}, worst {mean.min():+.2f}", fontsize=8)
    out = io.StringIO()
    fig.savefig(out, format="svg", metadata={"Date": None})
    plt.close(fig)
    return out.getvalue()


def _pixels(svg: str) -> np.ndarray:
    png = cairosvg.svg2png(bytestring=svg.encode(), scale=2)
    return np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=int)


def test_a_matplotlib_figure_draws_the_same_in_under_half_the_bytes():
    written = _figure_svg()
    small = svg_compact.compact_svg(written)
    assert len(small) < len(written) / 2
    root = ET.fromstring(small)
    ids = {e.get("id") for e in root.iter() if e.get("id")}
    named = re.findall(r'href="#([^"]+)"|url\(#([^)]+)\)', small)
    assert named and {a or b for a, b in named} <= ids  # every reference still resolves
    assert svg_compact.compact_svg(small).count("<path") == small.count("<path")  # idempotent
    before, after = _blocks(_pixels(written)), _blocks(_pixels(small))
    # edges move by under half a point (6.9 here at most); one curve, band or axis line left
    # out changes some block by 17 or more
    assert np.abs(before - after).max() < 12


def _blocks(pixels: np.ndarray, size: int = 16) -> np.ndarray:
    """Mean grey of each ``size``-pixel square (8 points at scale 2)."""
    h, w = (n // size * size for n in pixels.shape)
    return pixels[:h, :w].reshape(h // size, size, w // size, size).mean(axis=(1, 3))
