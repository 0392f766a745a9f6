"""Builds the CUDA shim, the stub driver and the test client, and drives client processes.

The client (``native/cuda_shim/test/client.c``) answers one line per command on stdout; the
helpers here read those lines with a deadline so a wedged client fails the test instead of
hanging it.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIM_DIR = ROOT / "native" / "cuda_shim"
DEADLINE_S = 10.0


@dataclass(frozen=True)
class ShimBuild:
    """Paths of one build: the shim, the stub ``libcuda.so.1`` folder and the client."""

    shim: Path
    stub_dir: Path
    client: Path


def build(out: Path) -> ShimBuild:
    """``make -C native/cuda_shim test-stub`` into ``out`` (fails when gcc is missing)."""
    if shutil.which("gcc") is None or shutil.which("make") is None:
        pytest.fail("gcc/make not installed (make setup installs build-essential)")
    done = subprocess.run(
        ["make", "-s", "-C", str(SHIM_DIR), f"BUILD_DIR={out}", "test-stub"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return ShimBuild(out / "libdlc_cuda_shim.so", out / "stub", out / "client")


def write_config(path: Path, state: Path | None, limit_mib: int | None, context_mib: int = 0):
    """A shim config file (what the executor renders: :func:`shim_config_text`)."""
    lines = [f"context_mib={context_mib}"]
    if state is not None:
        lines.append(f"state_file={state}")
    if limit_mib is not None:
        lines.append(f"limit_mib.0={limit_mib}")
    path.write_text("\n".join(lines) + "\n")
    return path


class Client:
    """One client process; :meth:`ask` sends a command and returns its answer line."""

    def __init__(self, build_: ShimBuild, mode: str, env: dict[str, str]) -> None:
        # stderr to a file: a pipe nobody reads would block a chatty client
        self.stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(  # noqa: S603 - our own test binary
            [str(build_.client), mode],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
            env=env, text=True, bufsize=1,
        )  # fmt: skip
        assert self.read() == "ready"

    def errors(self) -> str:
        """What the client (and the shim in it) wrote to stderr so far."""
        self.stderr.seek(0)
        return self.stderr.read()

    def read(self) -> str:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            left = deadline - time.monotonic()
            assert left > 0, "client did not answer in time"
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                line = self.proc.stdout.readline()
                assert line, f"client ended: {self.errors()}"
                return line.strip()

    def ask(self, command: str) -> str:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.read()

    def alloc(self, mib: int, kind: str = "mem") -> str:
        return self.ask(f"alloc {kind} {mib}")

    def info(self) -> tuple[int, int]:
        """(free MiB, total MiB) as cuMemGetInfo reports them."""
        answer = self.ask("info").split()
        assert answer[0] == "info", answer
        return int(answer[1]), int(answer[2])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
            except BrokenPipeError:
                pass
            try:
                self.proc.wait(timeout=DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=DEADLINE_S)
        for stream in (self.proc.stdin, self.proc.stdout, self.stderr):
            stream.close()


def shim_env(build_: ShimBuild, config: Path | None, preload: bool = True, **extra: str):
    """The environment of a client: the stub driver found first, the shim preloaded."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DLC_SHIM", "LD_PRELOAD"))}
    env["LD_LIBRARY_PATH"] = str(build_.stub_dir)
    if preload:
        env["LD_PRELOAD"] = str(build_.shim)
    if config is not None:
        env["DLC_SHIM_CONFIG"] = str(config)
    env.update(extra)
    return env
