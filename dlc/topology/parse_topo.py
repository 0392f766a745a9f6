"""Parse ``nvidia-smi topo -m`` text into a :class:`~dlc.topology.model.Topology`.

The parser reads the *format*, not particular files. Real outputs differ in ways that
break naive column splitting (see ``../shared/fixtures/topology/SOURCES.md``):

* cells are separated by tabs or by padded spaces, ``X`` sits inside ``" X "``;
* the header may be indented, unindented, misaligned or run together
  (``GPU0GPU1...GPU7mlx5_0``), and may follow prompt, ``srun:`` or title lines;
* NIC columns are named ``mlx5_0``/``mlx4_0``/``NIC0`` (the last with a trailing
  ``NIC Legend:`` block naming the device), NIC rows are shorter than GPU rows;
* the affinity columns (``CPU Affinity``, ``NUMA Affinity``, ``GPU NUMA ID``) hold a
  CPU list, a number, a list or ``N/A``, and nvidia-smi pads them with stray tabs.

So every line is split on whitespace only and cells are matched to columns by count:
the first ``len(columns)`` cells of a row are link cells; whatever follows on a GPU row
is its affinity. When fewer affinity values than affinity columns are printed, the
values are assigned to the *last* columns: nvidia-smi always prints ``NUMA Affinity``
and ``GPU NUMA ID`` (as ``N/A`` when unknown) while ``CPU Affinity`` is the one that
can be blank.

Every problem raises :class:`~dlc.errors.TopologyParseError` with the 1-based line
number and what was expected there; no other exception escapes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from dlc.errors import TopologyParseError
from dlc.topology.lines import split_lines
from dlc.topology.model import Gpu, Nic, PairLink, PcieLevel, Topology
from dlc.topology.parse_p2p import parse_p2p

#: the link tokens a ``topo -m`` cell may hold
LINK_TOKENS_HELP = "X, NV#, PIX, PXB, PHB, NODE, SYS or SOC"

_AFFINITY_NAMES = {"CPUAFFINITY": "cpu", "NUMAAFFINITY": "numa", "GPUNUMAID": "gpu_numa"}
_LEVEL_NAMES = frozenset({"PIX", "PXB", "PHB", "NODE", "SYS", "SOC"})
_NV_RE = re.compile(r"NV([0-9]{1,4})")
_GPU_RE = re.compile(r"GPU([0-9]{1,6})")
# One header name. Affinity names contain blanks; GPU/NIC/mlx names may be run
# together without separators, so they end where the next known name begins.
_HEADER_NAME_RE = re.compile(
    r"\s*(CPU\s+Affinity|NUMA\s+Affinity|GPU\s+NUMA\s+ID|GPU[0-9]+|NIC[0-9]+|mlx[0-9]+_[0-9]+"
    r"|\S+?(?=GPU[0-9]|NIC[0-9]|mlx[0-9]+_|CPU\s+Affinity|NUMA\s+Affinity|\s|$))"
)
_FIRST_GPU_RE = re.compile(r"GPU[0-9]")
_CPU_LIST_RE = re.compile(r"[0-9]{1,7}(-[0-9]{1,7})?(,[0-9]{1,7}(-[0-9]{1,7})?)*")
_NUMA_RE = re.compile(r"([0-9]{1,7})([-,][0-9]{1,7})*")
_NIC_LEGEND_RE = re.compile(r"\s*(NIC[0-9]{1,6})\s*:\s*(\S+)\s*")


@dataclass
class _Header:
    """The column names of the table header."""

    line: int
    gpus: list[int]  # GPU indices in column order
    nics: list[str]  # NIC column names in column order
    affinity: list[str]  # "cpu" / "numa" / "gpu_numa" in column order

    @property
    def labels(self) -> list[str]:
        return [f"GPU{i}" for i in self.gpus] + self.nics


@dataclass
class _Row:
    line: int
    label: str
    cells: list[str]  # one upper-cased link token per column
    affinity: dict[str, str] = field(default_factory=dict)


def _err(line: int, message: str, expected: str | None = None) -> TopologyParseError:
    return TopologyParseError(message, line=line, expected=expected)


def _parse_header(text: str, line: int) -> _Header | None:
    """The header if ``text`` is a ``topo -m`` header line, else ``None``.

    A header is a run of column names starting at the first ``GPU<n>``, after nothing
    but blanks or a title ending in ``:`` (``GPU Topology:``).
    """
    start = _FIRST_GPU_RE.search(text)
    if start is None:
        return None
    prefix = text[: start.start()].strip()
    if prefix and not prefix.endswith(":"):
        return None
    names = []
    pos = start.start()
    rest = text.rstrip()
    while pos < len(rest):
        match = _HEADER_NAME_RE.match(rest, pos)
        if match is None or match.end() == pos:
            return None
        names.append(match.group(1))
        pos = match.end()
    gpus: list[int] = []
    nics: list[str] = []
    affinity: list[str] = []
    for name in names:
        key = re.sub(r"\s+", "", name).upper()
        gpu = _GPU_RE.fullmatch(name)
        if _is_link_token(name.upper()) or name.upper() == "N/A":
            return None  # a table row (``GPU0  X  NV1``), not the header
        if key in _AFFINITY_NAMES:
            affinity.append(_AFFINITY_NAMES[key])
        elif affinity:
            return None  # device columns come before the affinity columns
        elif gpu is not None and not nics:
            gpus.append(int(gpu.group(1)))
        else:
            nics.append(name)
    if not gpus:
        return None
    labels = [f"GPU{i}" for i in gpus] + nics
    dup = next((n for i, n in enumerate(labels) if n in labels[:i]), None)
    if dup is not None:
        raise _err(line, f"header names column {dup} twice", "each GPU/NIC column once")
    if len(set(affinity)) != len(affinity):
        raise _err(line, "header repeats an affinity column", "each affinity column once")
    return _Header(line, gpus, nics, affinity)


def _is_link_token(token: str) -> bool:
    if token in _LEVEL_NAMES or token == "X":
        return True
    nv = _NV_RE.fullmatch(token)
    return nv is not None and int(nv.group(1)) > 0


def _find_header(lines: list[str]) -> _Header:
    # Prefer a header whose next non-blank line is its first row: reports often quote the
    # header once in prose ("topology: GPU0 GPU1 ...") before the real table.
    first = None
    for number, text in enumerate(lines, start=1):
        header = _parse_header(text, number)
        if header is None:
            continue
        following = next((line.split() for line in lines[number:] if line.strip()), [])
        if following and following[0] == header.labels[0]:
            return header
        first = first or header
    if first is not None:
        return first
    raise _err(
        1,
        "no `nvidia-smi topo -m` table found",
        "a header line naming the columns GPU0 GPU1 ... [NICs] [CPU Affinity ...]",
    )


def _span(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{names[0]}..{names[-1]}"


def _describe_missing(missing: list[str]) -> str:
    gpus = [m for m in missing if _GPU_RE.fullmatch(m)]
    nics = [m for m in missing if not _GPU_RE.fullmatch(m)]
    parts = [_span(p) for p in (gpus, nics) if p]
    return "rows for " + " and ".join(parts)


class _Truncated(Exception):
    """Internal: the table stops before all rows are complete."""

    def __init__(self, error: TopologyParseError, rows: list[_Row]):
        super().__init__(str(error))
        self.error = error
        self.rows = rows


def _parse_rows(lines: list[str], header: _Header, ends_with_newline: bool) -> list[_Row]:
    """Read one row per column label; raise :class:`_Truncated` if the table stops early."""
    labels = header.labels
    ncols = len(labels)
    rows: list[_Row] = []
    index = header.line  # 0-based index of the line after the header
    while index < len(lines) and not lines[index].strip() and not rows:
        index += 1  # tolerate blank lines between header and first row
    for label in labels:
        number = index + 1
        tokens = lines[index].split() if index < len(lines) else []
        if not tokens or tokens[0] not in labels:
            last = rows[-1].line if rows else header.line
            after = f"{rows[-1].label}'s row" if rows else "its header"
            missing = labels[len(rows) :]
            raise _Truncated(
                _err(last, f"table ends after {after}", _describe_missing(missing)),
                rows,
            )
        if tokens[0] != label:
            raise _err(number, f"found {tokens[0]}'s row out of order", f"{label}'s row here")
        cells = tokens[1:]
        # The final line of a text without a trailing newline may be cut mid-row.
        maybe_cut = index == len(lines) - 1 and not ends_with_newline
        if len(cells) < ncols and not (maybe_cut or index == len(lines) - 1):
            raise _err(
                number,
                f"{label}'s row has {len(cells)} cells",
                f"{ncols} cells, one per column {_span(labels)}",
            )
        try:
            if len(cells) < ncols:
                raise _err(number, "short row")
            rows.append(_parse_row(number, label, cells, header))
        except TopologyParseError:
            if not (maybe_cut or len(cells) < ncols):
                raise
            missing = labels[len(rows) :]
            raise _Truncated(
                _err(
                    number,
                    f"table ends inside {label}'s row ({len(cells)} of {ncols} cells)",
                    _describe_missing(missing),
                ),
                rows,
            ) from None
        index += 1
    _check_after_table(lines, index, labels)
    return rows


def _check_after_table(lines: list[str], index: int, labels: list[str]) -> None:
    """The line after the last row must not be another row (duplicated or unknown device)."""
    tokens = lines[index].split() if index < len(lines) else []
    if not tokens:
        return
    if tokens[0] in labels:
        raise _err(index + 1, f"{tokens[0]}'s row appears twice", "one row per column")
    if len(tokens) > 1 and _is_link_token(tokens[1].upper()):
        raise _err(
            index + 1,
            f"row {tokens[0]} has no column in the header",
            f"rows only for the columns {_span(labels)}",
        )


def _parse_row(number: int, label: str, cells: list[str], header: _Header) -> _Row:
    ncols = len(header.labels)
    links = [c.upper() for c in cells[:ncols]]
    for col, token in zip(header.labels, links, strict=True):
        if not _is_link_token(token):
            raise _err(number, f"{label}/{col} holds unknown link {token!r}", LINK_TOKENS_HELP)
    extra = cells[ncols:]
    is_gpu = _GPU_RE.fullmatch(label) is not None
    if extra and not is_gpu:
        raise _err(number, f"{label}'s row has {len(extra)} extra values", f"{ncols} cells")
    if len(extra) > len(header.affinity):
        raise _err(
            number,
            f"{label}'s row has {len(extra)} values after its {ncols} link cells",
            f"at most {len(header.affinity)} affinity values",
        )
    # Fewer values than columns: the blank ones are leading (see module docstring).
    columns = header.affinity[len(header.affinity) - len(extra) :]
    return _Row(number, label, links, dict(zip(columns, extra, strict=True)))


def _check_matrix(rows: list[_Row], labels: list[str]) -> None:
    """X on the diagonal only, and a symmetric matrix among the rows present."""
    canon = {"SOC": "SYS"}
    for r, row in enumerate(rows):
        for c, token in enumerate(row.cells):
            if (token == "X") != (r == c):
                want = "X" if r == c else "a link (not X)"
                raise _err(row.line, f"{row.label}/{labels[c]} is {token}", f"{want} there")
            if c < r:
                other = rows[c].cells[r]
                if canon.get(token, token) != canon.get(other, other):
                    raise _err(
                        row.line,
                        f"{row.label}/{labels[c]} is {token} but {labels[c]}/{row.label} "
                        f"on line {rows[c].line} is {other}",
                        "a symmetric matrix",
                    )


def _affinity_values(row: _Row) -> dict[str, object]:
    values: dict[str, object] = {}
    cpu = row.affinity.get("cpu")
    if cpu is not None and cpu.upper() != "N/A":
        if not _CPU_LIST_RE.fullmatch(cpu):
            raise _err(row.line, f"{row.label}'s CPU Affinity {cpu!r}", "a CPU list or N/A")
        values["cpu_affinity"] = cpu
    numa = row.affinity.get("numa")
    if numa is not None and numa.upper() != "N/A":
        match = _NUMA_RE.fullmatch(numa)
        if match is None:
            raise _err(row.line, f"{row.label}'s NUMA Affinity {numa!r}", "a NUMA node or N/A")
        values["numa_node"] = int(match.group(1))
    gpu_numa = row.affinity.get("gpu_numa")
    if gpu_numa is not None and gpu_numa.upper() != "N/A":
        if not re.fullmatch(r"[0-9]{1,7}", gpu_numa):
            raise _err(row.line, f"{row.label}'s GPU NUMA ID {gpu_numa!r}", "a number or N/A")
        values["gpu_numa_id"] = int(gpu_numa)
    return values


def _nic_legend(lines: list[str], start: int) -> dict[str, str]:
    """``NIC#`` -> device name from a ``NIC Legend:`` block after the table."""
    legend: dict[str, str] = {}
    for number in range(start, len(lines)):
        match = _NIC_LEGEND_RE.fullmatch(lines[number])
        if match is None:
            continue
        alias, name = match.groups()
        if alias in legend and legend[alias] != name:
            raise _err(number + 1, f"NIC Legend names {alias} twice", "one entry per NIC")
        legend[alias] = name
    return legend


