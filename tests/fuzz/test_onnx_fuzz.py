# SPDX-License-Identifier: Apache-2.0
"""ONNX importer fuzzing: random small models (``onnx_models``: valid, borderline and
mutated into invalid ones). The promise: every model polyloop accepts gives ONNX Runtime's
answer, and every refusal is a ``PolyloopError``. CI runs ``DEFAULT_EXAMPLES`` fixed seeds;
``POLYLOOP_FUZZ_EXAMPLES=N`` runs N random ones (a long campaign)."""
from __future__ import annotations

import collections
import traceback

import numpy as np
import pytest

import polyloop as pl
from polyloop.config import CONFIG

pytest.importorskip("onnx", reason="the ONNX fuzzer needs onnx")
ort = pytest.importorskip("onnxruntime", reason="the ONNX fuzzer compares with ONNX Runtime")

from .onnx_models import random_model  # noqa: E402

DEFAULT_EXAMPLES = 12
EXAMPLES = CONFIG.fuzz_examples or DEFAULT_EXAMPLES


def ort_run(model, inputs):
    """ONNX Runtime's outputs, or its error message when it refuses the model."""
    try:
        opts = ort.SessionOptions()
        opts.log_severity_level = 4
        sess = ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        return sess.run(None, dict(zip(names, inputs)))
    except Exception as e:    # ONNX Runtime's own errors, of several kinds
        return str(e)


def check(seed: int, counts: collections.Counter) -> str | None:
    """None when the promise holds for the model of ``seed``, else what broke it."""
    model, inputs = random_model(seed)
    try:
        ex = pl.graph.build(pl.graph.from_onnx(model))
        got = ex(*inputs)
    except pl.PolyloopError:
        counts["refused"] += 1
        return None
    except Exception:
        return f"seed {seed}: a foreign exception\n{traceback.format_exc(limit=-4)}\n{model}"
    want = ort_run(model, inputs)
    if isinstance(want, str):
        return f"seed {seed}: polyloop ran a model ONNX Runtime refuses ({want[:300]})\n" \
            f"{model}"
    got = got if isinstance(got, tuple) else (got,)
    for a, b in zip(got, want):
        if a.shape != b.shape or not np.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True):
            return f"seed {seed}: differs from ONNX Runtime ({a.shape} vs {b.shape})\n{model}"
    counts["accepted"] += 1
    return None


def test_accepted_models_give_onnx_runtimes_answer():
    seeds = range(EXAMPLES) if CONFIG.fuzz_examples is None else \
        np.random.default_rng().integers(0, 2 ** 31, EXAMPLES)
    counts: collections.Counter = collections.Counter()
    failures = [f for f in (check(int(s), counts) for s in seeds) if f]
    print(f"\nONNX fuzzing, outcomes: {dict(counts)}")
    assert not failures, f"{len(failures)} failing model(s):\n" + "\n\n".join(failures[:5])
