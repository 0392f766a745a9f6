"""run_probe / build_probe / parse_size against stand-in binaries and a stand-in nvcc."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import dlc.probe.runner as runner
from dlc.errors import ProbeError, ProbeOutputError, ProbeRunError
from dlc.probe.runner import build_probe, parse_size, run_probe

from .helpers import SAMPLE_PATH, fake_probe, recorded_argv


def test_run_passes_the_options_and_reads_the_json(tmp_path: Path, sample_text: str) -> None:
    binary = fake_probe(tmp_path, stdout=sample_text)
    result = run_probe(binary, gpus=[0, 3], size="1M", iters=7, repeats=2)
    assert recorded_argv(tmp_path) == [
        "--size",
        str(1 << 20),
        "--gpus",
        "0,3",
        "--iters",
        "7",
        "--repeats",
        "2",
    ]
    assert len(result.pairs) == len(json.loads(sample_text)["pairs"])


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        pytest.param(3, "no_device", id="no-device"),
        pytest.param(4, "no_driver", id="no-driver"),
        pytest.param(1, "cuda_error", id="cuda-error"),
    ],
)
def test_error_line_becomes_probe_run_error(tmp_path: Path, code: int, kind: str) -> None:
    line = {"version": 1, "error": {"exit_code": code, "kind": kind, "message": f"m-{kind}"}}
    binary = fake_probe(tmp_path, stdout=json.dumps(line) + "\n", code=code)
    with pytest.raises(ProbeRunError) as info:
        run_probe(binary)
    assert (info.value.code, info.value.kind) == (code, kind)
    assert f"m-{kind}" in str(info.value)


@pytest.mark.parametrize(
    ("stdout", "code", "stderr", "error", "needle"),
    [
        pytest.param(
            "", 139, "Segmentation fault\n", ProbeError, "exit code 139: Segm", id="crash"
        ),
        pytest.param("garbage", 0, "", ProbeOutputError, "not JSON", id="garbage-exit-0"),
        pytest.param(SAMPLE_PATH.read_text(), 1, "", ProbeError, "exited 1 although", id="rc"),
    ],
)
def test_unusable_runs_are_probe_errors(
    tmp_path: Path, stdout: str, code: int, stderr: str, error: type, needle: str
) -> None:
    binary = fake_probe(tmp_path, stdout=stdout, code=code, stderr=stderr)
    with pytest.raises(error, match=needle):
        run_probe(binary)


def test_timeout_is_a_probe_error(tmp_path: Path) -> None:
    binary = fake_probe(tmp_path, stdout="{}", sleep=5)
    with pytest.raises(ProbeError, match="ran longer than 1s"):
        run_probe(binary, timeout=1)


def test_missing_binary_says_how_to_build(tmp_path: Path) -> None:
    with pytest.raises(ProbeError, match="not found: build it with `make -C native/p2p_probe`"):
        run_probe(tmp_path / "nope")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("64M", 64 << 20, id="mebibytes"),
        pytest.param("512k", 512 << 10, id="kibibytes-lower"),
        pytest.param("1G", 1 << 30, id="gibibytes"),
        pytest.param("2MiB", 2 << 20, id="mib-suffix"),
        pytest.param("4096", 4096, id="plain-bytes"),
        pytest.param(4096, 4096, id="int"),
    ],
)
def test_parse_size(text: str | int, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["0", "-1M", "64X", "M", "", "65G", 0])
def test_parse_size_rejects(text: str | int) -> None:
    with pytest.raises(ProbeError, match="^--size: "):
        parse_size(text)


@pytest.mark.parametrize("gpus", [[0, 0], [-1, 2]], ids=["repeated", "negative"])
def test_bad_gpu_list_is_refused_before_running(tmp_path: Path, gpus: list[int]) -> None:
    binary = fake_probe(tmp_path, stdout="{}")
    with pytest.raises(ProbeError, match="^--gpus: "):
        run_probe(binary, gpus=gpus)
    assert not (tmp_path / "argv.json").exists()


@pytest.fixture
def no_nvcc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No nvcc anywhere; the probe sources are a private copy. Returns that copy."""
    monkeypatch.delenv(runner.BINARY_ENV, raising=False)
    monkeypatch.setattr(runner, "find_nvcc", lambda: None)
    source = tmp_path / "p2p_probe"
    shutil.copytree(runner.probe_source_dir(), source, ignore=shutil.ignore_patterns("build"))
    monkeypatch.setattr(runner, "probe_source_dir", lambda: source)
    return source


def test_build_without_nvcc_says_what_to_do(no_nvcc: Path) -> None:
    with pytest.raises(ProbeError) as info:
        build_probe()
    assert str(info.value) == ("nvcc not found: install the CUDA toolkit or pass --probe-json FILE")


def test_build_without_nvcc_uses_an_existing_binary(no_nvcc: Path) -> None:
    binary = no_nvcc / "build" / "p2p_probe"
    binary.parent.mkdir()
    binary.write_text("prebuilt")
    assert build_probe() == binary
    with pytest.raises(ProbeError, match="nvcc not found"):
        build_probe(force=True)


def test_failing_compiler_is_reported(no_nvcc: Path, tmp_path: Path) -> None:
    # An "nvcc" that knows no GPU architecture: the Makefile refuses to build.
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text("#!/bin/sh\nexit 0\n")
    nvcc.chmod(0o755)
    runner.find_nvcc = lambda: str(nvcc)  # monkeypatched by no_nvcc, restored after the test
    with pytest.raises(ProbeError, match=r"building the probe failed: .*supports none of sm_"):
        build_probe()


def test_binary_from_the_environment_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    binary = tmp_path / "probe-cuda12"
    monkeypatch.setenv(runner.BINARY_ENV, str(binary))
    with pytest.raises(ProbeError, match="DLC_P2P_PROBE=.*no such file"):
        build_probe()
    binary.write_text("x")
    assert build_probe() == binary


def test_find_nvcc_searches_path_then_the_cuda_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    on_path = tmp_path / "bin" / "nvcc"
    on_path.parent.mkdir()
    on_path.write_text("#!/bin/sh\n")
    on_path.chmod(0o755)
    fallback = tmp_path / "cuda" / "bin" / "nvcc"
    monkeypatch.setattr(runner, "NVCC_FALLBACK", fallback)
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert runner.find_nvcc() == str(on_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert runner.find_nvcc() is None
    fallback.parent.mkdir(parents=True)
    fallback.write_text("#!/bin/sh\n")
    assert runner.find_nvcc() == str(fallback)


def test_without_a_checkout_the_packaged_sources_are_built_in_the_user_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    checkout = runner.checkout_source_dir()
    monkeypatch.setattr(runner, "checkout_source_dir", lambda: tmp_path / "no-checkout")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    source = runner.probe_source_dir()
    assert source.parent == tmp_path / "cache" / "dlc"
    for name in ("Makefile", "p2p_probe.cu"):
        assert (source / name).read_bytes() == (checkout / name).read_bytes()
    assert runner.default_binary() == source / "build" / "p2p_probe"
    monkeypatch.setattr(runner, "PACKAGED_SOURCES", tmp_path / "missing")
    with pytest.raises(ProbeError, match="probe sources not found in .*reinstall dlc"):
        runner.probe_source_dir()
