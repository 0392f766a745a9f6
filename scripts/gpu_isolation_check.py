#!/usr/bin/env python3
"""`make gpu-isolation-check`: DLC's CUDA shim and the blast radius per backend on a real GPU.

For one machine with one NVIDIA GPU, nvcc, gcc and python3 with PyTorch; no Docker, no
network; run as root. Rows (docs/sharing.md, issue 27):

1. shim + PyTorch: under a 4,096 MiB share ``torch.cuda.mem_get_info()`` reports the share, a
   6 GiB tensor raises ``torch.cuda.OutOfMemoryError`` at allocation, a 2 GiB one succeeds
   (with the default caching allocator, then with ``expandable_segments``, i.e. cuMemCreate);
2. cost: cuMemAlloc+cuMemFree latency and a small training step, with and without the shim;
3. blast radius: co-tenants running kernels while another tenant's kernel writes through a
   wild pointer, under one MPS daemon, under time-slicing with the shim, and mixed (the
   faulting tenant under MPS, another tenant beside it on the shim): how many die;
4. throughput of k = 1, 2, 4 tenants per backend (bf16 matmul 4096^3, TFLOP/s in total).

Everything has its own timeout, a whole-run budget (--budget-s, default 200 s) skips what
would not fit, a failing row never stops the next, and the MPS daemon this script starts is
always stopped (``echo quit``). Results: ``--out DIR``/results.json (rewritten after every
row), table.md, and logs/ with every command's output. Exit 0: nothing failed; 1: a row
failed; 3: no GPU visible.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIM_SRC = ROOT / "native" / "cuda_shim"
GPU_SRC = SHIM_SRC / "gpu"
SHARE_MIB = 4096


class OutOfBudget(Exception):
    """The run's time budget cannot fit this step."""


@dataclass
class Row:
    """One line of the table (status: ok, FAIL, info, n/a, skipped)."""

    key: str
    title: str
    status: str = "n/a"
    detail: str = ""
    figures: dict = field(default_factory=dict)
    seconds: float = 0.0


@dataclass
class Done:
    """How a command ended (``code`` None: killed at its timeout)."""

    code: int | None
    output: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.code is None


