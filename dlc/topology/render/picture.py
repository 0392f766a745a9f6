"""An SVG picture of a machine's topology, written by hand (no drawing library).

Layout: the PCIe tree top-down (machine, NUMA nodes, host bridges, PCIe switches)
with straight grey edges, and the GPU and NIC leaves in one row at the bottom.
NVLink is not part of the tree (DGX-1 links GPUs across sockets), so it is drawn
under the leaf row, where it crosses no tree edge: one curved arc per NVLinked
pair, coloured by NVLink group, as thick as its link count and labelled ``NV#``.
A group in which every pair is NVLinked and which has more than four GPUs is
an NVSwitch system (HGX/DGX): it gets one fabric bar instead of n(n-1)/2 arcs.

:func:`svg_to_png` converts with CairoSVG (pure Python over the system's
libcairo2, which ``make setup`` installs), imported only when a PNG is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import escape

import networkx as nx

from dlc.topology.discovery.discover import describe_source
from dlc.topology.model import Topology, format_cpu_list
from dlc.topology.render.report import TopologyFacts, fabric_words, is_complete, nvlink_graph
from dlc.topology.render.svg import (
    BOX_GAP,
    BOX_STYLE,
    CROSS_COLOUR,
    EDGE_GREY,
    FABRIC_MIN_GPUS,
    FONT,
    LEAF_H,
    LEAF_W,
    LEGEND_KINDS,
    MARGIN,
    NIC_H,
    NIC_W,
    NO_GROUP,
    NO_P2P_COLOUR,
    PALETTE,
    ROW_GAP,
    SLOT,
    legend_mark,
    sag,
    short_model,
    stroke,
    svg_to_png,
    text_width,
    wrap,
    write_svg,
)

__all__ = [
    "CROSS_COLOUR",
    "FABRIC_MIN_GPUS",
    "PALETTE",
    "colour_groups",
    "render_svg",
    "svg_to_png",
    "write_svg",
]


@dataclass
class _Box:
    node: str
    kind: str
    x: float  # centre
    y: float  # top
    w: float
    h: float
    lines: tuple[str, ...]

    @property
    def bottom(self) -> float:
        return self.y + self.h


def render_svg(facts: TopologyFacts) -> str:
    """The SVG document (a string) picturing ``facts``: tree, NVLink overlay, legend, title."""
    return _Layout(facts).svg()


def colour_groups(facts: TopologyFacts) -> list[frozenset[int]]:
    """GPU sets that share a colour: NVLink groups, split into their fully linked cliques
    when those are disjoint and cover the group (DGX-1: the two quads of the cube-mesh)."""
    out = []
    graph = nvlink_graph(facts.topo)
    for group in facts.nvlink_groups:
        if is_complete(facts.topo, group):
            out.append(group)
            continue
        cliques = [frozenset(c) for c in nx.find_cliques(graph.subgraph(group)) if len(c) > 2]
        disjoint = sum(len(c) for c in cliques) == len(frozenset().union(*cliques))
        if cliques and disjoint and frozenset().union(*cliques) == group:
            out += sorted(cliques, key=min)
        else:
            out.append(group)
    return out


@dataclass(frozen=True)
class _Arc:
    a: int
    b: int
    label: str
    colour: str
    width: float
    dashed: bool = False


class _Layout:
    """Places the boxes and writes the SVG elements."""

    def __init__(self, facts: TopologyFacts):
        self.facts = facts
        self.topo: Topology = facts.topo
        self.graph = facts.tree.graph
        self.group_of: dict[int, int] = {
            gpu: i for i, group in enumerate(colour_groups(facts)) for gpu in group
        }
        self.fabrics = [
            g
            for g in facts.nvlink_groups
            if len(g) >= FABRIC_MIN_GPUS and is_complete(self.topo, g)
        ]
        self.boxes: dict[str, _Box] = {}
        self._place()
        self.title_lines = wrap(facts.summary, int((self.width - 2 * MARGIN) / (13 * 0.6)))
        top = MARGIN + 34 + 18 * len(self.title_lines)
        self.leaf_y += top
        for box in self.boxes.values():
            box.y += top
        self.arcs = self._arc_list()
        self.ports = self._ports()
        arc_depth = max((sag(self._span(arc)) for arc in self.arcs), default=0.0)
        arc_depth = max(arc_depth, 90.0 if self.fabrics else 0.0)
        self.legend_y = self.leaf_y + LEAF_H + arc_depth + (40 if arc_depth else 24)
        self.legend = self._legend_items()
        self.height = self.legend_y + 22 * self._legend_rows() + 10

    # ------------------------------------------------------------ placement
    def _depth(self) -> dict[str, int]:
        depth = {"root": 0}
        order = ["root"]
        for node in order:
            for child in self.facts.children(node):
                depth[child] = depth[node] + 1
                order.append(child)
        return depth

    def _box_size(self, node: str, lines: tuple[str, ...]) -> tuple[float, float]:
        """A box wide enough for its own text (a leaf at least the standard size)."""
        kind = self.graph.nodes[node].get("kind", "")
        sizes = [13 if i == 0 and kind == "gpu" else 11 for i in range(len(lines))]
        text = max(
            text_width(line, s, i == 0)
            for i, (line, s) in enumerate(zip(lines, sizes, strict=True))
        )
        if self.facts.children(node):
            return text + 16, 15 * len(lines) + 11
        w, h = (LEAF_W, LEAF_H) if kind == "gpu" else (NIC_W, NIC_H)
        return max(w, text + 12), h

    def _place(self) -> None:
        """Give every subtree a band as wide as its leaves or its own box, whichever is wider.

        Bands never overlap, and each box is centred in its band, so no two boxes (or
        their labels) can overlap however long a label or CPU list is.
        """
        depth = self._depth()
        band: dict[str, float] = {}
        sizes: dict[str, tuple[float, float]] = {}
        lines_of: dict[str, tuple[str, ...]] = {}

        def measure(node: str) -> float:
            lines_of[node] = self._lines(node)
            sizes[node] = self._box_size(node, lines_of[node])
            children = self.facts.children(node)
            own = max(SLOT, sizes[node][0] + SLOT - LEAF_W) if not children else sizes[node][0]
            band[node] = max(own + (0 if not children else BOX_GAP),
                             sum(measure(c) for c in children))  # fmt: skip
            return band[node]

        def assign(node: str, left: float) -> float:
            children = self.facts.children(node)
            x = left + band[node] / 2
            start = left + (band[node] - sum(band[c] for c in children)) / 2
            for child in children:
                assign(child, start)
                start += band[child]
            kind = self.graph.nodes[node].get("kind", "")
            w, h = sizes[node]
            self.boxes[node] = _Box(node, kind, x, 0.0, w, h, lines_of[node])
            return x

        measure("root")
        assign("root", 0.0)

        # Rows top-down, each as tall as its tallest box plus room for the edges.
        inner = [n for n in self.boxes if self.graph.out_degree(n) > 0]
        rows = max(depth[n] for n in inner) + 1
        tops = [0.0]
        for row in range(rows):
            tallest = max(self.boxes[n].h for n in inner if depth[n] == row)
            tops.append(tops[-1] + tallest + ROW_GAP)
        self.leaf_y = tops[-1]
        for node, box in self.boxes.items():
            box.y = tops[depth[node]] if node in inner else self.leaf_y
        content = band["root"]
        self.width = max(content + 2 * MARGIN, 760.0)
        # Small machines: centre the drawing on the canvas (the legend needs its width).
        shift = (self.width - content) / 2
        for box in self.boxes.values():
            box.x += shift

    def _lines(self, node: str) -> tuple[str, ...]:
        attrs = self.graph.nodes[node]
        kind = attrs.get("kind", "")
        if kind == "gpu":
            return self._gpu_lines(attrs["gpu"])
        if kind == "nic":
            return (attrs.get("nic", node), "NIC")
        if kind == "root":
            return ("machine",)
        # "NUMA node 0 (CPUs 0-11,24-35)": the CPU list goes on a second line.
        head, sep, tail = str(attrs.get("label", node)).partition(" (")
        lines = [head] + ([f"({tail}"] if sep else [])
        if attrs.get("inferred"):
            lines.append("(inferred)")
        return tuple(lines)

    def _gpu_lines(self, index: int) -> tuple[str, ...]:
        gpu = self.topo.gpu(index)
        lines = [gpu.name]
        if gpu.model:
            lines.append(short_model(gpu.model))
        detail = []
        if gpu.memory_mib:
            detail.append(f"{gpu.memory_mib / 1024:.0f} GiB")
        if gpu.numa_node is not None:
            detail.append(f"NUMA {gpu.numa_node}")
        elif gpu.cpu_affinity and not gpu.model:
            detail.append(f"CPU {format_cpu_list(gpu.cpu_affinity)}")
        if detail:
            lines.append(" · ".join(detail))
        return tuple(lines)

    # ------------------------------------------------------------ NVLink / P2P overlay
    def _gx(self, gpu: int) -> float:
        return self.boxes[f"gpu{gpu}"].x

    def _span(self, arc: _Arc) -> float:
        return abs(self._gx(arc.a) - self._gx(arc.b))

    def _colour(self, gpu: int) -> str:
        group = self.group_of.get(gpu)
        return PALETTE[group % len(PALETTE)] if group is not None else NO_GROUP

    def _arc_list(self) -> list[_Arc]:
        """NVLink arcs (pairs inside a fabric excepted), then no-P2P warnings."""
        in_fabric = {(a, b) for g in self.fabrics for a in g for b in g}
        arcs = []
        for link in self.topo.pairs():
            if link.nvlinks and (link.a, link.b) not in in_fabric:
                same = self.group_of.get(link.a) == self.group_of.get(link.b)
                colour = self._colour(link.a) if same else CROSS_COLOUR
                arcs.append(
                    _Arc(link.a, link.b, self.topo.link_label(link), colour, stroke(link.nvlinks))
                )
            elif not link.nvlinks and link.p2p.value != "U" and not link.p2p.supported:
                # A known "no" (GNS on GeForce, CNS, ...): the reader would expect P2P.
                label = f"no P2P: {link.p2p.value}"
                arcs.append(_Arc(link.a, link.b, label, NO_P2P_COLOUR, 1.5, dashed=True))
        return arcs

    def _ports(self) -> dict[tuple[int, int], float]:
        """Where each arc leaves each GPU box: spread along its bottom edge, ordered by
        the direction of the other end, so arcs fan out instead of sharing one point."""
        ends: dict[int, list[int]] = {}
        for arc in self.arcs:
            ends.setdefault(arc.a, []).append(arc.b)
            ends.setdefault(arc.b, []).append(arc.a)
        ports = {}
        usable = LEAF_W - 24
        for gpu, others in ends.items():
            x = self._gx(gpu)
            # Farther partners take ports nearer the box centre: a long arc then passes
            # under the shorter ones from the same box instead of crossing them.
            left = sorted((o for o in others if self._gx(o) < x), key=self._gx, reverse=True)
            right = sorted((o for o in others if self._gx(o) >= x), key=self._gx, reverse=True)
            order = left + right
            for i, other in enumerate(order):
                ports[(gpu, other)] = x - usable / 2 + usable * (i + 0.5) / len(order)
        return ports

    # ------------------------------------------------------------ drawing
    def svg(self) -> str:
        out = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width:.0f}" '
            f'height="{self.height:.0f}" viewBox="0 0 {self.width:.0f} {self.height:.0f}" '
            f'font-family="{FONT}">',
            f'<rect x="0" y="0" width="{self.width:.0f}" height="{self.height:.0f}" fill="white"/>',
        ]
        out += self._title()
        out.append('<g id="pcie-edges">')
        for parent, child in self.graph.edges:
            p, c = self.boxes[parent], self.boxes[child]
            out.append(
                f'<line x1="{p.x:.1f}" y1="{p.bottom:.1f}" x2="{c.x:.1f}" y2="{c.y:.1f}" '
                f'stroke="{EDGE_GREY}" stroke-width="1.5"/>'
            )
        out.append("</g>")
        out.append('<g id="nvlink">')
        out += self._fabric_svg()
        out += self._arcs_svg()
        out.append("</g>")
        out.append('<g id="nodes">')
        for box in self.boxes.values():
            out += self._box(box)
        out.append("</g>")
        out += self._legend_svg()
        out.append("</svg>")
        return "\n".join(out) + "\n"

    def _title(self) -> list[str]:
        out = [
            f'<text x="{MARGIN}" y="{MARGIN + 14}" font-size="18" font-weight="bold" '
            f'fill="#212121">GPU topology <tspan font-size="12" font-weight="normal" '
            f'fill="#757575">source: {escape(describe_source(self.topo))}</tspan></text>'
        ]
        for i, line in enumerate(self.title_lines):
            out.append(
                f'<text x="{MARGIN}" y="{MARGIN + 38 + 18 * i}" font-size="13" '
                f'fill="#424242">{escape(line)}</text>'
            )
        return out

    def _box(self, box: _Box) -> list[str]:
        if box.kind == "gpu":
            stroke = fill = self._colour(self.graph.nodes[box.node]["gpu"])
            opacity, width = ' fill-opacity="0.14"', 2.5
        else:
            fill, stroke = BOX_STYLE.get(box.kind, ("#ffffff", "#616161"))
            opacity, width = "", 1.5
        left = box.x - box.w / 2
        inferred = self.graph.nodes[box.node].get("inferred") and box.kind != "root"
        dash = ' stroke-dasharray="5,3"' if inferred else ""
        out = [
            f'<g class="node {box.kind}" id="node-{escape(box.node.replace(":", "-"))}">',
            f'<rect x="{left:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" '
            f'rx="6" fill="{fill}"{opacity} stroke="{stroke}" stroke-width="{width}"{dash}/>',
        ]
        for i, line in enumerate(box.lines):
            bold = ' font-weight="bold"' if i == 0 else ""
            size = 13 if i == 0 and box.kind == "gpu" else 11
            y = box.y + 16 + 15 * i
            out.append(
                f'<text x="{box.x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="middle"'
                f'{bold} fill="#212121">{escape(line)}</text>'
            )
        out.append("</g>")
        return out

    def _arcs_svg(self) -> list[str]:
        paths, labels = [], []
        base = self.leaf_y + LEAF_H
        for arc in self.arcs:
            xa, xb = self.ports[(arc.a, arc.b)], self.ports[(arc.b, arc.a)]
            dip = sag(self._span(arc))
            # Quadratic Bezier: the curve's lowest point is half-way to the control point.
            mid_x, mid_y = (xa + xb) / 2, base + dip
            kind = "p2p-warning" if arc.dashed else "nvlink-arc"
            dash = ' stroke-dasharray="6,4"' if arc.dashed else ""
            paths.append(
                f'<path class="{kind}" data-gpus="{arc.a}-{arc.b}" d="M {xa:.1f} {base:.1f} '
                f'Q {mid_x:.1f} {base + 2 * dip:.1f} {xb:.1f} {base:.1f}" fill="none" '
                f'stroke="{arc.colour}" stroke-width="{arc.width:.1f}" '
                f'stroke-opacity="0.85"{dash}/>'
            )
            tw = text_width(arc.label, 10, True) + 6
            labels += [
                f'<rect x="{mid_x - tw / 2:.1f}" y="{mid_y - 7:.1f}" width="{tw:.1f}" '
                f'height="14" rx="3" fill="white" stroke="{arc.colour}" stroke-width="0.8"/>',
                f'<text x="{mid_x:.1f}" y="{mid_y + 4:.1f}" font-size="10" text-anchor="middle" '
                f'fill="{arc.colour}" font-weight="bold">{escape(arc.label)}</text>',
            ]
        # Labels after all arcs, so no arc is drawn across a label.
        return paths + labels

    def _fabric_svg(self) -> list[str]:
        out = []
        base = self.leaf_y + LEAF_H
        for group in self.fabrics:
            xs = [self._gx(g) for g in sorted(group)]
            colour = self._colour(min(group))
            counts = sorted({link.nvlinks for link in self.topo.pairs(group)})
            bar_y = base + 60
            left, right = min(xs) - LEAF_W / 2, max(xs) + LEAF_W / 2
            names = "/".join(f"{self.topo.fabric}{c}" for c in counts)
            label = fabric_words(
                self.topo, f"NVSwitch fabric: {names} between every pair of these {len(group)} GPUs"
            )
            out.append(
                f'<g class="nvswitch-fabric" data-gpus="{",".join(map(str, sorted(group)))}">'
            )
            for x in xs:
                out.append(
                    f'<line x1="{x:.1f}" y1="{base:.1f}" x2="{x:.1f}" y2="{bar_y:.1f}" '
                    f'stroke="{colour}" stroke-width="{stroke(max(counts)):.1f}"/>'
                )
            out += [
                f'<rect x="{left:.1f}" y="{bar_y:.1f}" width="{right - left:.1f}" height="28" '
                f'rx="8" fill="{colour}"/>',
                f'<text x="{(left + right) / 2:.1f}" y="{bar_y + 19:.1f}" font-size="13" '
                f'text-anchor="middle" fill="white" font-weight="bold">{escape(label)}</text>',
                "</g>",
            ]
        return out

    # ------------------------------------------------------------ legend
    def _legend_items(self) -> list[tuple[str, str, str]]:
        kinds = {kind for _, kind in self.graph.nodes(data="kind")}
        items = [("line", EDGE_GREY, "PCIe tree")]
        if any(not arc.dashed for arc in self.arcs):
            items.append(("arc", PALETTE[0], "NVLink NV# (width = link count)"))
        if any(arc.colour == CROSS_COLOUR for arc in self.arcs):
            items.append(("arc", CROSS_COLOUR, "NVLink between colour groups"))
        if self.fabrics:
            items.append(("bar", PALETTE[0], "NVSwitch fabric"))
        if self.group_of:
            items.append(("gpu", PALETTE[0], "GPU, coloured by NVLink group"))
        if len(self.group_of) < len(self.topo.gpus):
            items.append(("gpu", NO_GROUP, "GPU without NVLink"))
        if any(arc.dashed for arc in self.arcs):
            items.append(("dashed", NO_P2P_COLOUR, "P2P reported unsupported"))
        items += [(k, BOX_STYLE[k][1], name) for k, name in LEGEND_KINDS if k in kinds]
        if any(inf for n, inf in self.graph.nodes(data="inferred") if n != "root"):
            items.append(("inferred", "#616161", "grouping inferred (level hidden by NV#)"))
        return [(kind, colour, fabric_words(self.topo, name)) for kind, colour, name in items]

    def _legend_positions(self) -> list[tuple[float, float]]:
        x, y, out = float(MARGIN), self.legend_y, []
        for _, _, text in self.legend:
            step = 30 + text_width(text, 11) + 18
            if x + step > self.width - MARGIN and x > MARGIN:
                x, y = MARGIN, y + 22
            out.append((x, y))
            x += step
        return out

    def _legend_rows(self) -> int:
        ys = {y for _, y in self._legend_positions()}
        return len(ys)

    def _legend_svg(self) -> list[str]:
        out = [
            '<g id="legend" font-size="11" fill="#424242">',
            f'<line x1="{MARGIN}" y1="{self.legend_y - 16:.1f}" x2="{self.width - MARGIN:.1f}" '
            f'y2="{self.legend_y - 16:.1f}" stroke="#e0e0e0"/>',
        ]
        for (shape, colour, text), (x, y) in zip(
            self.legend, self._legend_positions(), strict=True
        ):
            out.append(legend_mark(shape, colour, x, y))
            out.append(f'<text x="{x + 30:.1f}" y="{y + 4:.1f}">{escape(text)}</text>')
        out.append("</g>")
        return out
