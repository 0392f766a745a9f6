"""A real PyTorch training step through the whole DLC path (`make e2e-pytorch`, not in CI).

Named without the ``test_`` prefix so the normal suite does not collect it: it needs the
locally built ``dlc-local/pytorch-cpu:2.13.0`` image (scripts/e2e-pytorch.sh builds it, ~1 GB)
and runs only when given explicitly: ``pytest tests/e2e/pytorch_e2e.py``. It FAILS when the
image is missing.
"""

from __future__ import annotations

import os
import sys
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

pytestmark = [pytest.mark.docker, pytest.mark.mesos, pytest.mark.slow]

IMAGE = os.environ.get("DLC_PYTORCH_IMAGE", "dlc-local/pytorch-cpu:2.13.0")

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
