"""SVG building blocks of :mod:`dlc.topology.render.picture`: styles, sizes, marks, file output.

Plain functions and constants with no layout state, kept apart so that the layout
module stays readable. :func:`write_svg` and :func:`svg_to_png` are re-exported by
:mod:`dlc.topology.render.picture`, the public entry point.
"""

from __future__ import annotations

from pathlib import Path

from dlc.errors import OutputError

#: NVLink group colours (colour-blind-safe-ish, distinct on white)
PALETTE = ("#2e7d32", "#1565c0", "#e65100", "#6a1b9a", "#00838f", "#c62828", "#5d4037", "#ad1457")
NO_GROUP = "#757575"
CROSS_COLOUR = "#455a64"  # NVLinks joining two differently coloured groups
NO_P2P_COLOUR = "#d32f2f"
EDGE_GREY = "#9e9e9e"
FONT = "DejaVu Sans, Verdana, Arial, sans-serif"

LEAF_W, LEAF_H = 112, 50  # GPU box
NIC_W, NIC_H = 92, 34
SLOT = 124  # horizontal room per leaf
BOX_GAP = 12  # least room between two inner boxes side by side
ROW_GAP = 44  # vertical room for the edges between two tree levels
MARGIN = 24
#: groups with more GPUs than this, fully NVLinked, are drawn as an NVSwitch fabric
FABRIC_MIN_GPUS = 5

BOX_STYLE = {
    "root": ("#fafafa", "#424242"),
    "numa": ("#f3e5f5", "#6a1b9a"),
    "host_bridge": ("#fff8e1", "#f9a825"),
    "switch": ("#e0f7fa", "#00838f"),
    "nic": ("#e3f2fd", "#1565c0"),
}


def text_width(text: str, size: float, bold: bool = False) -> float:
    """Approximate width in pixels of ``text`` at font ``size``."""
    # DejaVu Sans averages ~0.6 em per character (bold ~0.68): enough to size boxes.
    return len(text) * size * (0.68 if bold else 0.6)


LEGEND_KINDS = (
    ("numa", "NUMA node"),
    ("host_bridge", "host bridge"),
    ("switch", "PCIe switch"),
    ("nic", "NIC"),
)


def legend_mark(shape: str, colour: str, x: float, y: float) -> str:
    """The 24-pixel sample drawn before a legend entry: a line, arc, bar or box."""
    if shape in ("line", "dashed"):
        dash = ' stroke-dasharray="6,4"' if shape == "dashed" else ""
        return (
            f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{x + 24:.1f}" y2="{y:.1f}" '
            f'stroke="{colour}" stroke-width="2"{dash}/>'
        )
    if shape == "arc":
        return (
            f'<path d="M {x:.1f} {y - 4:.1f} Q {x + 12:.1f} {y + 10:.1f} {x + 24:.1f} {y - 4:.1f}" '
            f'fill="none" stroke="{colour}" stroke-width="3"/>'
        )
    if shape == "bar":
        return f'<rect x="{x:.1f}" y="{y - 5:.1f}" width="24" height="10" rx="3" fill="{colour}"/>'
    fill, opacity, dash = colour, ' fill-opacity="0.14"', ""
    if shape == "inferred":
        fill, opacity, dash = "white", "", ' stroke-dasharray="4,2"'
    elif shape in BOX_STYLE:
        fill, opacity = BOX_STYLE[shape][0], ""
    return (
        f'<rect x="{x:.1f}" y="{y - 8:.1f}" width="24" height="16" rx="3" fill="{fill}"{opacity} '
        f'stroke="{colour}" stroke-width="1.5"{dash}/>'
    )


def sag(span: float) -> float:
    """How far below the GPU row an arc over ``span`` pixels dips: wider arcs dip deeper."""
    return 18 + span * 0.16


def stroke(nvlinks: int) -> float:
    """Line width of an NVLink arc: thicker with more bonded links, capped."""
    return min(1.5 + 0.75 * nvlinks, 9.0)


def short_model(model: str) -> str:
    """A GPU model short enough for its box (vendor prefixes dropped, then cut)."""
    for prefix in ("NVIDIA ", "Tesla ", "GeForce "):
        model = model.removeprefix(prefix)
    return model if len(model) <= 17 else model[:16] + "…"


def wrap(text: str, width: int) -> list[str]:
    """``text`` split at blanks into lines of at most ``width`` characters (long words kept)."""
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return lines + ([line] if line else [])


def write_svg(svg: str, path: str | Path) -> None:
    """Write an SVG document (from :func:`render_svg`) to ``path``.

    Raises:
        OutputError: the file cannot be written.
    """
    try:
        Path(path).write_text(svg, encoding="utf-8")
    except OSError as exc:
        raise OutputError(f"--svg: cannot write {path}: {exc.strerror or exc}") from None


def svg_to_png(svg: str, path: str | Path, *, scale: float = 1.0) -> None:
    """Convert an SVG document to a PNG file with CairoSVG.

    Raises:
        OutputError: CairoSVG or the cairo library is missing, or the file cannot
            be written.
    """
    try:
        import cairosvg  # imported here: it loads libcairo2, needed only for --png
    except (ImportError, OSError):
        raise OutputError(
            "--png needs CairoSVG and libcairo2: run `make setup` (or apt-get install "
            "libcairo2 && pip install cairosvg), or write --svg instead"
        ) from None
    # Render to memory and write with Python: cairo reports a failed write only as a
    # bare status number ("11"), Python names the reason.
    png = cairosvg.svg2png(bytestring=svg.encode("utf-8"), scale=scale)
    try:
        Path(path).write_bytes(png)
    except OSError as exc:
        raise OutputError(f"--png: cannot write {path}: {exc.strerror or exc}") from None
