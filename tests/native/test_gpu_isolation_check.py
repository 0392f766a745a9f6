"""scripts/gpu_isolation_check.py without a GPU: its flow, timeouts, budget and verdicts.

The GPU is played by small fakes on PATH (``nvidia-smi``, ``nvidia-cuda-mps-control``), a fake
``nvcc`` that "builds" shell stand-ins for the CUDA tenant programs (a co-tenant dies when it
runs under an MPS daemon with the faulting one, as on the real H200), and a fake python for
the PyTorch helpers. The shim and alloc_bench are real builds, run against the stub driver.
The CUDA programs themselves are compiled with the real nvcc where it is installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from tests.native.shim_helpers import ROOT

SCRIPT = ROOT / "scripts" / "gpu_isolation_check.py"


def _load():
    spec = importlib.util.spec_from_file_location("gpu_isolation_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_isolation_check"] = module
    spec.loader.exec_module(module)
    return module


iso = _load()

FAKES = {
    "nvidia-smi": 'echo "NVIDIA H200, 580.159.04, 143771, 9.0"\n',
    "nvidia-cuda-mps-control": """
pipe="$CUDA_MPS_PIPE_DIRECTORY"
if [ "$1" = "-d" ]; then mkdir -p "$pipe"; touch "$pipe/control"; exit 0; fi
read line
[ "$line" = quit ] && rm -f "$CUDA_MPS_PIPE_DIRECTORY/control"
exit 0
""",
    # "nvcc ... -o OUT SRC.cu": install the stand-in named after SRC
    "nvcc": """
while [ $# -gt 0 ]; do case "$1" in -o) out="$2"; shift;; *.cu) src="$1";; esac; shift; done
cp "$(dirname "$0")/stand-in-$(basename "$src" .cu)" "$out"
""",
    "stand-in-tenant": """
echo "started $2"
sleep 0.5
case "$CUDA_MPS_PIPE_DIRECTORY" in
  */dlc-iso-mps-*) sleep 2; echo "error $2 an illegal memory access was encountered"; exit 1;;
esac
echo "done $2 42"
""",
    "stand-in-fault": """
echo "started fault"
echo "fault an illegal memory access was encountered"
exit 2
""",
    "python": """
case "$2" in
  *mem_get_info*)  # the shim must be mapped; under ld.so.preload, its config at the fixed path
    if ! grep -q libdlc_cuda_shim /proc/$$/maps; then
      echo 'RESULT {"mem_get_info_mib": [9, 9], "alloc_6gib": "succeeded", "alloc_2gib": "ok"}'
      exit 0
    fi
    if [ -z "$LD_PRELOAD" ] && ! grep -q limit_mib.0=4096 /etc/dlc/cuda-shim.conf; then exit 1; fi
    echo "dlc-cuda-shim[7]: cuMemAlloc of 6144 MiB refused on GPU 0: share 4096 MiB"
    echo -n 'RESULT {"mem_get_info_mib": [3584, 4096], '
    echo '"alloc_6gib": "OutOfMemoryError", "alloc_2gib": "ok"}';;
  *ms_per_step*) echo 'RESULT {"ms_per_step": 12.5, "steps": 30}';;
  *tflops*)
    echo ready
    while [ ! -e "$3" ]; do sleep 0.02; done
    echo 'RESULT {"iters": 10, "elapsed_s": 1.0, "tflops": 100.0}';;
  *torch.__version__*) echo 'RESULT ["2.5.0", "12.4", true]';;
esac
""",
}


@pytest.fixture
def fake_gpu(tmp_path, monkeypatch, shim_build):
    """PATH with the fakes first; the stub driver found by alloc_bench; the fake python."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    for name, body in FAKES.items():
        path = bin_dir / name
        path.write_text("#!/bin/bash\n" + body)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    stub = shim_build.stub_dir  # the session's build (tests/native/conftest.py)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(stub))
    return bin_dir


