# SPDX-License-Identifier: Apache-2.0
"""The seed CNN on an emulated aarch64 device: the model built here for this machine is built
again for the device when uploaded, runs there (the C RPC server under qemu-aarch64) at two
batch sizes and matches PyTorch, and is timed there."""
from __future__ import annotations

import numpy as np
import pytest

from polyloop import rpc

from rpc.devices import connect, emulated_device


@pytest.fixture(scope="module")
def device():
    server = emulated_device("aarch64-linux-gnu")
    yield server
    server.stop()


def test_seed_cnn_on_an_emulated_aarch64_device(seed_cnn, device):
    torch = pytest.importorskip("torch")
    model, ex = seed_cnn
    with connect(device) as remote:
        f = remote.load_module(remote.upload(ex))
        assert isinstance(f, rpc.RemoteModel) and f.built.target == remote.target
        for batch in (3, 2):
            x = torch.randn(batch, 1, 28, 28)
            with torch.no_grad():
                want = model(x).numpy()
            np.testing.assert_allclose(f(x.numpy()), want, rtol=1e-4, atol=1e-6)
        assert f.benchmark(x.numpy(), repeat=2) > 0 and len(f.last_times) == 2