# -- the run: budget, commands, rows, files ----------------------------------------------------
class Check:
    """The run's state: where files go, the time left, the rows so far."""

    def __init__(self, out: Path, budget_s: float, python: str) -> None:
        self.out = out
        self.logs = out / "logs"
        self.bin = out / "bin"
        for folder in (self.out, self.logs, self.bin):
            folder.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()
        self.deadline = self.started + budget_s
        self.python = python
        self.rows: list[Row] = []
        self.facts: dict = {}
        self.built: dict[str, Path] = {}
        self.cleanups: list[Callable[[], None]] = []
        self.no_mps_dir = str(out / "no-mps-here")  # no daemon: clients never join one

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def timeout(self, want: float, need: float = 2.0) -> float:
        """``want`` seconds, cut to the budget left; OutOfBudget below ``need``."""
        left = self.left()
        if left < need:
            raise OutOfBudget(f"{left:.0f} s of the budget left")
        return min(want, left)

    def log_path(self, name: str) -> Path:
        return self.logs / (re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".txt")

    def spawn(self, argv: list[str], env: dict, name: str, stdin: str | None = None):
        """Start ``argv`` in its own session, output to logs/NAME.txt; (process, log path)."""
        log = self.log_path(name)
        handle = open(log, "w")  # noqa: SIM115 - closed by the caller through finish()
        proc = subprocess.Popen(  # noqa: S603 - fixed argv
            argv, env=env, stdout=handle, stderr=subprocess.STDOUT, cwd=self.out,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            start_new_session=True, text=True,
        )  # fmt: skip
        proc._dlc_log = handle  # type: ignore[attr-defined]
        if stdin is not None:
            try:
                proc.stdin.write(stdin)
                proc.stdin.close()
            except OSError:
                pass
        return proc, log

    def finish(self, proc, log: Path, timeout: float, started: float | None = None) -> Done:
        """Wait for ``proc`` at most ``timeout`` s; kill its whole session past it."""
        started = time.monotonic() if started is None else started
        code: int | None
        try:
            code = proc.wait(timeout=max(0.1, timeout))
        except subprocess.TimeoutExpired:
            kill_group(proc)
            code = None
        proc._dlc_log.close()
        text = log.read_text(errors="replace")
        if code is None:
            with open(log, "a") as out:
                out.write(f"\n[killed after {timeout:.0f} s]\n")
        return Done(code, text, time.monotonic() - started)

    def run(self, argv, env=None, timeout=60.0, name="cmd", stdin=None) -> Done:
        """Run ``argv`` to its end (or its timeout, cut to the budget)."""
        limit = self.timeout(timeout)
        started = time.monotonic()
        try:
            proc, log = self.spawn(argv, env if env is not None else self.env(), name, stdin)
        except OSError as exc:
            return Done(127, f"cannot start {argv[0]}: {exc}", 0.0)
        return self.finish(proc, log, limit, started)

    def env(self, **extra: str) -> dict[str, str]:
        """A clean environment: no shim, no MPS daemon unless asked for."""
        drop = ("LD_PRELOAD", "DLC_SHIM", "CUDA_MPS_", "PYTORCH_CUDA_ALLOC_CONF")
        env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        env["CUDA_MPS_PIPE_DIRECTORY"] = self.no_mps_dir
        env["PYTHONUNBUFFERED"] = "1"
        env.update(extra)
        return env

    def shim_env(
        self, name: str, limit_mib: int | None, debug: int = 0, **extra: str
    ) -> dict[str, str]:
        """An environment with the shim preloaded under a share of ``limit_mib`` (one
        accounting file per ``name``: the processes of one tenant share it; ``debug=2``
        logs which driver functions the process took through the shim)."""
        config = self.out / f"shim-{name}.conf"
        lines = [f"state_file={self.out / f'shim-{name}.acct'}", "context_mib=512"]
        lines.append(f"debug={debug}")
        if limit_mib:
            lines.append(f"limit_mib.0={limit_mib}")
        config.write_text("\n".join(lines) + "\n")
        return self.env(LD_PRELOAD=str(self.built["shim"]), DLC_SHIM_CONFIG=str(config), **extra)

    def row(self, key: str, title: str, body: Callable[[Row], None]) -> Row:
        """Run one row's ``body``; whatever happens, record it and go on."""
        row = Row(key, title)
        started = time.monotonic()
        try:
            if self.left() < 3:
                raise OutOfBudget("the time budget is spent")
            body(row)
        except OutOfBudget as exc:
            row.status, row.detail = "skipped", f"not run: {exc}"
        except Exception as exc:  # a row's bug must not stop the others
            row.status = "FAIL"
            row.detail = f"{type(exc).__name__}: {exc}"
            (self.logs / f"row-{key}-traceback.txt").write_text(traceback.format_exc())
        row.seconds = round(time.monotonic() - started, 1)
        self.rows.append(row)
        print(f"[{row.status}] {key} {title}: {row.detail}", flush=True)
        self.save()
        return row

    def save(self) -> None:
        body = {
            "script": "scripts/gpu_isolation_check.py",
            "facts": self.facts,
            "elapsed_s": round(time.monotonic() - self.started, 1),
            "rows": [asdict(r) for r in self.rows],
        }
        (self.out / "results.json").write_text(json.dumps(body, indent=1) + "\n")
        (self.out / "table.md").write_text(table(self.rows, self.facts))

    def cleanup(self) -> None:
        while self.cleanups:
            try:
                self.cleanups.pop()()
            except Exception as exc:  # report, keep cleaning
                print(f"cleanup: {exc}", file=sys.stderr)


def kill_group(proc) -> None:
    """SIGKILL ``proc``'s session (it was started with its own) and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def table(rows: list[Row], facts: dict) -> str:
    """The markdown table of ``rows``."""
    lines = ["# GPU isolation check", ""]
    if facts:
        lines += [", ".join(f"{k}: {v}" for k, v in facts.items()), ""]
    lines += ["| row | check | status | detail | s |", "|---|---|---|---|---|"]
    for r in rows:
        detail = r.detail.replace("|", "/").replace("\n", " ")
        lines.append(f"| {r.key} | {r.title} | {r.status} | {detail} | {r.seconds} |")
    return "\n".join(lines) + "\n"


def wait_for(path: Path, pattern: str, count: int, deadline: float) -> int:
    """Wait (bounded) until ``pattern`` occurs ``count`` times in ``path``; how many did."""
    seen = 0
    while True:
        try:
            seen = len(re.findall(pattern, path.read_text(errors="replace"), re.MULTILINE))
        except OSError:
            seen = 0
        if seen >= count or time.monotonic() >= deadline:
            return seen
        time.sleep(0.05)


def result_of(text: str) -> dict | None:
    """The last ``RESULT {json}`` line a helper printed."""
    found = re.findall(r"^RESULT (\{.*\})\s*$", text, re.MULTILINE)
    return json.loads(found[-1]) if found else None


# -- facts and builds ---------------------------------------------------------------------------
def gpu_facts(check: Check) -> dict:
    """name, driver, memory, compute capability of GPU 0 from nvidia-smi; {} without a GPU.
    An old nvidia-smi without ``compute_cap`` still counts (nvcc then builds its default)."""
    if shutil.which("nvidia-smi") is None:
        return {}
    for fields in ("name,driver_version,memory.total,compute_cap",
                   "name,driver_version,memory.total"):  # fmt: skip
        done = check.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                         timeout=30, name="nvidia-smi")  # fmt: skip
        width = fields.count(",")
        lines = [x for x in done.output.splitlines() if x.count(",") == width]
        if done.code == 0 and lines:
            cells = [c.strip() for c in lines[0].split(",")] + [None]
            memory = cells[2] or ""
            return {"gpu": cells[0], "driver": cells[1],
                    "memory_mib": int(float(memory)) if re.fullmatch(r"[\d.]+", memory) else None,
                    "compute_cap": cells[3], "gpus": len(lines)}  # fmt: skip
    return {}


def nvcc_path() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    return "/usr/local/cuda/bin/nvcc" if os.access("/usr/local/cuda/bin/nvcc", os.X_OK) else None


def nvcc_arch(compute_cap: str | None) -> list[str]:
    """-gencode for the GPU's compute capability ("9.0" -> sm_90); none when unknown."""
    if compute_cap and re.fullmatch(r"\d+\.\d+", compute_cap):
        sm = compute_cap.replace(".", "")
        return ["-gencode", f"arch=compute_{sm},code=sm_{sm}"]
    return []


