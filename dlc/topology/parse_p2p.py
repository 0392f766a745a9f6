"""Parse ``nvidia-smi topo -p2p r|w|n|a`` matrices.

The matrix has one ``GPU<n>`` column and row per GPU; each off-diagonal cell is a
:class:`~dlc.topology.model.P2PStatus` code (``OK``, ``CNS``, ``GNS``, ``TNS``,
``NS``, ``DR``, ``U``) and the diagonal is ``X``. Rows may be indented and cells
separated by tabs or spaces, with trailing tabs; a legend usually follows.
"""

from __future__ import annotations

import re

from dlc.errors import TopologyParseError
from dlc.topology.lines import split_lines
from dlc.topology.model import P2PStatus

_STATUS_HELP = "X, OK, CNS, GNS, TNS, NS, DR or U"
_GPU_RE = re.compile(r"GPU([0-9]{1,6})")
_HEADER_RE = re.compile(r"(?:\s*GPU[0-9]{1,6})+\s*")


def _header(lines: list[str]) -> tuple[int, list[int]]:
    """0-based index of the header line and the GPU indices it names."""
    for index, text in enumerate(lines):
        if _HEADER_RE.fullmatch(text):
            gpus = [int(m) for m in _GPU_RE.findall(text)]
            if len(set(gpus)) != len(gpus):
                raise TopologyParseError(
                    "header names a GPU twice", line=index + 1, expected="each GPU once"
                )
            return index, gpus
    raise TopologyParseError(
        "no `nvidia-smi topo -p2p` matrix found",
        line=1,
        expected="a header line naming GPU0 GPU1 ...",
    )


def parse_p2p(text: str) -> dict[tuple[int, int], P2PStatus]:
    """Parse a ``topo -p2p`` matrix.

    Args:
        text: the command's output (prompt lines before and a legend after are fine).

    Returns:
        The status of every ordered GPU pair ``(row, column)``, row != column.

    Raises:
        TopologyParseError: the matrix is missing, cut short, or holds an unknown
            code; the error names the line and what was expected.
    """
    if not isinstance(text, str) or not text.strip():
        raise TopologyParseError("P2P text is empty", line=1, expected="`topo -p2p` output")
    lines = split_lines(text)
    start, gpus = _header(lines)
    status: dict[tuple[int, int], P2PStatus] = {}
    for r, gpu in enumerate(gpus):
        number = start + r + 2
        tokens = lines[number - 1].split() if number <= len(lines) else []
        label = f"GPU{gpu}"
        if not tokens or not _GPU_RE.fullmatch(tokens[0]):
            missing = f"GPU{gpus[r]}" + (f"..GPU{gpus[-1]}" if r < len(gpus) - 1 else "")
            raise TopologyParseError(
                "P2P matrix ends early", line=number - 1, expected=f"rows for {missing}"
            )
        if tokens[0] != label:
            raise TopologyParseError(
                f"found {tokens[0]}'s row out of order", line=number, expected=f"{label}'s row"
            )
        cells = tokens[1:]
        if len(cells) != len(gpus):
            raise TopologyParseError(
                f"{label}'s row has {len(cells)} cells", line=number, expected=f"{len(gpus)}"
            )
        for c, cell in enumerate(cells):
            status.update(_cell(number, label, gpus, r, c, cell.upper()))
    return status


def _cell(
    number: int, label: str, gpus: list[int], r: int, c: int, cell: str
) -> dict[tuple[int, int], P2PStatus]:
    if r == c:
        if cell != "X":
            raise TopologyParseError(f"{label}/{label} is {cell}", line=number, expected="X")
        return {}
    try:
        return {(gpus[r], gpus[c]): P2PStatus(cell)}
    except ValueError:
        raise TopologyParseError(
            f"{label}/GPU{gpus[c]} holds unknown status {cell!r}",
            line=number,
            expected=_STATUS_HELP,
        ) from None
