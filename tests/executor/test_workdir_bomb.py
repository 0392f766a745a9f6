"""A decompression bomb as a ``--workdir`` snapshot (red-team 2026-11-23).

One header declaring a file far over the unpack cap, then gzip members of zeros: reading all
members' headers first (``getmembers``) decompressed everything behind the header (64 MiB of
upload is about 64 GiB of zeros: minutes of executor CPU; 4 GiB took 42 s here) before the
cap refused it. The entries are now checked as each header is read.
"""

from __future__ import annotations

import gzip
import io
import tarfile

import pytest

from dlc.errors import ContainerError
from dlc.executor import workdir


class _CountingBytes(io.BytesIO):
    """A BytesIO that remembers the furthest position read."""

    furthest = 0

    def read(self, size=-1):
        data = super().read(size)
        type(self).furthest = max(type(self).furthest, self.tell())
        return data


def test_a_bomb_is_refused_at_its_first_header_without_inflating_the_rest(tmp_path, monkeypatch):
    header = tarfile.TarInfo("zeros.bin")
    header.size = 8 << 30  # declared: 8 GiB
    zeros = gzip.compress(b"\0" * (1 << 20), compresslevel=9)  # 1 MiB of zeros, ~1 KiB
    bomb = gzip.compress(header.tobuf(format=tarfile.GNU_FORMAT)) + zeros * 512
    monkeypatch.setattr(workdir.io, "BytesIO", _CountingBytes)
    with pytest.raises(ContainerError, match="unpacks to over 256 MiB"):
        workdir.unpack_snapshot(bomb, tmp_path)
    assert _CountingBytes.furthest < len(bomb) // 4  # stopped near the header
    assert list(tmp_path.iterdir()) == []