def test_full_run_on_a_fake_gpu_gives_every_row_and_its_verdict(tmp_path, fake_gpu):
    out = tmp_path / "out"
    started = time.monotonic()
    code = iso.main(["--out", str(out), "--budget-s", "120", "--python", str(fake_gpu / "python")])
    assert time.monotonic() - started < 90
    body = json.loads((out / "results.json").read_text())
    rows = {r["key"]: r for r in body["rows"]}
    assert body["facts"]["gpu"] == "NVIDIA H200" and body["facts"]["torch"] == "2.5.0"
    assert [r for r in rows.values() if r["status"] in ("FAIL", "skipped")] == [], rows
    assert code == 0
    assert rows["1a"]["status"] == "ok" and rows["1a"]["figures"]["refused_by_shim"]
    if os.geteuid() == 0:  # a private /etc needs root
        assert rows["1c"]["detail"].startswith("loaded by /etc/ld.so.preload"), rows["1c"]
    assert (
        not Path("/etc/ld.so.preload").exists()
        or "cuda_shim" not in Path("/etc/ld.so.preload").read_text()
    )  # the host's /etc untouched
    # the stand-ins die under MPS with the faulting tenant, as the H200 showed
    assert rows["3a"]["figures"]["other_lost"] == 1 and rows["3a"]["status"] == "info"
    assert rows["3b"]["figures"]["other_lost"] == 0 and rows["3b"]["status"] == "ok"
    assert rows["3c"]["figures"]["B-1"] == "survived" and rows["3c"]["figures"]["same_lost"] == 1
    assert rows["4a"]["figures"] == {"k1_tflops": 100.0, "k2_tflops": 200.0, "k4_tflops": 400.0}
    assert rows["4c"]["figures"] == {"k1_tflops": 100.0}
    assert rows["2a"]["figures"]["plain_us"] > 0  # real alloc_bench through the stub driver
    assert rows["2b"]["figures"]["change_pct"] == 0
    table = (out / "table.md").read_text()
    assert "| 3b | blast radius: time-slicing with the shim | ok |" in table
    assert not list(Path("/tmp").glob(f"dlc-iso-mps-{os.getpid()}-*/pipe/control"))  # stopped


def test_a_faulty_helper_fails_its_row_and_the_run_goes_on(tmp_path, fake_gpu):
    (fake_gpu / "python").write_text("#!/bin/bash\necho 'Traceback: no torch'; exit 1\n")
    out = tmp_path / "out"
    code = iso.main(["--out", str(out), "--rows", "1a,3b", "--budget-s", "60",
                     "--python", str(fake_gpu / "python")])  # fmt: skip
    rows = {r["key"]: r for r in json.loads((out / "results.json").read_text())["rows"]}
    assert code == 1
    assert rows["1a"]["status"] == "FAIL" and "no result" in rows["1a"]["detail"]
    assert rows["3b"]["status"] == "ok"  # the C tenants did not need PyTorch


def test_without_a_gpu_every_row_is_na_and_the_exit_is_3(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    code = iso.main(["--out", str(tmp_path / "o")])
    rows = json.loads((tmp_path / "o" / "results.json").read_text())["rows"]
    assert code == 3 and {r["status"] for r in rows} == {"n/a"} and len(rows) == len(iso.ROWS)


def test_a_hanging_command_is_killed_with_its_children_at_its_timeout(tmp_path):
    check = iso.Check(tmp_path, 60, sys.executable)
    started = time.monotonic()
    done = check.run(["bash", "-c", "sleep 30 & sleep 30"], timeout=1, name="hang")
    assert done.timed_out and time.monotonic() - started < 10
    assert "[killed after 1 s]" in (tmp_path / "logs" / "hang.txt").read_text()


def test_rows_past_the_budget_are_skipped_and_a_crashing_row_is_recorded(tmp_path):
    check = iso.Check(tmp_path, 60, sys.executable)

    def crash(row):
        raise KeyError("boom")

    check.row("x1", "crashes", crash)
    check.deadline = time.monotonic()  # budget spent
    check.row("x2", "too late", lambda row: None)
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert [(r["key"], r["status"]) for r in rows] == [("x1", "FAIL"), ("x2", "skipped")]
    assert (tmp_path / "logs" / "row-x1-traceback.txt").exists()
    with pytest.raises(iso.OutOfBudget):
        check.timeout(10)


def test_arguments_are_checked():
    with pytest.raises(SystemExit):
        iso.parse_args(["--rows", "1a,9z"])
    with pytest.raises(SystemExit):
        iso.parse_args(["--budget-s", "0"])
    assert iso.parse_args(["--rows", "1a,4b"]).rows == "1a,4b"
    assert iso.nvcc_arch("9.0") == ["-gencode", "arch=compute_90,code=sm_90"]
    assert iso.nvcc_arch(None) == []


def test_the_pytorch_helpers_are_valid_python():
    for code in (iso.TORCH_LIMIT, iso.TRAIN_STEP, iso.MATMUL_TENANT):
        compile(code, "helper", "exec")


def test_the_cuda_programs_compile_with_nvcc(tmp_path):
    assert iso.nvcc_path() is not None, (
        "nvcc not installed: bash scripts/cuda.sh (make test runs it)"
    )
    check = iso.Check(tmp_path, 300, sys.executable)
    check.facts = {"compute_cap": "9.0"}  # H100/H200
    row = iso.Row("0a", "build")
    iso.build_all(check, row)
    assert {"tenant", "fault", "shim", "alloc_bench"} <= set(check.built), row.detail
