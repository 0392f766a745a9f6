"""The SVG picture of the topology tree and its PNG conversion."""

from __future__ import annotations

import struct
import sys
import xml.etree.ElementTree as ET
from itertools import combinations

import pytest
from test_report import BRIDGED, DGX1, H100, RTX5090, load

from dlc.errors import OutputError
from dlc.topology.render.picture import (
    CROSS_COLOUR,
    FABRIC_MIN_GPUS,
    colour_groups,
    render_svg,
    svg_to_png,
    write_svg,
)
from dlc.topology.render.report import analyze, is_complete
from tests.fixture_files import complete_topo_files

NS = {"svg": "http://www.w3.org/2000/svg"}


def parse(topo) -> ET.Element:
    return ET.fromstring(render_svg(analyze(topo)))


def by_class(root: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    return [e for e in root.iter(f"{{{NS['svg']}}}{tag}") if cls in e.get("class", "").split()]


def arc_pairs(root: ET.Element) -> set[tuple[int, int]]:
    pairs = set()
    for path in by_class(root, "path", "nvlink-arc"):
        a, b = path.get("data-gpus").split("-")
        pairs.add((int(a), int(b)))
    return pairs


@pytest.mark.parametrize("path", complete_topo_files(), ids=lambda p: p.name[:40])
def test_svg_has_one_box_per_gpu_and_one_arc_per_nvlinked_pair(path):
    topo = load(path.name)
    root = parse(topo)  # well-formed XML, or this raises
    assert root.tag == f"{{{NS['svg']}}}svg"
    boxes = by_class(root, "g", "gpu")
    assert sorted(b.get("id") for b in boxes) == sorted(f"node-gpu{i}" for i in topo.gpu_indices)
    nics = by_class(root, "g", "nic")
    assert len(nics) == len(topo.nics)
    facts = analyze(topo)
    fabrics = [g for g in facts.nvlink_groups if len(g) >= FABRIC_MIN_GPUS and is_complete(topo, g)]
    in_fabric = {pair for g in fabrics for pair in combinations(sorted(g), 2)}
    nvlinked = {(link.a, link.b) for link in topo.pairs() if link.nvlinks}
    assert arc_pairs(root) == nvlinked - in_fabric
    drawn = by_class(root, "g", "nvswitch-fabric")
    assert sorted(g.get("data-gpus") for g in drawn) == sorted(
        ",".join(map(str, sorted(g))) for g in fabrics
    )


@pytest.mark.parametrize(
    ("name", "arcs", "fabric", "warnings"),
    [
        pytest.param(DGX1, 16, None, set(), id="dgx1-16-arcs"),
        pytest.param(H100, 0, "0,1,2,3,4,5,6,7", set(), id="h100-fabric-not-28-arcs"),
        pytest.param(BRIDGED, 4, None, set(), id="bridged-pairs-4-arcs"),
        pytest.param(RTX5090, 0, None, {("0-1", "no P2P: GNS")}, id="rtx5090-no-p2p"),
    ],
)
def test_four_machines(name, arcs, fabric, warnings):
    root = parse(load(name))
    assert len(by_class(root, "path", "nvlink-arc")) == arcs
    fabrics = by_class(root, "g", "nvswitch-fabric")
    assert [f.get("data-gpus") for f in fabrics] == ([fabric] if fabric else [])
    texts = [t.text for t in root.iter(f"{{{NS['svg']}}}text")]
    found = {(p.get("data-gpus"), "no P2P: GNS") for p in by_class(root, "path", "p2p-warning")}
    assert found == warnings
    for _, label in warnings:
        assert label in texts


def test_bridge_pairs_drawn_between_the_real_partners():
    root = parse(load(BRIDGED))
    assert arc_pairs(root) == {(0, 2), (1, 3), (4, 5), (6, 7)}
    labels = [t.text for t in root.iter(f"{{{NS['svg']}}}text") if t.text == "NV12"]
    assert len(labels) == 4


def test_dgx1_quads_coloured_apart_and_cross_links_neutral():
    facts = analyze(load(DGX1))
    assert colour_groups(facts) == [frozenset({0, 1, 2, 3}), frozenset({4, 5, 6, 7})]
    root = ET.fromstring(render_svg(facts))
    stroke = {}
    for box in by_class(root, "g", "gpu"):
        rect = box.find("svg:rect", NS)
        stroke[int(box.get("id").removeprefix("node-gpu"))] = rect.get("stroke")
    assert len({stroke[g] for g in (0, 1, 2, 3)}) == 1
    assert len({stroke[g] for g in (4, 5, 6, 7)}) == 1
    assert stroke[0] != stroke[4]
    arcs = {p.get("data-gpus"): p for p in by_class(root, "path", "nvlink-arc")}
    assert arcs["0-4"].get("stroke") == CROSS_COLOUR
    assert arcs["0-1"].get("stroke") == stroke[0]
    # Width grows with the link count: NV2 is drawn thicker than NV1.
    assert float(arcs["0-3"].get("stroke-width")) > float(arcs["0-1"].get("stroke-width"))


@pytest.mark.parametrize("name", [DGX1, H100, BRIDGED, RTX5090])
def test_boxes_of_one_row_do_not_overlap(name):
    root = parse(load(name))
    rows: dict[float, list[tuple[float, float]]] = {}
    for group in root.find("svg:g[@id='nodes']", NS):
        rect = group.find("svg:rect", NS)
        x, w = float(rect.get("x")), float(rect.get("width"))
        rows.setdefault(float(rect.get("y")), []).append((x, x + w))
    for spans in rows.values():
        spans.sort()
        for (_, right), (left, _) in zip(spans, spans[1:], strict=False):
            assert right <= left


def test_title_is_the_summary_and_legend_is_present():
    facts = analyze(load(H100))
    root = ET.fromstring(render_svg(facts))
    texts = " ".join(t.text or "" for t in root.iter(f"{{{NS['svg']}}}text"))
    assert " ".join(texts.split()).find(facts.summary[:60]) >= 0
    legend = root.find("svg:g[@id='legend']", NS)
    legend_text = [t.text for t in legend.iter(f"{{{NS['svg']}}}text")]
    assert "NVSwitch fabric" in legend_text
    assert "PCIe tree" in legend_text


def _png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_png_has_the_svg_size(tmp_path):
    svg = render_svg(analyze(load(DGX1)))
    root = ET.fromstring(svg)
    out = tmp_path / "dgx1.png"
    svg_to_png(svg, out)
    assert _png_size(out) == (int(root.get("width")), int(root.get("height")))


def test_png_without_cairosvg_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "cairosvg", None)  # import now raises ImportError
    with pytest.raises(OutputError, match="libcairo2"):
        svg_to_png("<svg xmlns='http://www.w3.org/2000/svg'/>", tmp_path / "x.png")


@pytest.mark.parametrize(
    "write",
    [
        pytest.param(lambda svg, p: write_svg(svg, p), id="svg"),
        pytest.param(lambda svg, p: svg_to_png(svg, p), id="png"),
    ],
)
def test_unwritable_output_is_a_clear_error(write, tmp_path):
    svg = render_svg(analyze(load(RTX5090)))
    with pytest.raises(OutputError, match="cannot write"):
        write(svg, tmp_path / "no-such-dir" / "out")
