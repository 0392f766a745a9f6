"""``scripts/setup-python.sh`` keeps the installer's output in a log of its own checkout: two
checkouts set up at once (several engineers on one machine) truncated each other's log."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.fixture_files import REPO_ROOT


def _fail_setup(checkout, tmp_path):
    python = tmp_path / "python"
    # imports pass (no apt-get); creating the venv fails, so the script shows its log
    python.write_text('#!/bin/sh\n[ "$1" = -c ] && exit 0\necho "boom from $PWD" >&2\nexit 1\n')
    python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "DLC_SETUP_LOG"}
    env.update(PYTHON=str(python), VENV=str(tmp_path / "venv"), TMPDIR=str(tmp_path))
    return subprocess.run(["bash", str(checkout / "scripts" / "setup-python.sh")], cwd=checkout,
                          env=env, capture_output=True, text=True, timeout=60)  # fmt: skip


def test_each_checkout_has_its_own_setup_log(tmp_path):
    other = tmp_path / "other-checkout"
    (other / "scripts").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "scripts" / "setup-python.sh", other / "scripts")
    logs = []
    for checkout in (REPO_ROOT, other):
        done = _fail_setup(checkout, tmp_path)
        assert done.returncode == 1 and f"boom from {checkout}" in done.stderr
        logs.append(done.stderr.rsplit("the whole output is in ", 1)[1].strip())
    assert logs[0] != logs[1]
    assert f"boom from {REPO_ROOT}" in Path(logs[0]).read_text()  # not truncated by the other