def build_all(check: Check, row: Row) -> None:
    """The shim (make, gcc), alloc_bench (gcc) and the CUDA tenants (nvcc, in parallel)."""
    shim = check.bin / "libdlc_cuda_shim.so"
    sources = [str(SHIM_SRC / f) for f in ("cuda_shim.c", "account.c", "config.c", "allocmap.c")]
    # what native/cuda_shim/Makefile runs, without needing make
    argv = ["gcc", "-O2", "-foptimize-sibling-calls", "-g", "-std=gnu11", "-fPIC",
            "-fvisibility=hidden", "-Wall", "-fno-strict-aliasing", "-shared", "-Wl,-z,defs",
            "-Wl,-soname,libdlc_cuda_shim.so",
            "-o", str(shim), *sources, "-ldl", "-lpthread"]  # fmt: skip
    if check.run(argv, timeout=120, name="build-shim").code == 0:
        check.built["shim"] = shim
    bench = check.bin / "alloc_bench"
    done_bench = check.run(["gcc", "-O2", "-o", str(bench), str(GPU_SRC / "alloc_bench.c"), "-ldl"],
                           timeout=60, name="build-alloc_bench")  # fmt: skip
    if done_bench.code == 0:
        check.built["alloc_bench"] = bench
    nvcc = nvcc_path()
    jobs = []
    if nvcc:
        arch = nvcc_arch(check.facts.get("compute_cap"))
        limit = check.timeout(180)
        for prog in ("tenant", "fault"):
            argv = [nvcc, "-O2", *arch, "-o", str(check.bin / prog), str(GPU_SRC / f"{prog}.cu")]
            jobs.append((prog, *check.spawn(argv, check.env(), f"build-{prog}")))
        for prog, proc, log in jobs:
            if check.finish(proc, log, limit).code == 0:
                check.built[prog] = check.bin / prog
    wanted = ("shim", "alloc_bench", "tenant", "fault")
    missing = [w for w in wanted if w not in check.built]
    row.figures = {"built": sorted(check.built), "nvcc": nvcc}
    row.status = "FAIL" if missing else "ok"
    row.detail = (
        f"missing: {', '.join(missing)} (logs/build-*.txt)"
        if missing
        else ("shim (gcc), alloc_bench (gcc), tenant + fault (nvcc)")
    )


def need(check: Check, *names: str) -> None:
    missing = [n for n in names if n not in check.built]
    if missing:
        raise RuntimeError(f"not built: {', '.join(missing)} (see the build row)")


# -- row 1: the shim with PyTorch ---------------------------------------------------------------
TORCH_LIMIT = r"""
import json, torch
out = {}
free, total = torch.cuda.mem_get_info()
out["mem_get_info_mib"] = [free >> 20, total >> 20]
try:
    x = torch.empty(6 << 30, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    out["alloc_6gib"] = "succeeded"
    del x
except torch.cuda.OutOfMemoryError as exc:
    out["alloc_6gib"] = "OutOfMemoryError"
    out["oom_message"] = str(exc).strip().splitlines()[0][:240]
except Exception as exc:
    out["alloc_6gib"] = f"{type(exc).__name__}: {exc}"[:240]
torch.cuda.empty_cache()
try:
    y = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    y.fill_(1)
    torch.cuda.synchronize()
    out["alloc_2gib"] = "ok"
except Exception as exc:
    out["alloc_2gib"] = f"{type(exc).__name__}: {exc}"[:240]
free, total = torch.cuda.mem_get_info()
out["mem_get_info_after_mib"] = [free >> 20, total >> 20]
print("RESULT " + json.dumps(out), flush=True)
"""


