"""A 2-node data-parallel step over gloo (CPU): what `torchrun` on DLC's gang variables gives.

Each rank all-reduces a tensor holding ``rank + 1`` (the sum must be 1 + 2 + ... + world) and
trains a tiny linear model with DistributedDataParallel on its own shard of the data; DDP
averages the gradients, so every rank ends with the same weights and the same global loss.
Prints one line per fact, ``key=value``, for the logs:

    dlc submit -f examples/torchrun-gloo/job.yaml --workdir examples/torchrun-gloo
"""

import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

STEPS = int(os.environ.get("STEPS", "20"))


def main() -> None:
    started = time.monotonic()
    dist.init_process_group("gloo")  # torchrun's env:// variables: MASTER_ADDR, RANK, ...
    rank, world = dist.get_rank(), dist.get_world_size()
    node = os.environ.get("GROUP_RANK", "?")  # torchrun's node rank
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)  # sum over ranks
    met = time.monotonic() - started  # waiting for the other node, then the all_reduce
    print(f"rank={rank} world={world} node={node} allreduce={value.item():g}", flush=True)

    torch.manual_seed(0)  # the same data and initial weights everywhere
    x = torch.randn(64 * world, 8)
    y = x @ torch.arange(1.0, 9.0) + 0.5
    shard = slice(rank * 64, (rank + 1) * 64)  # each rank trains on its own slice
    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    first = global_loss(model, x, y)
    for _ in range(STEPS):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[shard]).squeeze(1), y[shard])
        loss.backward()  # DDP all-reduces (averages) the gradients here
        opt.step()
    last = global_loss(model, x, y)
    print(f"rank={rank} loss_first={first:.6f} loss_last={last:.6f}", flush=True)
    print(f"rank={rank} rendezvous_s={met:.2f} total_s={time.monotonic() - started:.2f}")
    dist.destroy_process_group()


def global_loss(model, x, y) -> float:
    """The loss over all ranks' data: equal on every rank while DDP keeps weights in sync."""
    with torch.no_grad():
        return torch.nn.functional.mse_loss(model.module(x).squeeze(1), y).item()


if __name__ == "__main__":
    main()
