"""Property tests: arbitrary and mutated text never raises anything but a parse error.

Every failure must be a :class:`~dlc.errors.TopologyParseError` whose message names a
line (``line N: ...``) and says what was expected there.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlc.errors import TopologyParseError
from dlc.topology.model import Topology
from dlc.topology.parse_p2p import parse_p2p
from dlc.topology.parse_topo import parse_topo_m
from tests.fixture_files import complete_topo_files, p2p_files, truncated_topo_files

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TOPO_TEXTS = [p.read_text() for p in complete_topo_files() + truncated_topo_files()]
P2P_TEXTS = [p.read_text() for p in p2p_files()]
# Tokens that make mutations land on meaningful parser states.
TOKENS = [
    "X",
    "NV1",
    "NV12",
    "SYS",
    "SOC",
    "PIX",
    "N/A",
    "GPU0",
    "GPU9",
    "mlx5_0",
    "NIC0",
    "OK",
    "GNS",
    "0-7",
    "",
    "\t",
    "  ",
    "CPU Affinity",
    "NIC0: mlx5_0",
    "\r",
    "GPU0GPU1",
]


def _check_error(err: TopologyParseError, text: str) -> None:
    assert err.line is not None and err.line >= 1
    assert err.line <= max(1, len(re.split(r"\r\n|\r|\n", text)))
    assert str(err).startswith(f"line {err.line}: ")
    assert err.expected, "the error must say what was expected"


def _parse_both(text: str) -> None:
    for allow in (False, True):
        try:
            result = parse_topo_m(text, allow_truncated=allow)
        except TopologyParseError as err:
            _check_error(err, text)
        else:
            assert isinstance(result, Topology) and result.gpus
            n = len(result.gpus)
            assert len(result.links) == n * (n - 1) // 2
    try:
        status = parse_p2p(text)
    except TopologyParseError as err:
        _check_error(err, text)
    else:
        assert all(a != b for a, b in status)


@st.composite
def mutated(draw, texts: list[str]) -> str:
    """A fixture with lines deleted/duplicated/swapped and tokens replaced."""
    lines = re.split(r"(?<=\n)", draw(st.sampled_from(texts)))
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "token", "cut"]))
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "cut":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
            lines = lines[: i + 1]
        else:
            parts = re.split(r"(\s+)", lines[i])
            k = draw(st.integers(0, len(parts) - 1))
            parts[k] = draw(st.sampled_from(TOKENS) | st.text(max_size=6))
            lines[i] = "".join(parts)
    return "".join(lines)


@FUZZ
@given(st.text(max_size=400))
def test_arbitrary_text_only_raises_parse_error(text: str):
    _parse_both(text)


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=40).map(" ".join))
def test_token_soup_only_raises_parse_error(text: str):
    _parse_both(text.replace("  ", "\n"))


@FUZZ
@given(mutated(TOPO_TEXTS))
def test_mutated_topo_text_only_raises_parse_error(text: str):
    _parse_both(text)


@FUZZ
@given(mutated(P2P_TEXTS))
def test_mutated_p2p_text_only_raises_parse_error(text: str):
    _parse_both(text)