def torch_limit_row(check: Check, row: Row, alloc_conf: str | None) -> None:
    need(check, "shim")
    extra = {"PYTORCH_CUDA_ALLOC_CONF": alloc_conf} if alloc_conf else {}
    env = check.shim_env(f"torch-{row.key}", SHARE_MIB, debug=2, **extra)
    done = check.run([check.python, "-c", TORCH_LIMIT], env, timeout=90, name=f"row{row.key}")
    _torch_verdict(row, done, f"row{row.key}")


def _torch_verdict(row: Row, done: Done, log: str) -> None:
    got = result_of(done.output)
    if got is None:
        row.status = "FAIL"
        row.detail = f"no result (exit {done.code}; logs/{log}.txt)"
        return
    row.figures = got
    free, total = got["mem_get_info_mib"]
    refused_by_shim = "refused on GPU" in done.output
    problems = []
    if total != SHARE_MIB or free > SHARE_MIB:
        problems.append(f"mem_get_info {free}/{total} MiB, not within the {SHARE_MIB} MiB share")
    if got["alloc_6gib"] != "OutOfMemoryError":
        problems.append(f"6 GiB: {got['alloc_6gib']}")
    elif not refused_by_shim:
        problems.append("6 GiB raised OOM but the shim logged no refusal")
    if got["alloc_2gib"] != "ok":
        problems.append(f"2 GiB: {got['alloc_2gib']}")
    row.figures["refused_by_shim"] = refused_by_shim
    row.status = "FAIL" if problems else "ok"
    row.detail = "; ".join(problems) or (
        f"mem_get_info {free}/{total} MiB; 6 GiB -> torch.cuda.OutOfMemoryError at allocation "
        "(shim refused it); 2 GiB ok"
    )


def preload_row(check: Check, row: Row) -> None:
    """1a's PyTorch run with the shim loaded the executor's way: ``/etc/ld.so.preload`` and
    the config at the fixed ``/etc/dlc/cuda-shim.conf``, both in a copy of ``/etc``
    bind-mounted over ``/etc`` in a private mount namespace (the host's ``/etc`` is not
    touched), no ``LD_PRELOAD``, and ``DLC_SHIM_CONFIG`` naming a config of 999,999 MiB."""
    need(check, "shim")
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        row.status, row.detail = "n/a", "needs root and unshare(1) for a private /etc"
        return
    etc = Path(f"/tmp/dlc-iso-etc-{os.getpid()}")
    shutil.rmtree(etc, ignore_errors=True)
    check.cleanups.append(lambda: shutil.rmtree(etc, ignore_errors=True))
    copied = check.run(["cp", "-a", "/etc", str(etc)], timeout=60, name="row1c-copy-etc")
    if copied.code != 0:
        raise RuntimeError(f"cannot copy /etc: {copied.output[-200:]}")
    (etc / "ld.so.preload").write_text(f"{check.built['shim']}\n")
    (etc / "dlc").mkdir(exist_ok=True)
    (etc / "dlc" / "cuda-shim.conf").write_text(
        f"state_file={check.out / 'shim-preload.acct'}\ncontext_mib=512\n"
        f"limit_mib.0={SHARE_MIB}\ndebug=2\n"
    )
    mine = check.out / "shim-job-own.conf"
    mine.write_text("limit_mib=999999\n")
    script = 'mount --bind "$1" /etc && exec "$2" -c "$3"'
    argv = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(etc),
            check.python, TORCH_LIMIT]  # fmt: skip
    env = check.env(DLC_SHIM_CONFIG=str(mine))  # the job's attempt to raise its limit
    done = check.run(argv, env, timeout=90, name="row1c")
    _torch_verdict(row, done, "row1c")
    if row.status == "ok":
        row.detail = "loaded by /etc/ld.so.preload, LD_PRELOAD unset, own config ignored: " + (
            row.detail
        )


# -- row 2: what the shim costs ---------------------------------------------------------------
TRAIN_STEP = r"""
import json, sys, time, torch
steps = int(sys.argv[1])
torch.manual_seed(0)
layers = []
for _ in range(4):
    layers += [torch.nn.Linear(4096, 4096, device="cuda", dtype=torch.bfloat16), torch.nn.ReLU()]
model = torch.nn.Sequential(*layers)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16)
def step():
    opt.zero_grad(set_to_none=True)
    model(x).float().pow(2).mean().backward()
    opt.step()
for _ in range(5):
    step()
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(steps):
    step()
torch.cuda.synchronize()
ms = (time.perf_counter() - t0) / steps * 1e3
print("RESULT " + json.dumps({"ms_per_step": round(ms, 3), "steps": steps}), flush=True)
"""


