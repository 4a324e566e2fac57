# SPDX-License-Identifier: Apache-2.0
"""ONNX's own operator conformance cases on polyloop and on ONNX Runtime, in one run.

What is counted (the numbers this prints):

- **Node cases**: ``onnx.backend.test.case.node.collect_testcases()`` (built in memory by the
  installed ``onnx`` package). A case is *selected* when every input array of its (first)
  data set has dtype float32 or int64 - a case without inputs is selected - and every
  operator set its model imports is the default one (``""``/``ai.onnx``: no ``ai.onnx.ml``,
  no ``ai.onnx.preview[.training]``). With onnx 1.23 that selects 1,238 of 1,884 cases.
  Everything else (uint8/float16/double/bool/string inputs, other domains) is not counted.
- **On-disk sets**: the ``pytorch-converted``, ``pytorch-operator`` and ``simple`` models the
  ``onnx`` package ships under ``onnx/backend/test/data/``, all of them, counted apart.

Each case runs through ``polyloop.graph.onnx_backend`` (import, compile, run) and through an
``onnxruntime.InferenceSession`` on the same model and inputs, and ends as exactly one of:

- **passed**: every output has the expected dtype and shape and matches the expected values
  with the case's own tolerance (``np.testing.assert_allclose(rtol=case.rtol,
  atol=case.atol)``; NaN equals NaN);
- **refused**: the runtime raised its own error (polyloop: a ``PolyloopError``, grouped below
  by operator and reason; ONNX Runtime: any exception while loading or running);
- **wrong**: it ran and an output differs;
- **foreign** (polyloop only): any other exception, or a crashed worker process.

Two node cases, ``test_dft_inverse`` and ``test_dft_inverse_opset19``, count as wrong for
polyloop and ONNX Runtime alike: their expected outputs were computed in float32 (imaginary
parts that are exactly 0 are stored as 1.9e-7, above the cases' ``atol`` of 1e-7). polyloop
sums in float64 and is within float32 rounding of the exact inverse transform (4.4e-7 on
outputs up to 54); ONNX Runtime differs from the expected values by 1.9e-5.

For polyloop, "passed (bound)" counts the passes where an input that decides a shape (a
Reshape's target, a Slice's bounds, a Resize's scales, given as graph inputs by these cases)
was bound to its value when the model was compiled, as ``onnx_backend`` does at the first
``run``; the rest compiled from the model alone.

    python benchmarks/onnx_conformance.py [--workers 2] [--filter SUBSTRING] [--list]

Every case builds a model (one gcc compile per kernel; cached on disk afterwards): the whole
run takes tens of minutes on 2 cores. Use ``nice``.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures as cf
import glob
import os
import re
import sys
import time
import traceback
import warnings

import numpy as np

SELECTED_DTYPES = {"float32", "int64"}
DEFAULT_DOMAINS = {"", "ai.onnx"}
DISK_SETS = ("pytorch-converted", "pytorch-operator", "simple")


def selected(case) -> bool:
    """The counting rule of the module docstring."""
    if not all(o.domain in DEFAULT_DOMAINS for o in case.model.opset_import):
        return False
    inputs = case.data_sets[0][0] if case.data_sets else []
    # a sequence or optional input (a list, None) has no dtype: not selected
    return all(str(getattr(a, "dtype", type(a).__name__)) in SELECTED_DTYPES for a in inputs)


def node_cases() -> list:
    warnings.filterwarnings("ignore")
    from onnx.backend.test.case import node
    return [c for c in node.collect_testcases(None) if selected(c)]


def disk_cases() -> list[tuple[str, str]]:
    import onnx.backend.test
    root = os.path.join(os.path.dirname(onnx.backend.test.__file__), "data")
    return [(kind, d) for kind in DISK_SETS
            for d in sorted(glob.glob(os.path.join(root, kind, "*")))
            if os.path.exists(os.path.join(d, "model.onnx"))]


def _disk_data(d: str):
    import onnx
    from onnx import numpy_helper
    model = onnx.load(os.path.join(d, "model.onnx"))
    ds = sorted(glob.glob(os.path.join(d, "test_data_set_*")))[0]

    def read(prefix):
        out = []
        for f in sorted(glob.glob(os.path.join(ds, f"{prefix}_*.pb")),
                        key=lambda p: int(re.findall(r"(\d+)\.pb$", p)[0])):
            t = onnx.TensorProto()
            with open(f, "rb") as fh:
                t.ParseFromString(fh.read())
            out.append(numpy_helper.to_array(t))
        return out
    return model, read("input"), read("output"), 1e-3, 1e-7


def _same(got, want, rtol, atol) -> bool:
    got = list(got)
    if len(got) != len(want):
        return False
    for a, b in zip(got, want):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        try:
            if a.dtype.kind in "biuO":
                np.testing.assert_array_equal(a, b)
            else:
                np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
        except AssertionError:
            return False
    return True


_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|%\w+")
_NODE = re.compile(r"^ONNX node \d+ \((\w+) '[^']*'\)(?: > (\w+))*: ")


def reason(message: str) -> str:
    """A refusal's group: the operator and the message with names and numbers elided."""
    first = message.splitlines()[0] if message else ""
    if "unsupported operator call" in first:
        ops = sorted(set(re.findall(r"\((\w+) '", message)))
        return f"unsupported operator: {', '.join(ops)}"
    m = _NODE.match(first)
    op = (m.group(2) or m.group(1)) if m else "model"
    text = _QUOTED.sub("_", first[m.end():] if m else first)
    text = re.sub(r"\d+", "N", text)
    return f"{op}: {text[:110]}"


