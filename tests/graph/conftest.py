# SPDX-License-Identifier: Apache-2.0
"""The seed CNN, imported from PyTorch with a symbolic batch and built once per session."""
from __future__ import annotations

import pytest

import polyloop as pl


@pytest.fixture(scope="session")
def seed_cnn():
    torch = pytest.importorskip("torch", reason="the seed CNN is a PyTorch model (extra 'graph')")
    from .models import SeedCNN
    torch.manual_seed(0)
    model = SeedCNN().eval()
    g = pl.graph.from_torch(model, (torch.randn(4, 1, 28, 28),), batch="batch")
    return model, pl.graph.build(g)