def latency_row(check: Check, row: Row) -> None:
    need(check, "shim", "alloc_bench")
    figures = {}
    for label, env in (("plain", check.env()), ("shim", check.shim_env("latency", 65536))):
        done = check.run([str(check.built["alloc_bench"]), "2000", "2"], env, timeout=60,
                         name=f"row2a-{label}")  # fmt: skip
        lines = [x for x in done.output.splitlines() if x.startswith("{")]
        got = json.loads(lines[-1]) if lines else {"error": f"exit {done.code}"}
        if "error" in got:
            raise RuntimeError(f"{label}: {got['error']} (logs/row2a-{label}.txt)")
        figures[f"{label}_us"] = got["us_per_alloc_free"]
    figures["overhead_us"] = round(figures["shim_us"] - figures["plain_us"], 3)
    row.figures = figures
    row.status = "info"
    row.detail = (
        f"cuMemAlloc+cuMemFree of 2 MiB: {figures['plain_us']:.2f} us plain, "
        f"{figures['shim_us']:.2f} us with the shim ({figures['overhead_us']:+.2f} us)"
    )


def train_row(check: Check, row: Row) -> None:
    need(check, "shim")
    figures = {}
    for label, env in (("plain", check.env()), ("shim", check.shim_env("train", 65536))):
        done = check.run([check.python, "-c", TRAIN_STEP, "30"], env, timeout=90,
                         name=f"row2b-{label}")  # fmt: skip
        got = result_of(done.output)
        if got is None:
            raise RuntimeError(f"{label}: no result (exit {done.code}; logs/row2b-{label}.txt)")
        figures[f"{label}_ms"] = got["ms_per_step"]
        figures[f"{label}_process_s"] = round(done.seconds, 1)
    change = (figures["shim_ms"] / figures["plain_ms"] - 1) * 100
    figures["change_pct"] = round(change, 2)
    row.figures = figures
    row.status = "info"
    row.detail = (
        f"4x Linear(4096) bf16 fwd+bwd+SGD, batch 8192: {figures['plain_ms']:.2f} ms plain, "
        f"{figures['shim_ms']:.2f} ms with the shim ({change:+.1f}%); process wall "
        f"{figures['plain_process_s']} s vs {figures['shim_process_s']} s"
    )


# -- MPS daemon -----------------------------------------------------------------------------
class Mps:
    """One MPS control daemon with its own pipe and log folders (stopped with ``quit``)."""

    CONTROL = "nvidia-cuda-mps-control"

    def __init__(self, check: Check, name: str) -> None:
        self.check = check
        base = Path(f"/tmp/dlc-iso-mps-{os.getpid()}-{name}")
        self.pipe, self.log = base / "pipe", base / "log"
        self.running = False

    def env(self, **extra: str) -> dict[str, str]:
        return self.check.env(CUDA_MPS_PIPE_DIRECTORY=str(self.pipe),
                              CUDA_MPS_LOG_DIRECTORY=str(self.log), **extra)  # fmt: skip

    def start(self) -> None:
        if shutil.which(self.CONTROL) is None:
            raise RuntimeError(f"{self.CONTROL} not installed")
        for folder in (self.pipe, self.log):
            folder.mkdir(parents=True, exist_ok=True)
        done = self.check.run([self.CONTROL, "-d"], self.env(), timeout=20, name="mps-start")
        if done.code != 0:
            raise RuntimeError(f"MPS daemon did not start (exit {done.code}): {done.output[-200:]}")
        self.running = True
        self.check.cleanups.append(self.stop)
        if not wait_for_file(self.pipe / "control", time.monotonic() + 10):
            raise RuntimeError("MPS daemon started but made no control pipe in 10 s")

    def stop(self) -> None:
        if not self.running:
            return
        self.running = False
        try:
            subprocess.run([self.CONTROL], input="quit\n", env=self.env(), text=True,
                           capture_output=True, timeout=20, check=False)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            print(f"MPS quit: {exc}", file=sys.stderr)
        wait_gone(self.pipe / "control", time.monotonic() + 10)
        if not servers_gone(time.monotonic() + 10):
            self.check.facts["mps_server_left_after"] = self.pipe.parent.name
            print("warning: an nvidia-cuda-mps-server is still running", file=sys.stderr)
        for name in ("control.log", "server.log"):
            source = self.log / name
            if source.exists():
                shutil.copy(source, self.check.logs / f"mps-{self.pipe.parent.name}-{name}")
        shutil.rmtree(self.pipe.parent, ignore_errors=True)


