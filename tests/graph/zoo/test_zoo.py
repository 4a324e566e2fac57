# SPDX-License-Identifier: Apache-2.0
"""The model zoo through ``pl.graph.from_torch`` and through ONNX, built with no fallback and
compared with PyTorch eager (max error <= 1e-3 of the output's scale, outputs poisoned).

CI runs a slice (``models.ci_slice``; the fire modules through both routes) that covers every class of operator
the zoo uses: convolutions with batch norm and residual adds, depthwise convolution with
ReLU6/hardswish/hardsigmoid and squeeze-excitation (MobileNetV2/V3 blocks), pooling in ceil mode
with concatenation (SqueezeNet's fire modules), attention with masks, GELU, layer norm and
embeddings (one-layer BERT), rotary embeddings, RMSNorm, grouped-query heads and SiLU gating
(one-layer Llama). ``POLYLOOP_ZOO=all`` runs every model of the zoo through both routes at the
small size (64 x 64 images, two-layer transformers; builds of minutes each on two cores);
``benchmarks/bench_zoo.py`` runs them at full size.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the model zoo needs torch (extra 'test')")

import polyloop as pl  # noqa: E402

from .torchvision_ops import import_torchvision  # noqa: E402

try:
    import_torchvision()        # first: transformers imports torchvision
except ImportError:
    pytest.skip("the model zoo needs torchvision (extra 'test')", allow_module_level=True)
pytest.importorskip("transformers", reason="the model zoo needs transformers (extra 'test')")

from .harness import run  # noqa: E402
from .models import TEXT, VISION, ci_slice, zoo  # noqa: E402

ALL = os.environ.get("POLYLOOP_ZOO") == "all"
# tiny_bert runs in the test of symbolic sizes (checked against PyTorch there too)
CI = ("mobilenet_blocks", "fire_modules", "tiny_llama")
CI_ONNX = ("fire_modules",)


@pytest.fixture(scope="module")
def models():
    return {**ci_slice(), **(zoo("ci") if ALL else {})}


def _check(models, name: str, route: str, **kwargs) -> None:
    out = run(models[name], route, **kwargs)
    assert out.ok, f"{name} via {route}: stopped after '{out.stage}': {out.error}"


@pytest.mark.parametrize("name", CI + (VISION + TEXT if ALL else ()))
def test_zoo_model_through_torch_matches_pytorch(models, name):
    _check(models, name, "torch")


@pytest.mark.parametrize("name", CI_ONNX + (VISION + TEXT if ALL else ()))
def test_zoo_model_through_onnx_matches_pytorch(models, name):
    _check(models, name, "onnx")


def test_transformer_built_once_runs_at_any_batch_and_sequence_length(models):
    """BERT with ``dynamic={"x": {0: "batch", 1: "seq"}}``: one build, three shapes, a batch
    of one among them; a sequence longer than its position table is refused at call time."""
    out = run(models["tiny_bert"], "torch", batches=(2,), dynamic=True)
    assert out.ok, out.error
    ex = out.executor
    assert ex.graph.inputs[0].type.shape == ("batch", "seq")
    model = models["tiny_bert"].make()
    for batch, length in ((1, 5), (4, 11)):
        ids = torch.randint(0, 100, (batch, length))
        with torch.no_grad():
            want = model(ids).numpy()
        got = ex(ids.numpy())
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    with pytest.raises(pl.ArgumentError, match="seq = 600"):
        ex(np.zeros((2, 600), "int64"))
