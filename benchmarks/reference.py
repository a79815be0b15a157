"""The PyTorch reference: labml_nn's capsule network, as published.

`labml_nn.capsule_networks` (PyPI `labml-nn`, installed with `--no-deps` as a
benchmark-only dependency) provides `Squash`, `Router` and `MarginLoss`. Its
MNIST model lives in `labml_nn/capsule_networks/mnist.py`, which also imports
the `labml` experiment framework; `LabmlMNISTCapsNet` below rebuilds that
model from the published modules, layer for layer, so that only torch is
needed. Nothing in the reference is changed -- in particular the Router's
softmax stays over the axis labml ships (the child axis).
"""

import torch
import torch.nn.functional as F
from labml_nn.capsule_networks import MarginLoss, Router, Squash
from torch import nn


class LabmlMNISTCapsNet(nn.Module):
    """labml_nn's `MNISTCapsuleNetworkModel`, rebuilt from its modules."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 256, kernel_size=9, stride=1)
        self.conv2 = nn.Conv2d(256, 32 * 8, kernel_size=9, stride=2, padding=0)
        self.squash = Squash()
        self.digit_capsules = Router(32 * 6 * 6, 10, 8, 16, 3)
        self.decoder = nn.Sequential(
            nn.Linear(16 * 10, 512),
            nn.ReLU(),
            nn.Linear(512, 1024),
            nn.ReLU(),
            nn.Linear(1024, 784),
            nn.Sigmoid(),
        )

    def forward(self, data):
        x = F.relu(self.conv1(data))
        x = self.conv2(x)
        caps = x.view(x.shape[0], 8, 32 * 6 * 6).permute(0, 2, 1)
        caps = self.squash(caps)
        caps = self.digit_capsules(caps)
        with torch.no_grad():
            pred = (caps**2).sum(-1).argmax(-1)
            mask = torch.eye(10, device=data.device)[pred]
        reconstructions = self.decoder((caps * mask[:, :, None]).view(x.shape[0], -1))
        return caps, reconstructions.view(-1, 1, 28, 28), pred


def device():
    """Where the reference runs: the GPU when torch sees one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def synchronize():
    """Waits for queued GPU work, so that a timer sees all of it."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def labml_train_step_fn(model, learning_rate=1e-3):
    """labml's training step: margin loss + 0.0005 * MSE, Adam."""
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    margin_loss = MarginLoss(n_labels=10)
    reconstruction_loss = nn.MSELoss()

    def step(data, target):
        caps, reconstructions, _ = model(data)
        loss = margin_loss(caps, target) + 0.0005 * reconstruction_loss(
            reconstructions, data
        )
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    return step


__all__ = [
    "LabmlMNISTCapsNet",
    "Router",
    "device",
    "labml_train_step_fn",
    "synchronize",
]