def servers_gone(deadline: float) -> bool:
    """Wait (bounded) until no ``nvidia-cuda-mps-server`` runs; True if none does (or no
    pgrep to ask)."""
    if shutil.which("pgrep") is None:
        return True
    while True:
        try:
            found = subprocess.run(["pgrep", "-x", "nvidia-cuda-mps-server"], capture_output=True,
                                   timeout=5, check=False).returncode == 0  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            return True
        if not found:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def wait_for_file(path: Path, deadline: float) -> bool:
    while not path.exists():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def wait_gone(path: Path, deadline: float) -> bool:
    while path.exists():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


# -- row 3: blast radius ------------------------------------------------------------------------
@dataclass(frozen=True)
class Tenant:
    """A process of the blast-radius run: its label, tenant and environment."""

    label: str
    tenant: str
    env: dict
    faults: bool = False


def blast(check: Check, tenants: list[Tenant], seconds: float = 8.0, delay: float = 2.0) -> dict:
    """Run the co-tenants for ``seconds``, the faulting one faults ``delay`` s after they all
    run; {"fault": its message, label: "survived" | "died: ..." | "did not start"}."""
    need(check, "tenant", "fault")
    deadline = time.monotonic() + check.timeout(seconds + 30, need=seconds + 8)
    started = []
    try:
        for t in tenants:
            if t.faults:
                continue
            argv = [str(check.built["tenant"]), str(seconds), t.label]
            started.append((t, *check.spawn(argv, t.env, f"row3-{t.label}")))
        for _t, _, log in started:
            wait_for(log, r"^(started|error) ", 1, time.monotonic() + 15)
        faulter = next(t for t in tenants if t.faults)
        argv = [str(check.built["fault"]), str(delay)]
        fproc, flog = check.spawn(argv, faulter.env, f"row3-{faulter.label}")
        fdone = check.finish(fproc, flog, min(delay + 20, deadline - time.monotonic()))
        outcome = {"fault": _fault_said(fdone), "fault_exit": fdone.code}
        for t, proc, log in started:
            outcome[t.label] = _fate(check.finish(proc, log, deadline - time.monotonic()))
        return outcome
    finally:
        for _, proc, _ in started:
            if proc.poll() is None:
                kill_group(proc)


def _fault_said(done: Done) -> str:
    said = re.findall(r"^fault (.*)$", done.output, re.MULTILINE)
    if done.timed_out:
        return "fault program hung (killed)"
    return said[-1] if said else f"exit {done.code}: {done.output.strip()[-160:]}"


def _fate(done: Done) -> str:
    if done.timed_out:
        return "hung (killed)"
    errors = re.findall(r"^error \S+ (.*)$", done.output, re.MULTILINE)
    if "started" not in done.output:
        return "did not start: " + (errors[-1] if errors else done.output.strip()[-120:])
    if done.code == 0 and re.search(r"^done ", done.output, re.MULTILINE):
        return "survived"
    return "died: " + (errors[-1] if errors else f"exit {done.code}")


def _count(outcome: dict, tenants: list[Tenant], faulter_tenant: str) -> dict:
    same = [t for t in tenants if not t.faults and t.tenant == faulter_tenant]
    other = [t for t in tenants if not t.faults and t.tenant != faulter_tenant]
    lost = lambda group: sum(outcome[t.label] != "survived" for t in group)  # noqa: E731
    return {"same_lost": lost(same), "same": len(same), "other_lost": lost(other),
            "other": len(other)}  # fmt: skip


def blast_mps_row(check: Check, row: Row) -> None:
    """Everyone under one MPS daemon: what DLC's placement no longer allows across tenants."""
    mps = Mps(check, "blast")
    mps.start()
    try:
        env = mps.env()
        tenants = [Tenant("A-fault", "A", env, True), Tenant("A-2", "A", env),
                   Tenant("B-1", "B", env)]  # fmt: skip
        outcome = blast(check, tenants)
    finally:
        mps.stop()
    _blast_report(row, outcome, tenants, expect_other_lost=None)


def blast_shim_row(check: Check, row: Row) -> None:
    """Time-slicing with the shim: each process has its own context."""
    need(check, "shim")
    tenants = [
        Tenant("A-fault", "A", check.shim_env("blast-A", 8192), True),
        Tenant("A-2", "A", check.shim_env("blast-A", 8192)),
        Tenant("B-1", "B", check.shim_env("blast-B", 8192)),
    ]
    outcome = blast(check, tenants)
    _blast_report(row, outcome, tenants, expect_other_lost=0)


