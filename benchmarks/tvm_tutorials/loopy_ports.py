# SPDX-License-Identifier: Apache-2.0
"""Loo.py's tutorial kernels (seed 000), in polyloop and in Loo.py 2025.2, timed in one run.

- ``double``: ``{ [i]: 0<=i<n }``, ``out[i] = 2*a[i]`` (n = 2^22);
- ``transpose``: ``{ [i,j,ii,jj]: 0<=i,j,ii,jj<n }``, ``out[j,i] = a[i,j] {id=transpose}`` then
  ``out[ii,jj] = 2*out[ii,jj] {dep=transpose}`` (n = 2048).

Each on the C target (both tools' serial C, no schedule: one thread) and on OpenCL (PoCL on
the CPU, both through PyOpenCL, host arrays in and out), where ``double`` is split by 128 with
``g.0`` / ``l.0`` tags as the tutorial does, and ``transpose`` tiled by 16 on both instructions
(``i``/``jj`` on axis 0, ``j``/``ii`` on axis 1). PoCL runs work-groups on all cores in both.

Where polyloop's spelling differs from Loo.py's: none in the kernels (``pl.make_kernel`` takes
the same domain and instructions, ``pl.split_iname`` the same tags); Loo.py needs
``lp.add_and_infer_dtypes(knl, {"a": np.float32})``, polyloop takes the dtype from the arrays
of the first call (it builds for float32 here: ``pl.fix_dtypes`` is not needed).

Loo.py needs islpy < 2026, polyloop islpy 2026: Loo.py runs in another Python
(``--loopy-python`` or ``$POLYLOOP_LOOPY_PYTHON``, a virtual environment with ``loopy==2025.2
"islpy<2026" pyopencl``), driven over a pipe by ``loopy_worker.py``, which times there.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

import polyloop as pl

from .run import Built, Row, build_polyloop
from .common import Out, Port, check

TUTORIAL = "Loo.py tutorial kernels"
KERNELS = {
    "double": ("{ [i]: 0<=i<n }", "out[i] = 2*a[i]"),
    "transpose": ("{ [i,j,ii,jj]: 0<=i,j,ii,jj<n }",
                  "out[j,i] = a[i,j] {id=transpose}\nout[ii,jj] = 2*out[ii,jj] {dep=transpose}"),
}


def kernel_polyloop(kernel: str, target: str) -> Any:
    domain, instructions = KERNELS[kernel]
    knl = pl.make_kernel(domain, instructions)
    if target == "opencl" and kernel == "double":
        knl = pl.split_iname(knl, "i", 128, outer_tag="g.0", inner_tag="l.0")
    elif target == "opencl":
        for it, axis in (("i", 0), ("j", 1), ("ii", 1), ("jj", 0)):
            knl = pl.split_iname(knl, it, 16, outer_tag=f"g.{axis}", inner_tag=f"l.{axis}")
    return knl


def ports(small: bool = False) -> list[tuple[Port, str, str, int]]:
    """(port, kernel, target, size) for each row (the port's ``tvm`` is unused)."""
    out = []
    for kernel, n in (("double", 1001 if small else 1 << 22), ("transpose", 37 if small else 2048)):
        shape = (n,) if kernel == "double" else (n, n)
        for target in ("c", "opencl"):
            port = Port(TUTORIAL, f"{kernel} ({'C' if target == 'c' else 'OpenCL, PoCL'})", "",
                        lambda rng, shape=shape: [rng.random(shape, dtype=np.float32)],
                        (Out(shape if kernel == "double" else shape[::-1]),),
                        (lambda a: 2 * a) if kernel == "double" else (lambda a: 2 * a.T),
                        lambda kernel=kernel, target=target: kernel_polyloop(kernel, target),
                        None, rtol=1e-6, atol=0.0)
            out.append((port, kernel, target, n))
    return out


class LoopyWorker:
    """The Loo.py process (``loopy_worker.py``) and its pipe."""

    def __init__(self, python: str) -> None:
        worker = Path(__file__).with_name("loopy_worker.py")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.proc = subprocess.Popen([python, str(worker)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)

    def ask(self, **request: object) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the Loo.py worker stopped (exit status {self.proc.wait()})")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"Loo.py: {answer['error']}")
        return answer


def loopy_rows(threads: list[int], small: bool, python: str | None,
               rng: np.random.Generator) -> list[Row]:
    python = python or os.environ.get("POLYLOOP_LOOPY_PYTHON")
    worker = LoopyWorker(python) if python else None
    rows = []
    for port, kernel, target, n in ports(small):
        inputs = port.inputs(rng)
        ours = build_polyloop(port, inputs) if target == "c" else _opencl(port, inputs)
        check(port, "polyloop", ours.outputs(), inputs)
        theirs: Built | str = "Loo.py not given (--loopy-python)"
        if worker is not None:
            key = f"{kernel}-{target}"
            worker.ask(op="build", key=key, kernel=kernel, target=target, n=n)
            theirs = Built(lambda: None, lambda: [], lambda t: None,
                           remote=lambda repeat, clock, key=key: worker.ask(
                               op="time", key=key, repeat=repeat, clock=clock)["seconds"])
        # the C kernels are serial in both tools; PoCL runs work-groups on every core
        t = 1 if target == "c" else max(threads)
        row = Row(port.tutorial, port.name, t, "Loo.py", ours, theirs)
        if target == "opencl":
            ours.remote = lambda repeat, clock, b=ours: _python_calls(b, repeat, clock)
        rows.append(row)
    return rows


def _opencl(port: Port, inputs: list[np.ndarray]) -> Built:
    mod = pl.build(port.polyloop(), target="opencl")
    last: list[Any] = [mod(*inputs)]

    def call() -> None:
        last[0] = mod(*inputs)
    return Built(call, lambda: [np.asarray(last[0])], lambda t: None)


def _python_calls(built: Built, repeat: int, clock: str) -> float:
    from .run import per_call
    return per_call(lambda n: [built.call() for _ in range(n)], built.call, repeat, clock)
