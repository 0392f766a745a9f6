"""``dlc simulate openb --mode core``: the openb replay through DLC's scheduler core.

One replay of the first 40 openb nodes to 130% demand (batches of 5%) through the core and
the simulated master; its curve must be a real allocation curve, equal to what the master
holds task by task, sound by the master's invariants, and the same when the CLI runs the
same seed again.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from dlc.cli.main import cli
from dlc.errors import DlcError
from dlc.scheduler.jobs.job import job_id_of_task
from dlc.sim import io
from dlc.sim.cluster_sim.master import ranges_of
from dlc.sim.cluster_sim.openb_core import core_engine, held_gpu_milli, replay_on
from dlc.sim.metrics import allocation_curve
from dlc.sim.workload import arrival_sequence
from dlc.topology import gpu_shares

AGENTS, TUNE, BATCH, SEED = 40, 1.3, 5.0, 42


@pytest.fixture(scope="module")
def run():
    try:
        root = io.trace_root()
    except DlcError:
        pytest.fail("the openb traces are missing: ../shared/traces must be beside the checkout")
    nodes = io.load_nodes(root)[:AGENTS]
    total = sum(n.gpus for n in nodes) * 1000
    pods = io.load_pods(root, "default")
    arrivals = arrival_sequence(pods, total, TUNE, np.random.default_rng(SEED))
    engine = core_engine(nodes)
    result, stats = replay_on(engine, nodes, arrivals, BATCH)
    return arrivals, engine, result, stats


def test_the_curve_is_an_allocation_curve_of_every_arrival(run):
    arrivals, _, result, stats = run
    assert result.pods == len(arrivals)
    used, arrived = result.used_gpu_milli, result.arrived_gpu_milli
    assert np.all(np.diff(used) >= 0)  # pods never end: allocation only grows
    assert np.all(np.diff(arrived) >= 0) and np.all(used <= arrived)
    assert arrived[-1] >= 1.25 * result.total_gpu_milli  # tuned to 130% (small: stops early)
    curve = allocation_curve(result)
    finite = curve[~np.isnan(curve)]
    assert len(finite) >= 125 and np.all(np.diff(finite) >= 0)
    assert curve[100] > 90  # the cluster fills
    # every pod, CPU-only ones too (submitted as CPU-only jobs), is placed or failed
    # (withdrawn by its round)
    assert result.placed + len(result.failed) == len(arrivals)
    cpu_only = sum(not pod.num_gpu for pod in arrivals)
    assert stats.cpu_only == cpu_only > 0 and 0 < stats.cpu_only_placed <= cpu_only
    assert result.placed > 0 and stats.withdrawn > 0 and stats.withdrawn == len(result.failed)
    assert stats.rounds >= 26 and stats.problems == [] and stats.refused == 0


def test_the_allocation_is_what_the_master_holds_task_by_task(run):
    arrivals, engine, result, _ = run
    key_of = {r.job_id: key for key, r in engine.records.items()}
    seen: dict[tuple[str, int], str] = {}
    held = 0
    for task in engine.master.tasks.values():
        job_id = job_id_of_task(task.task_id)[0]
        pod = arrivals[int(key_of[job_id].split("-")[0][1:])]  # keys are p<n>-<name>
        core = gpu_shares.amounts(ranges_of(task.resources, gpu_shares.GPU_CORE))
        if not pod.num_gpu:  # a CPU-only pod: its CPU, no GPU
            assert task.gpu_ids == () and core == {}
        elif pod.gpu_milli < 1000:  # a share: that much of one GPU's compute, no whole GPU
            assert task.gpu_ids == () and list(core.values()) == [pod.gpu_milli]
        else:
            assert len(task.gpu_ids) == pod.num_gpu and set(core.values()) == {1000}
        for gpu in task.gpu_ids:  # no GPU given to two tasks
            assert seen.setdefault((task.agent_id, gpu), task.task_id) == task.task_id
        held += pod.total_gpu_milli
    assert len(engine.master.tasks) == result.placed
    assert held == held_gpu_milli(engine.master) == result.used_gpu_milli[-1]
    assert engine.master.check() == []


def test_the_cli_gives_the_same_curve_for_the_same_seed(run, tmp_path):
    _, _, result, _ = run
    args = ["simulate", "openb", "--mode", "core", "--agents", str(AGENTS), "--tune", str(TUNE),
            "--batch", str(BATCH), "--seeds", str(SEED), "--out", str(tmp_path)]  # fmt: skip
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    assert "through the scheduler core" in done.output
    data = json.loads((tmp_path / "results.json").read_text())["default"]
    assert data["mode"] == "core" and data["agents"] == AGENTS
    entry = data["policies"]["dlc"]
    expected = [None if math.isnan(x) else round(float(x), 3) for x in allocation_curve(result)]
    assert entry["curves"][str(SEED)] == expected
    assert entry["core"][0]["problems"] == [] and entry["core"][0]["refused"] == 0
    assert (tmp_path / "sim-default.svg").is_file()


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (["--mode", "fast"], "--mode"),
        (["--mode", "core", "--policy", "fgd"], "--policy"),
        (["--batch", "5"], "--batch"),
        (["--mode", "core", "--batch", "0"], "--batch"),
        (["--mode", "core", "--agents", "0"], "--agents"),
    ],
)
def test_bad_options_are_one_line_errors(extra, field):
    done = CliRunner().invoke(cli, ["simulate", "openb", *extra])
    assert done.exit_code != 0
    assert done.output.startswith(f"Error: {field}") and done.output.count("\n") == 1


def test_the_direct_replay_places_each_pod_as_the_core_does():
    """Issue 26: the direct mode's DLC calls the core's placement engine, so with one pod per
    offer round (the direct replay's order) both give the same allocation, event by event."""
    from dlc.sim.policies import get_policy
    from dlc.sim.replay import replay
    from dlc.sim.workload import target_mix

    root = io.trace_root()
    nodes = io.load_nodes(root)[:16]
    pods = io.load_pods(root, "default")
    arrivals = arrival_sequence(pods, sum(n.gpus for n in nodes) * 1000, TUNE,
                                np.random.default_rng(SEED))  # fmt: skip
    core, stats = replay_on(core_engine(nodes), nodes, arrivals, batch_pct=1e-9)
    assert stats.problems == [] and len(stats.batches) > 40  # one GPU pod a round
    rng = np.random.default_rng(SEED)
    direct = replay(nodes, arrivals, get_policy("dlc"), target_mix(pods), rng)
    assert direct.placed == core.placed and direct.placed > 25
    assert list(direct.used_gpu_milli) == list(core.used_gpu_milli)
    # the CPU-only pods too: both place them (as CPU-only jobs), the same ones
    cpu_only = [i for i, pod in enumerate(arrivals) if not pod.num_gpu]
    placed = [i for i in cpu_only if i not in set(direct.failed)]
    assert stats.cpu_only == len(cpu_only) and stats.cpu_only_placed == len(placed) > 0
    assert sorted(direct.failed) == sorted(core.failed)


def test_a_pod_the_budget_deferred_is_tried_next_round_not_withdrawn():
    """Issue 26: after a user's ``DEFAULT_TRIES_PER_USER`` failed shapes in a round the core
    defers that user's other jobs to the next round untried (``DEFERRED_PREFIX``); the replay
    must not withdraw them as if placement had refused them (it withdrew 304 CPU-only pods
    and 38 shares that fit, seed 42, all agents, and ended 0.10 below the direct replay)."""
    from dlc.scheduler.placement.shape_cache import DEFAULT_TRIES_PER_USER
    from dlc.sim.trace import NodeSpec, PodSpec

    nodes = [NodeSpec("n0", 16000, 65536, 2, "V100M32")]
    whole = PodSpec("whole", 8000, 1024, 2, 1000)  # takes both GPUs
    # one GPU each, none free once ``whole`` runs; each asks less CPU than the one before,
    # so no failure covers the next (each costs the user one try)
    failing = [PodSpec(f"f{k}", 7000 - 100 * k, 1024, 1, 1000) for k in range(6)]
    cpu_only = PodSpec("cpu", 1000, 1024, 0, 0)  # fits beside ``whole``
    arrivals = [whole, *failing, cpu_only]
    assert len(failing) > DEFAULT_TRIES_PER_USER
    result, stats = replay_on(core_engine(nodes), nodes, arrivals, batch_pct=1000.0)
    assert stats.problems == [] and len(stats.batches) == 1  # one batch, several rounds
    assert stats.rounds >= 2
    assert sorted(result.failed) == list(range(1, 1 + len(failing)))  # the GPU pods only
    assert stats.cpu_only_placed == 1 and result.placed == 2