def blast_mixed_row(check: Check, row: Row) -> None:
    """Tenant A's shares under MPS, tenant B beside them on the shim (no MPS) on one GPU."""
    need(check, "shim")
    mps = Mps(check, "mixed")
    mps.start()
    try:
        tenants = [Tenant("A-fault", "A", mps.env(), True), Tenant("A-2", "A", mps.env()),
                   Tenant("B-1", "B", check.shim_env("mixed-B", 8192))]  # fmt: skip
        outcome = blast(check, tenants)
    finally:
        mps.stop()
    _blast_report(row, outcome, tenants, expect_other_lost=0)
    if outcome["B-1"].startswith("did not start"):  # a fact about MPS, not a blast radius
        row.status = "info"
        row.detail = "B could not run beside A's MPS server: " + row.detail


def _blast_report(row: Row, outcome: dict, tenants: list[Tenant], expect_other_lost) -> None:
    counts = _count(outcome, tenants, "A")
    row.figures = {**outcome, **counts}
    if outcome["fault_exit"] != 2:  # fault.cu exits 2 when the driver reported the fault
        row.status = "FAIL"
        row.detail = f"the wild write did not fault as expected: {outcome['fault']}"
        return
    fates = ", ".join(f"{t.label}: {outcome[t.label]}" for t in tenants if not t.faults)
    row.detail = (
        f"co-tenants lost: same tenant {counts['same_lost']}/{counts['same']}, other tenant "
        f"{counts['other_lost']}/{counts['other']} (fault: {outcome['fault']}; {fates})"
    )
    if expect_other_lost is None:
        row.status = "info"
    else:
        row.status = "ok" if counts["other_lost"] == expect_other_lost else "FAIL"


# -- row 4: throughput ------------------------------------------------------------------------
MATMUL_TENANT = r"""
import json, os, sys, time, torch
go, seconds, n = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    a @ b
torch.cuda.synchronize()
print("ready", flush=True)
limit = time.monotonic() + 120
while not os.path.exists(go) and time.monotonic() < limit:
    time.sleep(0.01)
t0, iters = time.perf_counter(), 0
while time.perf_counter() - t0 < seconds:
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    iters += 10
elapsed = time.perf_counter() - t0
tflops = iters * 2 * n ** 3 / elapsed / 1e12
print("RESULT " + json.dumps({"iters": iters, "elapsed_s": round(elapsed, 3),
                              "tflops": round(tflops, 1)}), flush=True)
"""


def throughput(
    check: Check,
    k: int,
    env_of: Callable[[int], dict],
    name: str,
    seconds: float = 3.0,
    n: int = 4096,
    tenant_code: str = MATMUL_TENANT,
) -> dict:
    """``k`` tenants start together after all are ready; their TFLOP/s and the total."""
    check.timeout(seconds + 40, need=seconds + 15)
    go = check.out / f"go-{name}"
    go.unlink(missing_ok=True)
    procs = []
    try:
        for i in range(k):
            argv = [check.python, "-c", tenant_code, str(go), str(seconds), str(n)]
            procs.append(check.spawn(argv, env_of(i), f"row4-{name}-{i}"))
        deadline = time.monotonic() + min(90, check.left() - seconds - 5)
        ready = sum(wait_for(log, r"^ready$", 1, deadline) for _, log in procs)
        if ready < k:
            raise RuntimeError(f"{ready}/{k} tenants got ready (logs/row4-{name}-*.txt)")
        go.write_text("go\n")
        results = []
        for proc, log in procs:
            done = check.finish(proc, log, seconds + 30)
            got = result_of(done.output)
            if got is None:
                raise RuntimeError(f"a tenant gave no result (exit {done.code})")
            results.append(got["tflops"])
        return {"tflops": results, "total": round(sum(results), 1)}
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                kill_group(proc)


def throughput_row(check: Check, row: Row, backend: str, ks=(1, 2, 4)) -> None:
    mps = None
    if backend == "mps":
        mps = Mps(check, "tp")
        mps.start()
    try:
        totals = {}
        for k in ks:
            if backend == "mps":
                env_of = lambda i: mps.env()  # noqa: E731
            elif backend == "shim":
                need(check, "shim")
                env_of = lambda i, k=k: check.shim_env(f"tp{k}-{i}", 16384)  # noqa: E731
            else:
                env_of = lambda i: check.env()  # noqa: E731
            try:
                totals[k] = throughput(check, k, env_of, f"{backend}-k{k}")["total"]
            except OutOfBudget:
                break
    finally:
        if mps is not None:
            mps.stop()
    row.figures = {f"k{k}_tflops": v for k, v in totals.items()}
    if not totals:
        raise OutOfBudget("no k fitted the time left")
    row.status = "info"
    row.detail = "bf16 matmul 4096^3, total TFLOP/s: " + ", ".join(
        f"k={k}: {v}" for k, v in totals.items()
    )


