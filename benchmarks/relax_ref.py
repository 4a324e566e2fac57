# SPDX-License-Identifier: Apache-2.0
"""Apache TVM Relax as a reference engine for ``bench_graph.py --tvm``: the PyTorch model
imported through ``torch.export`` (``tvm.relax.frontend.torch``), compiled with TVM's default
CPU pipeline (legalize, fuse, memory planning) for the host's vector ISA, run by the Relax VM.

The default pipeline schedules no kernel: without MetaSchedule's tuning database, TVM runs the
loops of its operator definitions as written. Tuning a whole model is hours of MetaSchedule
trials, which is why this reference is TVM untuned, and is labelled so.
``TVM_NUM_THREADS`` must be set before ``tvm`` is first imported (bench_graph does).
"""
from __future__ import annotations

import time
from typing import Any, Callable


def relax_runner(model: Any, x: Any, threads: int) -> tuple[Callable[[], object], Any, float]:
    """``(run, output, build seconds)`` of ``model`` on ``x`` under TVM Relax."""
    import torch
    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    from polyloop.bench.tvm_ref import tvm_target

    start = time.perf_counter()
    mod = from_exported_program(torch.export.export(model, (x,)), keep_params_as_input=False)
    target = tvm.target.Target(tvm_target(threads))
    vm = relax.VirtualMachine(tvm.compile(mod, target=target), tvm.cpu())
    built = time.perf_counter() - start
    arg = tvm.runtime.tensor(x.numpy(), tvm.cpu())

    def run() -> object:
        return vm["main"](arg)

    out = run()
    first = out[0] if not hasattr(out, "numpy") else out
    return run, first.numpy(), built
