"""Every fixture's picture: no box overlaps another, no label leaves its box or the canvas.

Checked geometrically from the SVG itself: the rectangles of the tree's boxes and the
extents of their text (measured as the renderer measures it). Also: tree, summary and
picture agree on the NUMA nodes, following the affinity columns (issue 16's cases).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dlc.topology.discovery.discover import discover
from dlc.topology.model import format_cpu_list
from dlc.topology.render.picture import render_svg
from dlc.topology.render.report import analyze
from dlc.topology.render.svg import text_width
from tests.fixture_files import complete_topo_files, truncated_topo_files

NS = {"s": "http://www.w3.org/2000/svg"}
ISSUE16 = Path(__file__).resolve().parents[1] / "data" / "issue16"
FILES = [*complete_topo_files(), *truncated_topo_files(), *sorted(ISSUE16.glob("*.txt"))]


def facts_of(path: Path):
    return analyze(discover(from_file=str(path), allow_truncated=True))


def boxes(svg: str):
    """``(node id, (x0, y0, x1, y1), [(text, x0, x1)])`` for each tree box of the picture."""
    root = ET.fromstring(svg)
    found = []
    for group in root.iter("{http://www.w3.org/2000/svg}g"):
        if "node" not in group.get("class", "").split():
            continue
        rect = group.find("s:rect", NS)
        x, y = float(rect.get("x")), float(rect.get("y"))
        box = (x, y, x + float(rect.get("width")), y + float(rect.get("height")))
        texts = []
        for text in group.findall("s:text", NS):
            bold = text.get("font-weight") == "bold"
            width = text_width(text.text or "", float(text.get("font-size")), bold)
            centre = float(text.get("x"))
            texts.append((text.text, centre - width / 2, centre + width / 2))
        found.append((group.get("id"), box, texts))
    return found, float(root.get("width"))


def overlap(a, b) -> bool:
    return min(a[2], b[2]) - max(a[0], b[0]) > 0.5 and min(a[3], b[3]) - max(a[1], b[1]) > 0.5


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
def test_no_box_or_label_overlaps(path):
    found, width = boxes(render_svg(facts_of(path)))
    assert found
    for name, box, texts in found:
        assert box[0] >= 0 and box[2] <= width, f"{name} leaves the canvas: {box}"
        for text, left, right in texts:
            assert box[0] - 0.5 <= left and right <= box[2] + 0.5, f"{name}: {text!r} overflows"
    for i, (name, box, _) in enumerate(found):
        for other, box2, _ in found[i + 1 :]:
            assert not overlap(box, box2), f"{name} overlaps {other}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
def test_tree_summary_and_picture_agree_on_numa_nodes(path):
    facts = facts_of(path)
    tree_numa = [n for n in facts.tree.graph.successors("root") if facts.tree.gpus_under(n)]
    assert re.search(rf"\d+ GPUs? on {len(tree_numa)} NUMA nodes?\b", facts.summary)
    svg = render_svg(facts)
    drawn = {m for m in re.findall(r'id="node-(numa\d+)"', svg)}
    assert set(tree_numa) <= drawn


def numa_members(path: Path):
    tree = facts_of(path).tree
    return sorted(sorted(tree.gpus_under(n)) for n in tree.graph.successors("root"))


def test_numa_column_wins_over_blank_cpu_lists():
    # GPUs 4-7 say NUMA 1; GPUs 0-3 say NUMA 0 with a blank CPU list; one PCIe tree
    path = ISSUE16 / "8gpu_pix-pxb_numa-column-blank-cpus.txt"
    assert numa_members(path) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert facts_of(path).summary.startswith("8 GPUs on 2 NUMA nodes")


def test_same_cpus_printed_sys_apart_are_one_numa_node():
    path = ISSUE16 / "vm-2gpu_sys_same-cpus.txt"
    assert numa_members(path) == [[0, 1]]
    assert facts_of(path).summary.startswith("2 GPUs on 1 NUMA node")


def test_strided_power8_lists_are_compacted_in_labels():
    facts = facts_of(ISSUE16 / "power8-4gpu_nv2_strided-cpus.txt")
    labels = [facts.tree.graph.nodes[n]["label"] for n in facts.tree.graph.successors("root")]
    assert labels[0] == "NUMA node 0 (CPUs 0,8,16,...,72)"
    assert "-0," not in render_svg(facts)


@pytest.mark.parametrize(
    "text, shown",
    [("0-0,8-8,16-16", "0,8,16"), ("0-0,8-8,16-16,24-24,32-32", "0,8,16,...,32"),
     ("0-11,24-35", "0-11,24-35"), ("3,1,2", "1-3"), ("N/A", "N/A"), ("", "")],
)  # fmt: skip
def test_format_cpu_list(text, shown):
    assert format_cpu_list(text) == shown
