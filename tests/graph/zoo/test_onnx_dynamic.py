# SPDX-License-Identifier: Apache-2.0
"""ONNX models with a symbolic batch AND sequence length: Hugging Face BERT, GPT-2 and
DistilBERT (random weights, one layer) exported with ``dynamic_axes`` on ``input_ids`` and
``attention_mask``, imported once, built once, run at several (batch, seq) with padded masks
and poisoned outputs, compared with PyTorch eager and ONNX Runtime. The shape subgraphs
(``batch*seq`` reshapes, ``Range`` up to ``seq``, slices of position tables) become derived
size parameters and ranges, as from PyTorch.
"""
from __future__ import annotations

import io
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs torch (extra 'test')")
onnx = pytest.importorskip("onnx", reason="needs onnx (extra 'graph')")
ort = pytest.importorskip("onnxruntime", reason="needs onnxruntime (extra 'test')")

import polyloop as pl  # noqa: E402

from .torchvision_ops import import_torchvision  # noqa: E402

try:
    import_torchvision()        # first: transformers imports torchvision
except ImportError:
    pytest.skip("needs torchvision (extra 'test')", allow_module_level=True)
transformers = pytest.importorskip("transformers", reason="needs transformers (extra 'test')")

from .harness import poisoned_run, relative_error, run  # noqa: E402
from .models import TEXT, zoo  # noqa: E402

SIZES = ((1, 5), (3, 11))
VOCAB = 100


class _Tokens(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask)[0]


def _model(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    special = dict(bos_token_id=1, eos_token_id=2, pad_token_id=0, vocab_size=VOCAB)
    if name == "bert":
        config = transformers.BertConfig(hidden_size=32, num_hidden_layers=1,
                                         num_attention_heads=4, intermediate_size=64, **special)
        model = transformers.BertModel(config)
    elif name == "gpt2":
        config = transformers.GPT2Config(n_embd=32, n_layer=1, n_head=4, **special)
        model = transformers.GPT2Model(config)
    else:
        config = transformers.DistilBertConfig(dim=32, n_layers=1, n_heads=4, hidden_dim=64,
                                               **special)
        model = transformers.DistilBertModel(config)
    config._attn_implementation = "eager"      # what the TorchScript exporter exports
    return _Tokens(model).eval()


def _export(model: torch.nn.Module) -> bytes:
    buf = io.BytesIO()
    axes = {0: "batch", 1: "seq"}
    ids = torch.randint(0, VOCAB, (2, 7))
    torch.onnx.export(model, (ids, torch.ones_like(ids)), buf, dynamo=False, opset_version=17,
                      input_names=["input_ids", "attention_mask"], output_names=["out"],
                      dynamic_axes={"input_ids": axes, "attention_mask": axes})
    return buf.getvalue()


def _inputs(batch: int, seq: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(batch * 100 + seq)
    ids = rng.integers(0, VOCAB, (batch, seq)).astype("int64")
    mask = np.ones((batch, seq), "int64")
    mask[:, seq // 2 + 1:] = rng.integers(0, 2, (batch, seq - seq // 2 - 1))   # padding
    return ids, mask


ALL = os.environ.get("POLYLOOP_ZOO") == "all"


# DistilBERT's shape subgraphs are BERT's: CI builds BERT and GPT-2 (its masks read sizes as
# data), POLYLOOP_ZOO=all all three
@pytest.fixture(scope="module", params=["bert", "gpt2"] + (["distilbert"] if ALL else []))
def built(request):
    model = _model(request.param)
    data = _export(model)
    g = pl.graph.from_onnx(onnx.load_from_string(data))
    return request.param, model, data, g, pl.graph.build(g)


def test_dynamic_batch_and_sequence_length_match_pytorch_and_onnxruntime(built):
    name, model, data, g, ex = built
    assert [d for v in g.inputs for d in v.type.shape] == ["batch", "seq"] * 2
    derived = {r.name: r.terms for r in g.size_rules if r.terms}
    assert ((1, ("batch", "seq")),) in derived.values(), derived   # the flattened rows
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for batch, seq in SIZES:
        ids, mask = _inputs(batch, seq)
        got = poisoned_run(ex, [ids, mask])
        with torch.no_grad():
            want = model(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
        theirs = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        assert got.shape == (batch, seq, 32)
        assert relative_error(got, want) < 1e-5, (name, batch, seq)
        assert relative_error(got, theirs) < 1e-5, (name, batch, seq)


def test_a_sequence_longer_than_the_position_table_is_refused(built):
    name, _, _, g, ex = built
    high = {r.name: r.high for r in g.size_rules}.get("seq")
    if high is None:       # GPT-2 reads its positions by a gather (clamped), not a slice
        pytest.skip(f"{name} bounds no size")
    ids, mask = _inputs(1, high + 1)
    with pytest.raises(pl.ArgumentError, match="seq"):
        ex(ids, mask)


@pytest.mark.skipif(not ALL,
                    reason="POLYLOOP_ZOO=all runs every transformer of the zoo (builds of seconds)")
@pytest.mark.parametrize("name", TEXT)
def test_zoo_transformer_exported_with_dynamic_axes_runs_at_other_sizes(name):
    """Each transformer of the zoo (two layers) exported with its dynamic axes, built once,
    run at its traced size and at two others."""
    zm = zoo("ci")[name]
    out = run(zm, "onnx", batches=(2,), dynamic=True)
    assert out.ok, f"{name}: stopped after '{out.stage}': {out.error}"
    model = zm.make("onnx")
    by_seq = "seq" in zm.dynamic["x"].values()
    for batch, seq in SIZES:
        inputs = zm.inputs(batch, seq) if by_seq else zm.inputs(batch)
        with torch.no_grad():
            want = model(*inputs).numpy()
        got = poisoned_run(out.executor, [t.numpy() for t in inputs])
        assert relative_error(got, want) < 1e-5, (name, batch, seq)
