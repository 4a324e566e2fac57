# SPDX-License-Identifier: Apache-2.0
"""Small PyTorch models of the graph tests (random weights, no downloads)."""
from __future__ import annotations

import torch
from torch import nn


class SeedCNN(nn.Module):
    """conv2d 32 3x3 -> ReLU -> max-pool 2 -> flatten -> linear 100 -> ReLU -> linear 10 ->
    softmax, on 1x28x28 images."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 32, 3)
        self.fc1 = nn.Linear(32 * 13 * 13, 100)
        self.fc2 = nn.Linear(100, 10)

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
        x = torch.relu(self.fc1(torch.flatten(x, 1)))
        return torch.softmax(self.fc2(x), dim=1)


class BasicBlock(nn.Module):
    """ResNet's basic block: conv-bn-relu-conv-bn, plus the input, relu."""

    def __init__(self, channels: int = 8) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(channels)
        self.c2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(channels)
        for bn in (self.b1, self.b2):   # statistics that make folding visible
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.data.uniform_(0.5, 1.5)
            bn.bias.data.uniform_(-1, 1)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        return torch.relu(self.b2(self.c2(y)) + x)


def encoder_layer() -> nn.Module:
    return nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, activation="gelu",
                                      batch_first=True)
