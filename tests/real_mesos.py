"""Start and stop the real Apache Mesos 1.11 master + agent from tests.

Wraps ``scripts/mesos-local.sh`` (which wraps ``../shared/mesos-local``). A master that
cannot start FAILS the test (never skips): CI builds it before the tests run.

The agent authenticates its executors by default (``--authenticate_http_executors`` with a JWT
key, as docs/install.md asks of every DLC agent): executors must send the token the agent gave
them. Pass ``MESOS_AUTHENTICATE_HTTP_EXECUTORS="false"`` for a test of the insecure mode.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "mesos-local.sh"


_KEY_FILE: Path | None = None


def executor_secret_key() -> Path:
    """A JWT signing key file for the agents of this test process (mode 0600, made once)."""
    global _KEY_FILE
    if _KEY_FILE is None:
        folder = Path(tempfile.mkdtemp(prefix="dlc-mesos-jwt-"))
        key = folder / "executor-secret.key"
        key.touch(mode=0o600)
        key.write_text(secrets.token_urlsafe(32))
        _KEY_FILE = key
    return _KEY_FILE


def executor_auth_vars() -> dict[str, str]:
    """The ``MESOS_*`` variables that make the agent authenticate its executors (JWT)."""
    return {
        "MESOS_AUTHENTICATE_HTTP_EXECUTORS": "true",
        "MESOS_JWT_SECRET_KEY": str(executor_secret_key()),
        # the agent builds its executor realm's authenticators from --http_authenticators
        "MESOS_HTTP_AUTHENTICATORS": "jwt",
    }


def venv_env(**mesos_vars: str) -> dict[str, str]:
    """The environment for the master: this interpreter's bin/ first on PATH (the agent's
    executors run the ``python3`` found there), executor authentication on (unless
    ``MESOS_AUTHENTICATE_HTTP_EXECUTORS="false"``), plus the given ``MESOS_*`` variables."""
    env = dict(os.environ)
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = f"{venv_bin}:{env.get('PATH', '')}"
    env["VENV"] = str(Path(venv_bin).parent)
    if mesos_vars.get("MESOS_AUTHENTICATE_HTTP_EXECUTORS", "true") == "true":
        env.update(executor_auth_vars())
    env.update(mesos_vars)
    return env


def ensure_built(env: dict[str, str]) -> None:
    """Build the real Mesos (``scripts/mesos-local.sh build``; quick when already built)."""
    proc = subprocess.run(
        ["bash", str(SCRIPT), "build"], env=env, capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        pytest.fail(f"cannot build the real Mesos: {proc.stderr.strip()[-800:]}", pytrace=False)


class RealMesos:
    """One master + agent process, started and stopped through ``scripts/mesos-local.sh``.

    Attributes:
        address: ``"127.0.0.1:PORT"`` once started.
        run_dir: the run directory (the agent's work dir, where sandboxes live).
    """

    def __init__(self, run_dir: Path, env: dict[str, str]):
        self.run_dir = run_dir
        self.env = env
        self.address = ""

    def start(self, port: str = "") -> str:
        """Start on ``port`` (empty: a free one) and return the master address."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            ["bash", str(SCRIPT), "start", port, str(self.run_dir)],
            capture_output=True, text=True, env=self.env, cwd=ROOT, timeout=120,
        )  # fmt: skip
        if proc.returncode != 0:
            pytest.fail(f"real Mesos did not start: {proc.stderr or proc.stdout}", pytrace=False)
        self.address = proc.stdout.split()[0]
        return self.address

    def stop(self, check: bool = False) -> None:
        """Stop the master, the agent and every executor they started."""
        subprocess.run(
            ["bash", str(SCRIPT), "stop", str(self.run_dir)],
            env=self.env, cwd=ROOT, check=check, timeout=60,
        )  # fmt: skip


@contextmanager
def real_mesos_master(run_dir: Path, **mesos_vars: str) -> Iterator[RealMesos]:
    """A built and started :class:`RealMesos` configured by ``MESOS_*`` variables, stopped on
    exit."""
    mesos = RealMesos(run_dir, venv_env(**mesos_vars))
    ensure_built(mesos.env)
    mesos.start()
    try:
        yield mesos
    finally:
        mesos.stop()
