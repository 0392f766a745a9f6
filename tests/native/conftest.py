"""Fixtures of the native tests: one build of the CUDA shim, its stub driver and its client.

Tests only read the build (they preload the shim, put the stub first on ``LD_LIBRARY_PATH``
and run the client), so the whole session shares one ``make``.
"""

from __future__ import annotations

import pytest

from tests.native.shim_helpers import ShimBuild, build


@pytest.fixture(scope="session")
def shim_build(tmp_path_factory: pytest.TempPathFactory) -> ShimBuild:
    """``make -C native/cuda_shim test-stub`` into a private folder, once."""
    return build(tmp_path_factory.mktemp("shim-build"))
