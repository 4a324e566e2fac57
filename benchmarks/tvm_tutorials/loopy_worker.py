# SPDX-License-Identifier: Apache-2.0
"""Runs Loo.py's tutorial kernels for ``loopy_ports.py`` in a Python that has Loo.py.

Loo.py 2025.2 needs islpy < 2026 and polyloop islpy 2026, so the two cannot share a process:
this file imports only the standard library, NumPy, Loo.py and PyOpenCL. It reads one JSON
request per line on standard input and answers one JSON line on standard output:

- ``{"op": "build", "key": k, "kernel": "double"|"transpose", "target": "c"|"opencl",
  "n": size}``: builds the kernel, runs it on random data (seeded) and checks it against
  NumPy; answers ``{"ok": true}`` or ``{"error": ...}``;
- ``{"op": "time", "key": k, "repeat": r, "clock": "wall"|"cpu"}``: the least seconds per call
  over ``r`` timings of enough calls to last 20 ms (``clock`` "cpu": this process's thread CPU
  time); answers ``{"seconds": s}``;
- ``{"op": "stop"}``.

The kernels and schedules are the ones ``loopy_ports.py`` gives polyloop, in Loo.py's
spelling (see its docstring).
"""
from __future__ import annotations

import json
import math
import sys
import time
import warnings

import numpy as np

MIN_TIME = 0.02
KERNELS = {
    "double": ("{ [i]: 0<=i<n }", "out[i] = 2*a[i]"),
    "transpose": ("{ [i,j,ii,jj]: 0<=i,j,ii,jj<n }",
                  "out[j,i] = a[i,j] {id=transpose}\nout[ii,jj] = 2*out[ii,jj] {dep=transpose}"),
}


def _reference(kernel: str, a: np.ndarray) -> np.ndarray:
    return 2 * a if kernel == "double" else 2 * a.T


class Runner:
    def __init__(self) -> None:
        self.built: dict[str, object] = {}
        self._cl = None

    def opencl(self):
        if self._cl is None:
            import pyopencl as cl
            ctx = cl.Context(cl.get_platforms()[0].get_devices())
            self._cl = (ctx, cl.CommandQueue(ctx))
        return self._cl

    def build(self, key: str, kernel: str, target: str, n: int) -> None:
        import loopy as lp
        lp.set_caching_enabled(False)
        domain, instructions = KERNELS[kernel]
        tgt = lp.ExecutableCTarget() if target == "c" else lp.PyOpenCLTarget()
        knl = lp.make_kernel(domain, instructions, target=tgt, lang_version=(2018, 2))
        knl = lp.add_and_infer_dtypes(knl, {"a": np.float32})
        if target == "opencl" and kernel == "double":
            knl = lp.split_iname(knl, "i", 128, outer_tag="g.0", inner_tag="l.0")
        elif target == "opencl":
            for it, axis in (("i", 0), ("j", 1), ("ii", 1), ("jj", 0)):
                knl = lp.split_iname(knl, it, 16, outer_tag=f"g.{axis}", inner_tag=f"l.{axis}")
        shape = (n,) if kernel == "double" else (n, n)
        a = np.random.default_rng(0).random(shape, dtype=np.float32)
        # ``out`` is read by the second instruction of ``transpose``: Loo.py takes it as an
        # argument (the polyloop side writes into an array passed in as well)
        args = {"a": a} if kernel == "double" else {"a": a, "out": np.empty_like(a)}
        if target == "c":
            exe = knl.executor()
            call = lambda: exe(**args)  # noqa: E731
        else:
            ctx, queue = self.opencl()
            exe = knl.executor(ctx)

            def call():
                result = exe(queue, **args)
                queue.finish()
                return result
        _, (out,) = call()
        if not np.allclose(out, _reference(kernel, a), rtol=1e-6):
            raise ValueError(f"Loo.py computes {kernel} on {target} wrongly")
        self.built[key] = call

    def time(self, key: str, repeat: int, clock: str) -> float:
        call = self.built[key]
        timer = time.thread_time if clock == "cpu" else time.perf_counter
        call()
        n, elapsed = 0, 0.0
        while elapsed < MIN_TIME / 4:
            start = timer()
            call()
            elapsed += timer() - start
            n += 1
        n = max(2, math.ceil(MIN_TIME / max(elapsed / n, 1e-9)))
        best = math.inf
        for _ in range(repeat):
            start = timer()
            for _ in range(n):
                call()
            best = min(best, (timer() - start) / n)
        return best


def main() -> None:
    warnings.simplefilter("ignore")
    runner = Runner()
    for line in sys.stdin:
        req = json.loads(line)
        try:
            if req["op"] == "stop":
                return
            if req["op"] == "build":
                runner.build(req["key"], req["kernel"], req["target"], req["n"])
                answer: dict = {"ok": True}
            else:
                answer = {"seconds": runner.time(req["key"], req["repeat"], req["clock"])}
        except Exception as e:  # noqa: BLE001 - reported to the driver, which shows it
            answer = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
