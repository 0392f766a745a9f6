#!/usr/bin/env python3
"""`make gpu-check`: run DLC's GPU-facing paths on a real GPU and print one table.

Checks, each a row (ok / FAIL / n/a with the figures):

1. discovery: every GPU field DLC reads from live NVML and from `nvidia-smi` (UUID, minor, bus
   id, memory, model, driver, CUDA, CPU/NUMA affinity, MIG mode) against nvidia-smi's own
   answers (`--query-gpu`, `-q`, the banner and the saved `topo -m` text);
2. node-config: the agent flags from both sources decode back to the same GPUs;
3. the P2P probe: single-GPU figures, pairs when there are two GPUs or more, a clean note
   when there is one, and a clean exit 3 when no GPU is visible;
4. MPS (when `nvidia-cuda-mps-control` exists): one control daemon with its own pipe folder,
   two clients under `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT` (one within, one past the limit) and a
   third under `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`; the daemon is stopped afterwards;
5. the memory reading the watchdog uses (`dlc.executor.gpu_usage`) against a client that holds
   a known amount, with and without MPS.

It changes no GPU setting (compute mode, MIG) and stops every process it starts. Raw outputs
go to --out (default build/gpu-check) for fixtures and docs. Exit 0 when nothing failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dlc.errors import DlcError  # noqa: E402

ROWS: list[tuple[str, str, str]] = []
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def row(check: str, status: str, detail: str) -> None:
    ROWS.append((check, status, detail))
    print(f"[{status}] {check}: {detail}", flush=True)


def run(
    args: list[str], env: dict | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    return subprocess.run(
        args, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )


def smi_truth(out: Path) -> dict[int, dict]:
    """Per GPU index: what nvidia-smi itself says (the reference for DLC's readings)."""
    fields = "index,uuid,pci.bus_id,memory.total,name,driver_version,mig.mode.current"
    text = run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"]).stdout
    (out / "query_gpu.csv").write_text(text)
    truth: dict[int, dict] = {}
    for line in text.strip().splitlines():
        i, uuid, bus, mem, name, driver, mig = [c.strip() for c in line.split(",")]
        truth[int(i)] = {
            "uuid": uuid,
            "pci_bus_id": bus.upper(),
            "memory_mib": int(float(mem)),
            "model": name,
            "driver": driver,
            "mig_mode": mig.lower() if mig.lower() in ("enabled", "disabled") else None,
        }
    q = run(["nvidia-smi", "-q"]).stdout
    (out / "smi_q.txt").write_text(q)
    for index, minor in enumerate(re.findall(r"Minor Number\s*:\s*(\d+)", q)):
        truth[index]["minor"] = int(minor)
    banner = run(["nvidia-smi"]).stdout
    cuda = re.search(r"CUDA Version:\s*(\d+\.\d+)", banner)
    topo = run(["nvidia-smi", "topo", "-m"]).stdout
    (out / "topo_m.txt").write_text(topo)
    (out / "topo_p2p.txt").write_text(run(["nvidia-smi", "topo", "-p2p", "r"]).stdout)
    lines = [_ANSI.sub("", x) for x in topo.splitlines()]
    header = next(x for x in lines if "CPU Affinity" in x).split("\t")
    cpu_col = [h.strip() for h in header].index("CPU Affinity")
    for x in lines:
        cells = x.split("\t")
        if cells and re.fullmatch(r"GPU\d+", cells[0].strip()):
            gpu = truth[int(cells[0].strip()[3:])]
            gpu["cpu_affinity"] = cells[cpu_col].strip()
            numa = cells[cpu_col + 1].strip()
            gpu["numa_node"] = int(numa) if numa.isdigit() else None
            gpu["cuda"] = cuda.group(1) if cuda else None
    return truth


def check_discovery(out: Path, truth: dict[int, dict]) -> dict:
    from dlc.topology.discovery.discover import discover
    from dlc.topology.discovery.smi import topology_from_smi
    from dlc.topology.render.jsonio import topology_to_json

    found = {}
    for source, read in (("NVML", discover), ("nvidia-smi", topology_from_smi)):
        try:
            topo = read()
        except DlcError as exc:
            row(f"discovery via {source}", "FAIL", str(exc))
            continue
        found[source] = topo
        (out / f"topology_{source.replace('-', '_')}.json").write_text(
            json.dumps(topology_to_json(topo), indent=1)
        )
        bad = []
        for gpu in topo.gpus:
            want = truth[gpu.index]
            got = {
                "uuid": gpu.uuid,
                "pci_bus_id": (gpu.pci_bus_id or "").upper(),
                "memory_mib": gpu.memory_mib,
                "model": gpu.model,
                "driver": topo.driver_version,
                "cuda": topo.cuda_version,
                "minor": gpu.minor,
                "cpu_affinity": gpu.cpu_affinity,
                "numa_node": gpu.numa_node,
                "mig_mode": gpu.mig_mode,
            }
            bad += [
                f"GPU{gpu.index}.{k}: {got[k]!r} != {want.get(k)!r}"
                for k in got
                if got[k] != want.get(k)
            ]
        if len(topo.gpus) != len(truth):
            bad.append(f"{len(topo.gpus)} GPUs, nvidia-smi lists {len(truth)}")
        fields = "uuid, minor, bus id, memory, model, driver, CUDA, CPU/NUMA affinity, MIG mode"
        row(
            f"discovery via {source}",
            "FAIL" if bad else "ok",
            "; ".join(bad) if bad else f"{len(topo.gpus)} GPU(s): {fields} all match nvidia-smi",
        )
    return found


def check_node_config(out: Path, found: dict) -> None:
    from dlc.topology.node_config import agent_attributes, agent_resources, topology_from_attributes

    for source, topo in found.items():
        resources = agent_resources(topo)
        attrs = agent_attributes(topo)
        back = topology_from_attributes(attrs)
        same = back is not None and [
            (g.index, g.uuid, g.minor, g.memory_mib) for g in back.gpus
        ] == [(g.index, g.uuid, g.minor, g.memory_mib) for g in topo.gpus]
        (out / f"node_config_{source.replace('-', '_')}.txt").write_text(f"{resources}\n{attrs}\n")
        row(
            f"node-config via {source}",
            "ok" if same else "FAIL",
            f"{resources}; dlc_topo {len(attrs.get('dlc_topo', ''))} chars decodes to the same GPUs"
            if same
            else f"attributes decode to {back}",
        )


def check_probe(out: Path) -> None:
    from dlc.probe.result import parse_probe_json

    probe = ROOT / "native/p2p_probe/build/p2p_probe"
    done = run([str(probe)], timeout=600)
    (out / "probe.json").write_text(done.stdout)
    try:
        result = parse_probe_json(done.stdout)
    except DlcError as exc:
        row("P2P probe", "FAIL", f"exit {done.returncode}: {exc}")
        return
    for dev in result.devices:
        f = dev.local
        row(
            f"probe GPU{dev.index} alone",
            "ok" if f and f.d2d_gbps else "FAIL",
            f"in-GPU copy {f.d2d_gbps:.0f} GB/s, host->GPU {f.h2d_gbps:.1f} GB/s, "
            f"GPU->host {f.d2h_gbps:.1f} GB/s, "
            f"latency {f.h2d_latency_us:.2f}/{f.d2h_latency_us:.2f} us"
            if f
            else "no single-GPU figures",
        )
    if len(result.devices) < 2:
        row(
            "probe pairs",
            "ok" if result.notes and not result.pairs else "FAIL",
            f"one GPU: {result.notes[0] if result.notes else 'no note'}",
        )
    else:
        best = max((p.uni_gbps or 0) for p in result.pairs)
        row("probe pairs", "ok", f"{len(result.pairs)} ordered pairs, best one-way {best:.1f} GB/s")
    none = run([str(probe)], env={"CUDA_VISIBLE_DEVICES": ""})
    kind = json.loads(none.stdout or "{}").get("error", {}).get("kind")
    row(
        "probe with no GPU visible",
        "ok" if none.returncode == 3 and kind == "no_device" else "FAIL",
        f"exit {none.returncode}, kind {kind}",
    )


def reading_of(pid: int) -> tuple[int | None, bool]:
    """(MiB, is MPS client) that DLC's NVML reading gives for ``pid`` on any GPU."""
    import pynvml

    from dlc.executor.gpu_usage import process_gpu_memory

    pynvml.nvmlInit()
    try:
        for proc in process_gpu_memory(pynvml):
            if proc.pid == pid:
                return proc.used_mib, proc.mps_client
        return None, False
    finally:
        pynvml.nvmlShutdown()


def held_reading(client: Path, mib: int, env: dict, label: str) -> None:
    """Start a client that holds ``mib``, read its memory through DLC, let it exit."""
    proc = subprocess.Popen(
        [str(client), "alloc", str(mib), "--hold", "4"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    first = json.loads(proc.stdout.readline() or "{}")
    used, mps = reading_of(proc.pid)
    proc.wait(timeout=30)
    ok = first.get("got_mib") == mib and used is not None and used >= mib
    row(
        f"watchdog reading {label}",
        "ok" if ok else "FAIL",
        f"client pid {proc.pid} holds {first.get('got_mib')} MiB; NVML via DLC reads {used} MiB "
        "(allocations + CUDA context)"
        f"{' (MPS client)' if mps else ''}",
    )


def check_mps(client: Path) -> None:
    control = shutil.which("nvidia-cuda-mps-control")
    if not control:
        row("MPS", "n/a", "nvidia-cuda-mps-control not found")
        return
    pipe = Path(tempfile.mkdtemp(prefix="dlc-mps-pipe-"))
    logs = Path(tempfile.mkdtemp(prefix="dlc-mps-log-"))
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(pipe), "CUDA_MPS_LOG_DIRECTORY": str(logs)}
    started = run([control, "-d"], env=env, timeout=30)
    if started.returncode != 0:
        row("MPS daemon", "FAIL", f"exit {started.returncode}: {started.stdout or started.stderr}")
        return
    try:
        time.sleep(1)
        limit_mib = 4096
        limit = {**env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": f"0={limit_mib}M"}
        holder = subprocess.Popen(
            [str(client), "alloc", "1024", "--hold", "6"],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **limit},
        )
        a = json.loads(holder.stdout.readline() or "{}")
        used, mps = reading_of(holder.pid)
        # 64 MiB chunks: how close to the limit a client gets shows what the limit counts.
        over = json.loads(
            run([str(client), "alloc", "6144", "--chunk", "64"], env=limit).stdout or "{}"
        )
        within = json.loads(run([str(client), "alloc", "2048"], env=limit).stdout or "{}")
        holder.wait(timeout=30)
        got = over.get("got_mib") or 0
        ok = (
            a.get("got_mib") == 1024
            and over.get("refused")
            and got < limit_mib
            and within.get("got_mib") == 2048
        )
        row(
            f"MPS memory limit {limit_mib} MiB, 3 clients",
            "ok" if ok else "FAIL",
            f"A holds {a.get('got_mib')} MiB while B asks 6144 -> refused after {got} MiB "
            f"({over.get('refusal') or 'not refused'}; the rest of the limit is B's CUDA "
            f"context), C asks 2048 -> got {within.get('got_mib')}",
        )
        row(
            "watchdog reading under MPS",
            "ok" if used and used >= 1024 and mps else "FAIL",
            f"NVML via DLC reads {used} MiB for client A (1024 MiB allocated + its context), "
            f"mps_client={mps}",
        )
        full = json.loads(run([str(client), "sms"], env=env).stdout or "{}")
        part = json.loads(
            run([str(client), "sms"], env={**env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25"}).stdout
            or "{}"
        )
        total, used_all, used_25 = full.get("sm_count"), full.get("sms_used"), part.get("sms_used")
        ok = bool(total and used_25 and used_all and used_25 <= 0.3 * total < used_all)
        row(
            "MPS active thread 25 %",
            "ok" if ok else "FAIL",
            f"blocks ran on {used_25} of {total} SMs (no limit: {used_all})",
        )
    finally:
        subprocess.run(
            [control],
            input="quit\n",
            text=True,
            capture_output=True,
            timeout=30,
            env={**os.environ, **env},
        )
        time.sleep(1)
        left = live_mps_processes()
        row(
            "MPS daemon stopped",
            "ok" if not left else "FAIL",
            "no MPS process left" if not left else f"still running: {left}",
        )


def live_mps_processes() -> list[str]:
    """Pids of MPS control daemons and servers still alive (zombies awaiting reaping excluded)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        state = text[text.rindex(")") + 2 :].split()[0]
        if name.startswith("nvidia-cuda-mps") and state != "Z":
            found.append(f"{stat.parent.name} {name}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", default=str(ROOT / "build/gpu-check"), help="folder for raw outputs"
    )
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if shutil.which("nvidia-smi") is None:
        print("gpu-check: nvidia-smi not found: this check needs a machine with an NVIDIA GPU")
        return 2
    truth = smi_truth(out)
    found = check_discovery(out, truth)
    check_node_config(out, found)
    check_probe(out)
    client = ROOT / "native/share_check/build/share_check"
    held_reading(client, 1024, {}, "without MPS")
    check_mps(client)
    (out / "gpu-check.json").write_text(
        json.dumps(
            [dict(zip(("check", "status", "detail"), r, strict=True)) for r in ROWS], indent=1
        )
    )
    width = max(len(c) for c, _, _ in ROWS)
    print(f"\n{'check'.ljust(width)}  status  detail")
    for check, status, detail in ROWS:
        print(f"{check.ljust(width)}  {status.ljust(6)}  {detail}")
    failed = sum(status == "FAIL" for _, status, _ in ROWS)
    print(f"\n{len(ROWS) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
