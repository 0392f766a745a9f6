"""The native probe: it compiles with nvcc, and on a machine without GPUs it exits with
the documented code and prints one JSON error line.

Compiling takes ~10 s here (5 GPU generations + PTX; ~5 s for one), so the build runs
once per session and the tests are marked ``slow``. Without ``nvcc`` they FAIL:
``make test`` installs it first (``scripts/cuda.sh``).
"""

from __future__ import annotations

import ctypes.util
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from dlc.errors import ProbeRunError
from dlc.probe.runner import find_nvcc, probe_source_dir, run_probe

pytestmark = pytest.mark.slow

EXIT_KIND = {1: "cuda_error", 2: "usage", 3: "no_device", 4: "no_driver"}
#: the GPU generations the Makefile asks for (kept in step with WANT_SM there)
WANT_SM = ["70", "75", "80", "86", "89", "90"]


@pytest.fixture(scope="session")
def nvcc() -> str:
    found = find_nvcc()
    if found is None:
        pytest.fail(
            "nvcc not found: install the CUDA toolkit (bash scripts/cuda.sh) to build the probe",
            pytrace=False,
        )
    return found


@pytest.fixture(scope="session")
def probe_binary(nvcc: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The probe built by its Makefile into a private folder."""
    out = tmp_path_factory.mktemp("p2p-probe-build")
    proc = subprocess.run(
        ["make", "-C", str(probe_source_dir()), f"NVCC={nvcc}", f"BUILD_DIR={out}"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, f"make failed:\n{proc.stdout}\n{proc.stderr}"
    return out / "p2p_probe"


def _run(
    binary: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(binary), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


def _error_line(proc: subprocess.CompletedProcess) -> dict:
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, f"expected one JSON line, got {proc.stdout!r}"
    doc = json.loads(lines[0])
    assert doc["version"] == 1
    assert doc["error"]["exit_code"] == proc.returncode
    assert doc["error"]["kind"] == EXIT_KIND[proc.returncode]
    return doc["error"]


def test_build_embeds_the_supported_architectures(nvcc: str, probe_binary: Path) -> None:
    assert probe_binary.is_file() and os.access(probe_binary, os.X_OK)
    listed = subprocess.run([nvcc, "--list-gpu-code"], capture_output=True, text=True).stdout
    supported = {line.removeprefix("sm_") for line in listed.split() if line.startswith("sm_")}
    chosen = [sm for sm in WANT_SM if sm in supported]
    assert chosen, "this nvcc supports none of the wanted GPU generations"
    version = _run(probe_binary, "--version")
    assert version.returncode == 0
    archs = " ".join([f"sm_{sm}" for sm in chosen] + [f"compute_{chosen[-1]}"])
    assert f"archs {archs})" in version.stdout


def test_cuda_runtime_is_linked_statically(probe_binary: Path) -> None:
    if shutil.which("ldd") is None:
        pytest.fail("ldd not found (Debian: libc-bin)")
    linked = subprocess.run(["ldd", str(probe_binary)], capture_output=True, text=True).stdout
    assert "libcudart" not in linked
    assert "libcuda." not in linked  # the driver is loaded at run time, so none is needed


def _expected_no_gpu_code() -> int:
    # With CUDA_VISIBLE_DEVICES="" a machine with a driver has no visible device (3);
    # without libcuda at all the runtime finds no driver (4).
    return 4 if ctypes.util.find_library("cuda") is None else 3


@pytest.mark.parametrize("args", [[], ["--table"], ["--gpus", "0,1", "--size", "1M"]])
def test_no_gpu_exits_with_its_code_and_one_json_line(probe_binary: Path, args: list[str]) -> None:
    proc = _run(probe_binary, *args, env={"CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == _expected_no_gpu_code()
    error = _error_line(proc)
    assert error["message"]
    assert proc.stderr == ""


def test_run_probe_turns_the_no_gpu_line_into_probe_run_error(
    probe_binary: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(ProbeRunError) as info:
        run_probe(probe_binary, size="1M", timeout=60)
    assert info.value.code == _expected_no_gpu_code()
    assert "--probe-json FILE" in str(info.value)


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        pytest.param(["--size", "0"], "--size", id="size-zero"),
        pytest.param(["--size", "12Q"], "--size", id="size-bad-suffix"),
        pytest.param(["--size"], "--size", id="size-missing-value"),
        pytest.param(["--size=65G"], "--size", id="size-too-big"),
        pytest.param(["--gpus", "0,0"], "--gpus", id="gpus-repeated"),
        pytest.param(["--gpus", "a"], "--gpus", id="gpus-not-a-number"),
        pytest.param(["--gpus", "1,"], "--gpus", id="gpus-trailing-comma"),
        pytest.param(["--iters", "0"], "--iters", id="iters-zero"),
        pytest.param(["--repeats", "2x"], "--repeats", id="repeats-junk"),
        pytest.param(["--latency-size", "2M", "--size", "1M"], "--latency-size", id="lat-gt"),
        pytest.param(["--bogus"], "unknown argument '--bogus'", id="unknown-flag"),
    ],
)
def test_usage_errors_exit_2_naming_the_flag(
    probe_binary: Path, args: list[str], flag: str
) -> None:
    proc = _run(probe_binary, *args)
    assert proc.returncode == 2
    assert _error_line(proc)["message"].startswith(flag)
    assert "usage: p2p_probe" in proc.stderr


def test_help_documents_the_exit_codes(probe_binary: Path) -> None:
    proc = _run(probe_binary, "--help")
    assert proc.returncode == 0
    assert "3 no CUDA device, 4 no/old driver" in proc.stdout


def test_share_check_client_builds_and_fails_cleanly_without_a_gpu(nvcc, tmp_path):
    """`make gpu-check`'s MPS client compiles here; with no driver it prints one JSON error."""
    source = probe_source_dir().parent / "share_check"
    proc = subprocess.run(
        ["make", "-C", str(source), f"NVCC={nvcc}", f"BUILD_DIR={tmp_path}", "WANT_SM=90"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, f"make failed:\n{proc.stdout}\n{proc.stderr}"
    usage = _run(tmp_path / "share_check", "bogus")
    assert usage.returncode == 2 and "usage: share_check" in usage.stderr
    done = _run(tmp_path / "share_check", "alloc", "16")
    assert done.returncode == 1
    assert set(json.loads(done.stdout)) == {"error"}
