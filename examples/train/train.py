"""A small training run: fit y = 3x + 1 by gradient descent, save the model to /outputs.

Uses PyTorch when the image has it (any `--framework pytorch:X`), plain Python otherwise, so it
runs in every image with a Python. `dlc cp JOB:model.txt .` brings the result back.
"""

import os
import random

EPOCHS = int(os.environ.get("EPOCHS", "200"))
OUT = "/outputs" if os.path.isdir("/outputs") else "outputs"
data = [(x / 10, 3 * x / 10 + 1) for x in range(-20, 21)]

try:
    import torch

    xs = torch.tensor([[x] for x, _ in data])
    ys = torch.tensor([[y] for _, y in data])
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(EPOCHS):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(xs), ys)
        loss.backward()
        opt.step()
    w, b, final = model.weight.item(), model.bias.item(), loss.item()
    device = "cuda" if torch.cuda.is_available() else "cpu"
except ImportError:
    random.seed(0)
    w, b, device = random.random(), random.random(), "python"
    for _ in range(EPOCHS):
        gw = sum(2 * (w * x + b - y) * x for x, y in data) / len(data)
        gb = sum(2 * (w * x + b - y) for x, y in data) / len(data)
        w, b = w - 0.1 * gw, b - 0.1 * gb
    final = sum((w * x + b - y) ** 2 for x, y in data) / len(data)

print(f"trained on {device} for {EPOCHS} epochs: w={w:.3f} b={b:.3f} loss={final:.6f}")
os.makedirs(OUT, exist_ok=True)
with open(os.path.join(OUT, "model.txt"), "w") as fh:
    fh.write(f"w={w:.3f} b={b:.3f}\n")