def _build(header: _Header, rows: list[_Row], legend: dict[str, str], gpu_rows: int) -> Topology:
    """The topology of the first ``gpu_rows`` GPUs (all rows for a complete table)."""
    ngpu = len(header.gpus)
    nics: list[Nic] = []
    for col in header.nics:
        name = legend.get(col)
        nics.append(Nic(name=name, alias=col) if name else Nic(name=col))
    names = [n.name for n in nics]
    if len(set(names)) != len(names):
        raise _err(header.line, "two NIC columns map to the same device", "distinct NIC names")
    gpus = []
    links: dict[tuple[int, int], PairLink] = {}
    nic_levels: dict[tuple[str, int], PcieLevel] = {}
    for r in range(gpu_rows):
        row, index = rows[r], header.gpus[r]
        gpus.append(Gpu(index=index, **_affinity_values(row)))  # type: ignore[arg-type]
        for c in range(r + 1, gpu_rows):
            links[_key(index, header.gpus[c])] = _link(index, header.gpus[c], row.cells[c])
        for n, nic in enumerate(nics):
            token = row.cells[ngpu + n]
            if token in _LEVEL_NAMES:  # an NV# NIC cell has no PCIe level to keep
                nic_levels[(nic.name, index)] = PcieLevel.from_text(token)
    return Topology(
        gpus=tuple(sorted(gpus, key=lambda g: g.index)),
        links=links,
        nics=tuple(nics),
        nic_levels=nic_levels,
        source="topo-m",
    )


