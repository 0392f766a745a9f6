"""Lines of saved nvidia-smi output, as an editor numbers them (shared by both parsers)."""

from __future__ import annotations

import re

#: ANSI control sequences (CSI ... final byte). nvidia-smi 580 underlines the header row of
#: ``topo -m`` and ``topo -p2p`` with ``ESC[4m`` ... ``ESC[0m`` even when its output is a pipe or
#: a file (seen on an H100 with driver 580.159.04), so saved tables carry them.
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def split_lines(text: str) -> list[str]:
    """Split on ``\\n``, ``\\r\\n`` or ``\\r`` only, so line numbers match an editor's.

    ANSI control sequences are removed first: they are formatting, never table content.
    """
    return re.split(r"\r\n|\r|\n", _ANSI_RE.sub("", text))
