"""Outputs saved from a real H100 (driver 580.159.04) by `make gpu-check`: DLC reads them right.

The files in tests/topology/data/h100-x1/ are verbatim: nvidia-smi 580 underlines the header
rows of `topo -m` and `topo -p2p` with ANSI escapes even when writing to a file, which the
parsers failed on before they met a real driver.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from dlc.cli.main import cli
from dlc.executor.gpu_usage import process_gpu_memory
from dlc.probe.result import parse_probe_json
from dlc.topology.discovery.nvml import mig_mode_text
from dlc.topology.parse_p2p import parse_p2p
from dlc.topology.parse_topo import load_topology_text, parse_topo_m

DATA = Path(__file__).parent / "data" / "h100-x1"


def test_saved_outputs_really_carry_ansi_escapes():
    assert "\x1b[4m" in (DATA / "topo_m.txt").read_text()
    assert "\x1b[4m" in (DATA / "topo_p2p.txt").read_text()


def test_real_topo_m_with_ansi_header_parses():
    topo = parse_topo_m((DATA / "topo_m.txt").read_text())
    assert topo.gpu_indices == (0,)
    gpu = topo.gpu(0)
    assert (gpu.cpu_affinity, gpu.numa_node, gpu.gpu_numa_id) == ("0-15", 0, None)


def test_one_gpu_p2p_matrix_has_no_pairs_and_merges_cleanly():
    assert parse_p2p((DATA / "topo_p2p.txt").read_text()) == {}
    topo = load_topology_text(
        (DATA / "topo_m.txt").read_text(), (DATA / "topo_p2p.txt").read_text()
    )
    assert topo.gpu_indices == (0,) and not topo.links


def test_nvml_document_from_the_h100_matches_nvidia_smi_query():
    doc = json.loads((DATA / "topology_NVML.json").read_text())
    index, uuid, bus, memory, name, driver, mig = (
        c.strip() for c in (DATA / "query_gpu.csv").read_text().split(",")
    )
    gpu = doc["gpus"][0]
    assert (gpu["uuid"], gpu["model"], gpu["memory_mib"]) == (uuid, name, int(memory))
    assert gpu["pci_bus_id"].upper() == bus.upper()
    assert (gpu["minor"], gpu["mig_mode"]) == (0, mig.lower())


def test_real_probe_run_on_one_gpu_reads_as_single_gpu_figures():
    result = parse_probe_json((DATA / "probe.json").read_text())
    assert result.pairs == () and result.notes
    local = result.device(0).local
    assert local.d2d_gbps > local.h2d_gbps > 0
    assert local.h2d_latency_us > 0 and local.d2h_latency_us > 0


def test_dlc_probe_prints_single_gpu_table_and_note_for_the_h100_run():
    out = CliRunner().invoke(
        cli,
        [
            "probe",
            "--probe-json",
            str(DATA / "probe.json"),
            "--from-file",
            str(DATA / "topo_m.txt"),
        ],
        env={"COLUMNS": "160"},
    )
    assert out.exit_code == 0, out.output
    assert "Single GPU" in out.output and "NVIDIA H100 80GB HBM3" in out.output
    assert "note: only 1 GPU measured" in out.output
    assert "Traceback" not in out.output


class _NvmlError(Exception):
    pass


def _fake_nvml(procs, mps_procs):
    """An NVML with what the H100 reported while one MPS client held 1 GiB (pids as seen)."""

    def proc_list(items):
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in items]

    return SimpleNamespace(
        NVMLError=_NvmlError,
        nvmlDeviceGetCount=lambda: 1,
        nvmlDeviceGetHandleByIndex=lambda i: f"h{i}",
        nvmlDeviceGetUUID=lambda h: b"GPU-4992dd47-edfe-ace0-420d-adca26478742",
        nvmlDeviceGetComputeRunningProcesses=lambda h: proc_list(procs),
        nvmlDeviceGetMPSComputeRunningProcesses=lambda h: proc_list(mps_procs),
    )


def test_watchdog_reading_separates_mps_clients_from_the_server():
    # Seen on the H100: the server (559) holds 66 MiB, the client (538) 1,540 MiB; only the
    # client is in the MPS list, and nvidia-smi --query-compute-apps showed only the server.
    nvml = _fake_nvml([(559, 69206016), (538, 1614807040)], [(538, 1614807040)])
    readings = {r.pid: r for r in process_gpu_memory(nvml)}
    assert readings[538].used_mib == 1540 and readings[538].mps_client
    assert readings[559].used_mib == 66 and not readings[559].mps_client
    assert readings[538].gpu_uuid.startswith("GPU-4992dd47")


def test_watchdog_reading_without_mps_and_with_hidden_memory():
    nvml = _fake_nvml([(585, 1616904192), (600, None)], [])
    del nvml.nvmlDeviceGetMPSComputeRunningProcesses  # older bindings lack it
    readings = {r.pid: r for r in process_gpu_memory(nvml)}
    assert readings[585].used_mib == 1542 and not readings[585].mps_client
    assert readings[600].used_mib is None


def test_a_gpu_that_fails_is_left_out_not_fatal():
    nvml = _fake_nvml([(1, 1 << 30)], [])
    nvml.nvmlDeviceGetCount = lambda: 2

    def procs(handle):
        if handle == "h1":
            raise _NvmlError("GPU is lost")
        return [SimpleNamespace(pid=1, usedGpuMemory=1 << 30)]

    nvml.nvmlDeviceGetComputeRunningProcesses = procs
    assert [(r.gpu_index, r.pid) for r in process_gpu_memory(nvml)] == [(0, 1)]


@pytest.mark.parametrize(
    ("answer", "mode"),
    [((0, 0), "disabled"), ((1, 1), "enabled"), ((1, 0), "enabled"), (None, None)],
)
def test_mig_mode_from_nvml(answer, mode):
    assert mig_mode_text(answer) == mode