def _key(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a < b else (b, a)


def _link(a: int, b: int, token: str) -> PairLink:
    lo, hi = _key(a, b)
    nv = _NV_RE.fullmatch(token)
    if nv is not None:
        return PairLink(lo, hi, pcie_level=None, nvlinks=int(nv.group(1)))
    return PairLink(lo, hi, pcie_level=PcieLevel.from_text(token))


def parse_topo_m(text: str, *, allow_truncated: bool = False) -> Topology:
    """Parse ``nvidia-smi topo -m`` output.

    Args:
        text: the command's output, possibly with prompt/command lines before the
            table and the legend after it.
        allow_truncated: when the table stops early (a cut copy), return the GPUs
            whose rows and columns are all present instead of raising.

    Returns:
        A topology with every GPU pair's link, the NICs with their PCIe level to each
        GPU, and each GPU's CPU/NUMA affinity (``source="topo-m"``).

    Raises:
        TopologyParseError: the text is not a complete, consistent ``topo -m`` table;
            the error names the line and what was expected there.
    """
    if not isinstance(text, str):
        raise TopologyParseError("topology text must be a string", line=1, expected="str")
    if not text.strip():
        raise _err(1, "topology text is empty", "`nvidia-smi topo -m` output")
    lines = split_lines(text)
    ends_with_newline = text.endswith(("\n", "\r"))
    if ends_with_newline:
        lines = lines[:-1]
    header = _find_header(lines)
    labels = header.labels
    try:
        rows = _parse_rows(lines, header, ends_with_newline)
    except _Truncated as cut:
        gpu_rows = min(len(cut.rows), len(header.gpus))
        if not allow_truncated or gpu_rows == 0:
            raise cut.error from None
        rows = cut.rows
        if rows and not ends_with_newline and rows[-1].line == len(lines):
            rows[-1].affinity = {}  # its last value may be cut mid-token
        _check_matrix(rows, labels)
        legend = _nic_legend(lines, rows[-1].line)
        return replace(_build(header, rows, legend, gpu_rows), truncated=True)
    _check_matrix(rows, labels)
    legend = _nic_legend(lines, rows[-1].line)
    return _build(header, rows, legend, len(header.gpus))


def load_topology_text(
    topo_text: str, p2p_text: str | None = None, *, allow_truncated: bool = False
) -> Topology:
    """Parse ``topo -m`` text and, when given, merge a ``topo -p2p`` matrix into it.

    Raises:
        TopologyParseError: either text is malformed, or the P2P matrix names GPUs
            the ``topo -m`` table does not have.
    """
    topo = parse_topo_m(topo_text, allow_truncated=allow_truncated)
    if p2p_text is None:
        return topo
    status = parse_p2p(p2p_text)
    known = set(topo.gpu_indices)
    named = {i for pair in status for i in pair}
    # A one-GPU machine's matrix holds no pair at all (only ``X``): nothing to compare.
    if not allow_truncated and len(known) > 1 and named != known:
        extra = sorted(named ^ known)
        raise TopologyParseError(
            f"the P2P matrix and the topo -m table disagree about GPU{extra[0]}",
            line=1,
            expected="both outputs from the same machine",
        )
    return topo.with_p2p({k: v for k, v in status.items() if set(k) <= known})
