"""A reader that stops early (``dlc images list | head -2``) ends the command quietly."""

from __future__ import annotations

import subprocess
import sys


def _run_with_closed_stdout(*args: str) -> tuple[int, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "dlc", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.stdout.close()  # the reader is gone before the command writes a line
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


def test_closed_pipe_is_a_quiet_exit_not_an_internal_error():
    code, err = _run_with_closed_stdout("images", "list")
    assert code == 0  # the reader had enough: not an error (issue 16)
    assert err == ""


def test_closed_pipe_on_help_is_quiet_too():
    code, err = _run_with_closed_stdout("--help")
    assert code == 1  # click's own help path answers EPIPE with exit 1 before DLC's code runs
    assert "Traceback" not in err and "internal error" not in err
