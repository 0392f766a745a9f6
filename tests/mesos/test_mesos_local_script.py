"""Tests of scripts/mesos-local.sh (build/start/stop of the real Mesos master for tests and CI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "mesos-local.sh"


def run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (this machine's init may not reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        pytest.param(["frob"], {}, "usage:", id="unknown-command"),
        pytest.param(["stop"], {}, "usage:", id="stop-without-run-dir"),
        pytest.param(["stop", "/nonexistent"], {}, "nothing to stop", id="stop-nothing"),
        pytest.param(
            ["start"], {"DLC_MESOS_BUILD": "/nonexistent"}, "not built", id="start-unbuilt"
        ),
    ],
)
def test_script_errors_are_one_line(args: list[str], env: dict[str, str], message: str) -> None:
    result = run(args, **env)
    assert result.returncode == 1
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_start_refuses_a_python3_without_pymesos(tmp_path: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    (build / "mesos-local-host").write_text("#!/bin/sh\nexit 1\n")
    (build / "mesos-local-host").chmod(0o755)
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "python3").write_text("#!/bin/sh\nexit 1\n")
    (fake_bin / "python3").chmod(0o755)
    result = run(
        ["start"],
        DLC_MESOS_BUILD=str(build),
        VENV=str(tmp_path / "no-venv"),
        PATH=f"{fake_bin}:/usr/bin:/bin",
    )
    assert result.returncode == 1
    assert "cannot import pymesos" in result.stderr


@pytest.mark.mesos
def test_start_applies_resources_and_attributes_then_stop_ends_it(tmp_path: Path) -> None:
    assert run(["build"]).returncode == 0
    venv = str(Path(sys.executable).parent.parent)
    result = run(
        ["start", "", str(tmp_path)],
        VENV=venv,
        MESOS_RESOURCES="cpus:2;mem:1024;gpus:2;gpu_ids:{0,1}",
        MESOS_ATTRIBUTES="gpu_model:Tesla_P100;dlc_topo:x1",
    )
    assert result.returncode == 0, result.stderr
    address, run_dir = result.stdout.split()
    assert address.startswith("127.0.0.1:") and run_dir == str(tmp_path)
    pid = int((tmp_path / "host.pid").read_text())
    try:
        with urllib.request.urlopen(f"http://{address}/master/state", timeout=10) as reply:
            (agent,) = json.load(reply)["slaves"]
        assert agent["resources"]["gpu_ids"] == "{0, 1}"
        assert agent["attributes"] == {"gpu_model": "Tesla_P100", "dlc_topo": "x1"}
    finally:
        assert run(["stop", str(tmp_path)]).returncode == 0
    assert not running(pid)


def test_build_gives_the_agent_a_working_hmac_sha256() -> None:
    """The shared build stubs OpenSSL 1.0 as abort-if-called; an agent authenticating its
    executors signs their JWTs with ``HMAC(EVP_sha256(), ...)``. The build forwards those
    calls to OpenSSL 3 (scripts/mesos-hmac-shim.c): the result is the real HMAC-SHA256."""
    import ctypes
    import hashlib
    import hmac

    assert run(["build"]).returncode == 0
    build = Path(os.environ.get("DLC_MESOS_BUILD", ROOT / "build" / "mesos"))
    lib = ctypes.CDLL(str(build / "libcrypto.so.1.0.0"))
    lib.EVP_sha256.restype = ctypes.c_void_p
    lib.HMAC.restype = ctypes.c_void_p
    c = ctypes
    lib.HMAC.argtypes = [c.c_void_p, c.c_char_p, c.c_int, c.c_char_p, c.c_size_t, c.c_char_p,
                         c.POINTER(c.c_uint)]  # fmt: skip
    out, size = ctypes.create_string_buffer(64), ctypes.c_uint(0)
    key, data = b"secret-key", b"header.claims"
    lib.HMAC(lib.EVP_sha256(), key, len(key), data, len(data), out, ctypes.byref(size))
    assert out.raw[: size.value] == hmac.new(key, data, hashlib.sha256).digest()
    assert (build / "libexec" / "mesos-executor").read_text().count("Bearer") == 1
