"""Real PyTorch training through the whole DLC path (`make e2e-pytorch`, not in CI): one node,
and a 2-node `torchrun` gloo step on the real Mesos master with two agents.

Named without the ``test_`` prefix so the normal suite does not collect it: it needs the
locally built ``dlc-local/pytorch-cpu:2.13.0`` image (scripts/e2e-pytorch.sh builds it, ~1 GB)
and runs only when given explicitly: ``pytest tests/e2e/pytorch_e2e.py``. It FAILS when the
image is missing.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from test_docker_e2e import (  # noqa: E402, F401  (fixtures are used by name)
    _cli,
    _wait,
    _wait_no_containers,
    docker_runtime,
    gpu_host,
    master,
    service,
)
from test_gang_real_mesos import TOKEN, _logs, gang_service  # noqa: E402, F401

from dlc.cli.main import cli  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.mesos, pytest.mark.slow]

IMAGE = os.environ.get("DLC_PYTORCH_IMAGE", "dlc-local/pytorch-cpu:2.13.0")
# the user's example, run as written: the YAML names the image and the torchrun line
EXAMPLE = Path(__file__).parents[2] / "examples" / "torchrun-gloo"

TRAIN = """
import os, torch
torch.manual_seed(0)
x = torch.randn(256, 8)
y = x @ torch.arange(1.0, 9.0) + 0.5
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
losses = []
for step in range(50):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
    loss.backward()
    opt.step()
    losses.append(loss.item())
print("torch", torch.__version__, "cuda_visible", os.environ.get("CUDA_VISIBLE_DEVICES"))
print(f"loss first={losses[0]:.4f} last={losses[-1]:.4f}")
assert losses[-1] < losses[0] / 10, losses
print("TRAINING-STEP-OK")
"""


@pytest.mark.parametrize("master", ["real"], indirect=True)  # the real Mesos only
def test_pytorch_training_step_through_dlc(service, docker_runtime):  # noqa: F811
    assert docker_runtime.image_env(IMAGE) is not None, f"{IMAGE} missing: make e2e-pytorch"
    out = _cli(service, "submit", "--image", IMAGE, "--gpus", "1", "--mem", "2G", "--cpus", "2",
               "--", "python", "-c", TRAIN)  # fmt: skip
    job_id = out.split()[0]
    job = _wait(service, job_id, {"finished", "failed", "lost"}, timeout=300)
    logs = _cli(service, "logs", job_id)
    assert job.state.value == "finished", f"{job.message}\n{logs}"
    assert "torch 2.13.0" in logs and "cuda_visible 0" in logs
    assert "TRAINING-STEP-OK" in logs
    assert _wait_no_containers(docker_runtime, service) == []


@pytest.mark.parametrize("gang_service", ["emulator", "real"], indirect=True)  # 2 agents each
def test_torchrun_gloo_two_nodes_through_dlc(gang_service, tmp_path):  # noqa: F811
    """`dlc submit -f examples/torchrun-gloo/job.yaml --workdir ...`: torchrun on each node
    meets node 0 at $MASTER_ADDR:$MASTER_PORT; gloo all_reduce and DDP agree across nodes."""
    from click.testing import CliRunner

    from dlc.executor.runtime import DockerRuntime

    svc, _ = gang_service
    assert DockerRuntime().image_env(IMAGE) is not None, f"{IMAGE} missing: make e2e-pytorch"
    env = {"DLC_API": svc.api_url, "DLC_TOKEN": TOKEN}
    args = ["submit", "-f", str(EXAMPLE / "job.yaml"), "--workdir", str(EXAMPLE), "--image", IMAGE]
    result = CliRunner().invoke(cli, args, env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    job_id = result.output.split()[0]
    started = time.monotonic()
    job = _wait(svc, job_id, {"finished", "failed", "lost"}, timeout=300)
    took = time.monotonic() - started
    logs = [_logs(svc, job_id, rank) for rank in (0, 1)]
    assert job.state.value == "finished", (job.message, svc.store.history(job_id), logs)
    assert len({t.agent_id for t in job.tasks}) == 2, job.tasks  # two distinct agents
    reduced, losses = {}, {}
    for node, log in enumerate(logs):
        found = re.findall(r"rank=(\d+) world=(\d+) node=(\d+) allreduce=(\S+)", log)
        assert len(found) == 1, log  # one worker per node (--nproc-per-node=$NPROC_PER_NODE)
        rank, world, group, value = found[0]
        assert (world, group) == ("2", str(node)), log
        reduced[int(rank)] = float(value)
        first, last = re.search(rf"rank={rank} loss_first=(\S+) loss_last=(\S+)", log).groups()
        losses[int(rank)] = (float(first), float(last))
    assert sorted(reduced) == [0, 1], logs
    assert set(reduced.values()) == {1.0 + 2.0}, reduced  # rank + 1, summed over both ranks
    (first0, last0), (first1, last1) = losses[0], losses[1]
    assert abs(first0 - first1) < 1e-6 and abs(last0 - last1) < 1e-6, losses  # DDP in sync
    assert last0 < first0 / 2, losses  # the step trained
    print(f"\ntorchrun gloo, 2 nodes: all_reduce={reduced} losses={losses}")
    print(*re.findall(r"rank=\d+ rendezvous_s=\S+ total_s=\S+", "\n".join(logs)), sep="\n")
    history = svc.store.history(job_id)
    steps = ", ".join(f"{state} +{at - history[0][0]:.1f} s" for at, state, _ in history)
    print(f"submit -> finished: {took:.1f} s ({steps})")