def run_polyloop(model, inputs, want, rtol, atol) -> tuple[str, str]:
    import polyloop as pl
    from polyloop.graph.onnx_backend import PolyloopBackend
    try:
        rep = PolyloopBackend.prepare(model)
        got = rep.run([np.asarray(a) for a in inputs])
        ok = _same(got, want, rtol, atol)
        if ok:
            return ("passed (bound)" if rep.bound else "passed"), ""
        return "wrong", ""
    except pl.PolyloopError as e:
        return "refused", reason(str(e))
    except Exception as e:    # what must never happen: counted as foreign
        return "foreign", f"{type(e).__name__}: {str(e)[:200]} " + \
            traceback.format_exc(limit=-3).replace("\n", " | ")[-400:]


def run_ort(model, inputs, want, rtol, atol) -> str:
    try:
        import onnxruntime as ort
    except ImportError:
        return "n/a"
    try:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.log_severity_level = 4
        sess = ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        got = sess.run(None, {k: np.asarray(v) for k, v in zip(names, inputs)})
        return "passed" if _same(got, want, rtol, atol) else "wrong"
    except Exception:
        return "refused"


_CASES: list = []


def _init() -> None:
    _CASES[:] = node_cases()


def _one(kind: str, key: object) -> tuple:
    warnings.filterwarnings("ignore")
    if kind == "node":
        c = _CASES[key]
        model, (inputs, want), rtol, atol, name = c.model, c.data_sets[0], c.rtol, c.atol, c.name
    else:
        model, inputs, want, rtol, atol = _disk_data(key[1])
        name = f"{key[0]}/{os.path.basename(key[1])}"
    start = time.time()
    status, why = run_polyloop(model, inputs, want, rtol, atol)
    return kind if kind == "node" else key[0], name, status, why, \
        run_ort(model, inputs, want, rtol, atol), time.time() - start


def _run_all(jobs: list, workers: int, log) -> list[tuple]:
    """Each job in a worker process; a job whose worker crashed counts as foreign."""
    results, pending = [], list(jobs)
    while pending:
        with cf.ProcessPoolExecutor(workers, initializer=_init) as pool:
            futures = {pool.submit(_one, *job): job for job in pending}
            pending = []
            for f in cf.as_completed(futures):
                job = futures[f]
                try:
                    r = f.result()
                except cf.process.BrokenProcessPool:
                    group = "node" if job[0] == "node" else job[1][0]
                    r = (group, str(job[1]), "foreign", "the worker process crashed", "n/a", 0.0)
                results.append(r)
                log(r)
    return results


def report(results: list[tuple]) -> str:
    lines = []
    for group in ("node", *DISK_SETS):
        rows = [r for r in results if r[0] == group]
        if not rows:
            continue
        pl_count = collections.Counter(r[2] for r in rows)
        ort_count = collections.Counter(r[4] for r in rows)
        passed = pl_count["passed"] + pl_count["passed (bound)"]
        lines.append(f"\n== {group} cases: {len(rows)} ==")
        lines.append(f"polyloop:     passed {passed} (of which {pl_count['passed (bound)']} "
                     f"with shape inputs bound), refused {pl_count['refused']}, wrong "
                     f"{pl_count['wrong']}, foreign {pl_count['foreign']}")
        lines.append(f"onnxruntime:  passed {ort_count['passed']}, refused "
                     f"{ort_count['refused']}, wrong {ort_count['wrong']}")
        reasons = collections.Counter(r[3] for r in rows if r[2] == "refused")
        lines.append("polyloop refusals by reason:")
        lines += [f"  {n:4d}  {why}" for why, n in reasons.most_common()]
        for r in rows:
            if r[2] in ("wrong", "foreign"):
                lines.append(f"  {r[2].upper()}: {r[1]} {r[3]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--filter", default="", help="only cases whose name contains this")
    ap.add_argument("--no-disk", action="store_true", help="skip the on-disk sets")
    ap.add_argument("--list", action="store_true", help="print each case's outcome")
    args = ap.parse_args(argv)
    _init()
    jobs = [("node", k) for k, c in enumerate(_CASES) if args.filter in c.name]
    if not args.no_disk:
        jobs += [("disk", d) for d in disk_cases() if args.filter in d[1]]

    def log(r):
        if args.list or r[2] in ("wrong", "foreign"):
            print(f"{r[2]:>15}  ort {r[4]:<8} {r[1]}  {r[3]}", flush=True)
    start = time.time()
    results = _run_all(jobs, args.workers, log)
    print(report(results))
    print(f"\n{len(results)} cases in {time.time() - start:.0f} s ({args.workers} workers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