# -- the run ----------------------------------------------------------------------------------
def torch_probe(check: Check, row: Row) -> None:
    code = (
        "import torch; print('RESULT', __import__('json').dumps([torch.__version__, "
        "torch.version.cuda, torch.cuda.is_available()]))"
    )
    done = check.run([check.python, "-c", code], timeout=90, name="torch-probe")
    got = re.findall(r"^RESULT (.*)$", done.output, re.MULTILINE)
    if not got:
        raise RuntimeError(f"PyTorch not importable with {check.python} (logs/torch-probe.txt)")
    version, cuda, available = json.loads(got[-1])
    check.facts.update(torch=version, torch_cuda=cuda)
    row.status = "ok" if available else "FAIL"
    row.detail = f"torch {version} (CUDA {cuda}), cuda available: {available}"


ROWS = ("1a", "1b", "1c", "3b", "2a", "2b", "4b", "4c", "3a", "3c", "4a")


def plan(check: Check, only: set[str] | None) -> list[tuple[str, str, Callable[[Row], None]]]:
    """(key, title, body) of each row: the shim's, then the MPS ones (the budget cuts the
    tail; 4a is the least needed)."""
    rows = [
        ("1a", "shim + PyTorch: share reported, past it refused at allocation",
         lambda r: torch_limit_row(check, r, None)),
        ("1b", "shim + PyTorch expandable_segments (cuMemCreate)",
         lambda r: torch_limit_row(check, r, "expandable_segments:True")),
        ("1c", "shim + PyTorch via /etc/ld.so.preload, no LD_PRELOAD",
         lambda r: preload_row(check, r)),
        ("3b", "blast radius: time-slicing with the shim", lambda r: blast_shim_row(check, r)),
        ("2a", "shim cost: cuMemAlloc+cuMemFree latency", lambda r: latency_row(check, r)),
        ("2b", "shim cost: training step", lambda r: train_row(check, r)),
        ("4b", "throughput k=1,2,4: time-slicing + shim",
         lambda r: throughput_row(check, r, "shim")),
        ("4c", "throughput k=1: plain (no shim)", lambda r: throughput_row(check, r, "none", (1,))),
        # MPS last: a server left behind by a fault must not disturb the rows above
        ("3a", "blast radius: one MPS daemon for all", lambda r: blast_mps_row(check, r)),
        ("3c", "blast radius: A under MPS, B on the shim", lambda r: blast_mixed_row(check, r)),
        ("4a", "throughput k=1,2,4: MPS", lambda r: throughput_row(check, r, "mps")),
    ]  # fmt: skip
    return [r for r in rows if only is None or r[0] in only]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "gpu-isolation-check",
                        help="folder for results.json, table.md and logs/")  # fmt: skip
    parser.add_argument("--budget-s", type=float, default=200.0,
                        help="whole-run budget; rows that would not fit are skipped")  # fmt: skip
    parser.add_argument("--python", default=sys.executable,
                        help="the python with PyTorch for the tenants")  # fmt: skip
    parser.add_argument("--rows", default="", help=f"comma-separated subset of {','.join(ROWS)}")
    args = parser.parse_args(argv)
    if args.budget_s <= 0:
        parser.error("--budget-s must be > 0")
    unknown = {r for r in args.rows.split(",") if r} - set(ROWS)
    if unknown:
        parser.error(f"--rows: unknown {', '.join(sorted(unknown))}; use {','.join(ROWS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    check = Check(args.out, args.budget_s, args.python)
    only = {r for r in args.rows.split(",") if r} or None
    try:
        try:
            check.facts = gpu_facts(check)
        except Exception as exc:  # an odd nvidia-smi must not stop the run
            check.facts = {"gpu": f"unknown ({type(exc).__name__}: {exc})"}
        if check.facts and Path("/tmp/nvidia-mps/control").exists():
            check.facts["mps_daemon_already_running"] = "/tmp/nvidia-mps (not ours; not joined)"
        if not check.facts:
            for key, title, _ in plan(check, only):
                check.rows.append(Row(key, title, "n/a", "no NVIDIA GPU visible (nvidia-smi)"))
            check.save()
            print(table(check.rows, check.facts))
            return 3
        check.row("0a", "build: shim, alloc_bench, CUDA tenants", lambda r: build_all(check, r))
        check.row("0b", "PyTorch", lambda r: torch_probe(check, r))
        for key, title, body in plan(check, only):
            check.row(key, title, body)
    finally:
        check.cleanup()
        check.save()
    print(table(check.rows, check.facts), flush=True)
    print(f"results: {args.out / 'results.json'}, {args.out / 'table.md'}")
    return 1 if any(r.status == "FAIL" for r in check.rows) else 0


if __name__ == "__main__":
    sys.exit(main())
