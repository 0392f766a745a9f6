"""``dlc topology``: report a machine's GPU topology.

The machine comes from NVML, else ``nvidia-smi``, else ``--from-file`` (saved
``nvidia-smi topo -m`` text, saved ``rocm-smi``/``amd-smi`` output, or a document
written earlier by ``--json``). The
default output is a report for a person; ``--json`` prints the documented
``dlc-topology/1`` document instead; ``--svg``/``--png`` also draw the tree.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console

from dlc.cli.output import emit
from dlc.errors import DiscoveryError, DlcError, TopologyParseError
from dlc.topology.discovery.discover import discover
from dlc.topology.model import Topology
from dlc.topology.parse_amd import looks_like_amd
from dlc.topology.render.jsonio import topology_from_json, topology_to_json
from dlc.topology.render.picture import render_svg, svg_to_png, write_svg
from dlc.topology.render.report import analyze, render_report


@click.command(name="topology")
@click.option(
    "--from-file",
    metavar="FILE",
    help="Saved `nvidia-smi topo -m` output, saved `rocm-smi`/`amd-smi` output (text or "
    "--json, detected), or a `dlc topology --json` document, instead of this host's GPUs.",
)
@click.option(
    "--p2p-file",
    metavar="FILE",
    help="Saved `nvidia-smi topo -p2p r` output to merge in (with --from-file).",
)
@click.option(
    "--allow-truncated",
    is_flag=True,
    help="Accept a topo -m table cut off mid-way (only the complete rows are used).",
)
@click.option("--json", "as_json", is_flag=True, help="Same as -o json.")
@click.option(
    "-o", "--output", type=click.Choice(["report", "json", "yaml"]), default="report",
    show_default=True, help="json/yaml: the dlc-topology/1 document; report: for a person.",
)  # fmt: skip
@click.option("--svg", metavar="OUT.svg", help="Also draw the topology as an SVG picture.")
@click.option("--png", metavar="OUT.png", help="Also draw the topology as a PNG picture.")
@click.option(
    "--bandwidth/--no-bandwidth",
    default=True,
    show_default=True,
    help="Include the GB/s matrix (measured where probed, else estimated) in the report.",
)
def command(
    from_file: str | None,
    p2p_file: str | None,
    allow_truncated: bool,
    as_json: bool,
    output: str,
    svg: str | None,
    png: str | None,
    bandwidth: bool,
) -> None:
    """Report a machine's GPU topology: PCIe tree, link matrix, P2P/NVLink groups, NICs."""
    topo = load(from_file, p2p_file, allow_truncated)
    facts = analyze(topo)
    if svg or png:
        picture = render_svg(facts)
        if svg:
            write_svg(picture, svg)
            click.echo(f"wrote {svg}", err=True)
        if png:
            svg_to_png(picture, png)
            click.echo(f"wrote {png}", err=True)
    if as_json or output in ("json", "yaml"):
        emit(topology_to_json(topo, facts), "json" if as_json else output)
    else:
        render_report(facts, Console(highlight=False), bandwidth=bandwidth)


def load(from_file: str | None, p2p_file: str | None, allow_truncated: bool) -> Topology:
    """The topology to report: a ``--json`` document, saved text, or this host's GPUs."""
    if from_file and _looks_like_json(from_file) and not _is_amd_smi(from_file):
        if p2p_file:
            raise DiscoveryError("--p2p-file: a JSON document already carries P2P status")
        try:
            doc = json.loads(Path(from_file).read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            error = TopologyParseError(
                f"{from_file}: not valid JSON ({exc.msg} at line {exc.lineno})"
            )
            error.line = exc.lineno
            raise error from None
        return topology_from_json(doc)
    try:
        return discover(from_file=from_file, p2p_file=p2p_file, allow_truncated=allow_truncated)
    except TopologyParseError as exc:
        if allow_truncated or not from_file or not _is_truncated(from_file):
            raise
        hint = TopologyParseError(
            f"{exc}; if the copy was cut short, --allow-truncated reports its complete rows"
        )
        hint.line, hint.expected = exc.line, exc.expected
        raise hint from None


def _is_truncated(from_file: str) -> bool:
    """Whether the file is a ``topo -m`` table that only fails because it stops early."""
    for allow in (False, True):
        try:
            discover(from_file=from_file, allow_truncated=allow)
        except DlcError:
            if allow:
                return False
        else:
            if not allow:
                return False  # the table is whole: the error came from elsewhere
    return True


def _is_amd_smi(path: str) -> bool:
    """Whether the file is saved ``rocm-smi``/``amd-smi`` output (``discover`` reads it)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return looks_like_amd(handle.read(4096))
    except OSError:
        return False


def _looks_like_json(path: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(4096).lstrip().startswith("{")
    except OSError:
        return False  # discover() reports the unreadable file with its reason
