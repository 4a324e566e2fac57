# SPDX-License-Identifier: Apache-2.0
"""``pl.graph.build``: passes, lowering, schedules, one shared library, an executor."""
from __future__ import annotations

import functools
import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from .. import config, driver, ops
from ..codegen.team import TeamRole, team_role
from ..frontend import te
from ..schedule import Schedule
from ..errors import PolyloopError
from ..runtime import cache
from ..runtime.compiler import (BASE_FLAGS, Library, compile_c_units, compile_unit,
                                compiler_version)
from ..runtime.records import Database, workload_key
from ..runtime.target import HOST, Target
from .bfloat16 import check_dtype, use_bfloat16
from .canonical import canonical_call
from .cross import CrossModel
from .entry import Step, entry_source, weight_blob
from .executor import Executor, Segment
from .extern import lookup_extern, route_externs
from .foreign import apply_fallback, fallback_function
from .ir import VIEWS, Call, ExternCall, Graph, KernelCall, Op, Value
from .lower import lower_kernel, te_shape
from .memory import plan_memory
from .passes.attention import attention_schedule
from .passes.dense_panels import panel_dense_schedule
from .passes.int8_layout import channels_last_int8
from .passes import conv_pool_dense_schedule, fuse_conv_pool_dense, pad_dense_columns
from .passes import (conv_epilogue_schedule, conv_pool_schedule, dense_split_schedule,
                     fold_constants, fold_conv_epilogues, fuse_conv_pool, fuse_into_consumers,
                     fuse_operators, library_conv, library_matmul, packed_columns, packed_conv,
                     remove_dead_code, use_library_kernels)
from .schedule import default_schedule, serial_if_small
from .verify import verify


def materialize_outputs(g: Graph) -> Graph:
    """Each graph output is written by a kernel: an output that is an input, a constant, a view
    or listed twice gets a copy."""
    written = {v.name for b in g.bindings if not (isinstance(b, Call) and b.op in VIEWS)
               for v in b.outputs}
    bindings, outputs, seen = list(g.bindings), [], set()
    for v in g.outputs:
        empty = 0 in v.type.shape      # no element to write: the caller's array is the result
        if (v.name not in written or v.name in seen) and not empty:
            copy = Value(f"{v.name}_out{len(outputs)}", v.type)
            bindings.append(Call((copy,), Op.COPY, (v,)))
            v = copy
        seen.add(v.name)
        outputs.append(v)
    return g.replace(bindings=tuple(bindings), outputs=tuple(outputs))


def optimize(g: Graph, *, winograd: bool = True, fallback: str = "error",
             dtype: str = "float32") -> Graph:
    """The graph passes of ``build``, in order (print the result to see the fused kernels);
    ``winograd=False``: no convolution runs as Winograd; ``fallback``, ``dtype``: see
    ``build``."""
    precision = [use_bfloat16] if check_dtype(dtype) == "bfloat16" else []
    steps = [functools.partial(apply_fallback, fallback=fallback), materialize_outputs,
             fold_constants, remove_dead_code, route_externs, channels_last_int8,
             *precision,
             fuse_operators, functools.partial(use_library_kernels, winograd=winograd),
             fuse_into_consumers, fuse_conv_pool, fold_conv_epilogues, fuse_conv_pool_dense,
             pad_dense_columns, remove_dead_code]
    verify(g, where="before the passes")
    for step in steps:     # every pass keeps the graph's invariants, or the build stops here
        g = verify(step(g), where=f"after {getattr(step, 'func', step).__name__}")
    return g


def _library_schedule(kc: KernelCall):
    """The ``polyloop.ops`` recipe of a kernel that is one such convolution, matrix product or
    attention, else None."""
    body = kc.kernel.body
    fused = (attention_schedule(kc) or conv_pool_schedule(kc) or dense_split_schedule(kc)
             or conv_pool_dense_schedule(kc) or conv_epilogue_schedule(kc))
    if fused is not None:
        return fused
    head = body[0].attr("fn") if body[0].op is Op.TE else None
    integer = getattr(head, "library_schedule", None) \
        if len(body) == 1 or getattr(head, "takes_epilogue", False) else None
    if integer is not None:        # an int8 (graph.integer) or bf16 (graph.bfloat16) product
        return integer(lower_kernel(kc.kernel).results[0])   # None: the default schedule
    if len(body) != 1 or len(kc.inputs) != 2:
        return None
    kind = "matmul" if library_matmul(body[0]) else library_conv(body[0])
    if kind is None:
        return None
    x, w = (te.placeholder(te_shape(v.type), v.type.dtype, name=v.name) for v in kc.inputs)
    if kind == "matmul" and len(w.shape) == 3:     # weights packed by use_library_kernels
        columns = packed_columns(body[0])
        return panel_dense_schedule(x, w, columns) or \
            ops.schedule_matmul(ops.matmul_packed(x, w, columns))
    if kind == "matmul":
        return ops.schedule_matmul(ops.matmul(x, w))
    if kind == "conv2d":
        conv = packed_conv(body[0], x, w)
        if conv is None:
            return None
        if body[0].attr("winograd"):
            return ops.schedule_conv2d_winograd(conv)
        if body[0].attr("pixels"):
            return ops.schedule_conv2d_pixels(conv)
        return ops.schedule_conv2d_nchw(conv)
    return ops.schedule_depthwise_conv2d_nchw(ops.depthwise_conv2d_nchw(
        x, w, body[0].attr("padding"), stride=body[0].attr("stride")))


def kernel_schedule(kc: KernelCall) -> Schedule:
    """The schedule the rules give a kernel of an optimized graph: the operator library's
    recipe (convolutions, matrix products, attention and their fused forms), else the default
    schedule; serial when the kernel is small (``schedule.serial_if_small``). It is what an
    untuned build runs and the first candidate ``pl.graph.tune`` measures. The kernel's values
    are renamed by position first (``canonical_call``): equal layers give equal programs."""
    kc = canonical_call(kc)
    library = _library_schedule(kc)
    sch = library if library is not None else default_schedule(lower_kernel(kc.kernel))
    return serial_if_small(sch, kc.kernel.body)


def _schedule(kc: KernelCall, database: Database | None, target: Target = HOST):
    """The kernel's schedule: the best one a tuning database records for it, else the
    rules' (``kernel_schedule``)."""
    sch = kernel_schedule(kc)
    return sch if database is None else driver.best_known(sch, str(target), database)


def _cache_root() -> Path:
    return cache.safe_directory(Path(config.CONFIG.cache_dir))


def weights_digest(g: Graph) -> str:
    """A hash of every constant's name, dtype, shape and bytes, read in place (no copy): a
    changed weight gives another digest, without building the weight blob.

    >>> import numpy as np, polyloop as pl
    >>> from polyloop.graph.build import weights_digest
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", (2,))
    >>> g = b.build(b.emit(pl.graph.Op.MUL, x, b.constant(np.ones(2, "float32"))))
    >>> len(weights_digest(g))
    32
    """
    h = hashlib.sha256()
    for c in g.constants:
        data = np.ascontiguousarray(c.data)
        h.update(f"{c.value.name}:{data.dtype.str}:{data.shape}".encode())
        h.update(data.reshape(-1).view(np.uint8))
    return h.hexdigest()[:32]


def _blob_path(g: Graph, digest: str) -> tuple[str, list[int]]:
    """The weight blob's file (written once per digest) and each constant's offset in it."""
    blob, offsets = weight_blob(g)
    path = _cache_root() / "weights" / f"{digest}.bin"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(blob)
        tmp.replace(path)
    return str(path.resolve()), offsets


@functools.cache
def _code_version() -> str:
    """A hash of polyloop's own sources: a cached model is rebuilt when the compiler changes."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent.parent
    for path in sorted(root.rglob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()


def _database_state(database: Database | None) -> str:
    """The records file's identity and state: recording a new best schedule misses the cache.
    The write-ahead log is included since new records land there before a checkpoint."""
    if database is None:
        return "none"
    parts = [str(database.path)]
    for p in (database.path, Path(f"{database.path}-wal")):
        st = p.stat() if p.exists() else None
        parts.append(f"{st.st_size}:{st.st_mtime_ns}" if st else "-")
    return " ".join(parts)


def model_key(g: Graph, weights: str, database: Database | None,
              target: Target = HOST) -> str:
    """The cache key of an optimized graph: its text, the weights' digest, the tuning
    database's state, the thread count (schedules are chosen for it: a dense layer's reduction
    is split in one slice per thread), the target, the C flags, the compiler's version and
    polyloop's sources.

    >>> import polyloop as pl
    >>> from polyloop.graph.build import model_key
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", (2,))
    >>> g = b.build(b.emit(pl.graph.Op.RELU, x))
    >>> model_key(g, "no weights", None) == model_key(g, "other weights", None)
    False
    """
    cfg = config.CONFIG
    h = hashlib.sha256()
    for part in (str(g), weights, _database_state(database), f"threads={cfg.threads}",
                 f"region per kernel={cfg.region_per_kernel}",
                 str(target), " ".join(BASE_FLAGS), " ".join(cfg.cflags), target.cc,
                 compiler_version(target.cc), _code_version()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def _cached(g: Graph, plan, key: str) -> Executor | None:
    manifest = _cache_root() / "models" / f"{key}.json"
    if not manifest.exists():
        return None
    try:
        data = json.loads(manifest.read_text())
    except (OSError, ValueError):     # a manifest cut short by a crash: build again
        return None
    library = Library(Path(data["library"]), Path(data["library"]).parent / "unit0.c", True,
                      BASE_FLAGS)
    weights = data.get("weights")
    if not (library.path.exists() and weights and Path(weights).exists()):
        return None
    externs = iter(b for b in g.bindings if isinstance(b, ExternCall))
    segments = [Segment(labels=tuple(s["labels"]), entry=s["entry"]) if s["entry"] else
                Segment(extern=(b := next(externs)), function=extern_function(b))
                for s in data["segments"]]
    return Executor(g, plan, library, segments, blob_path=weights)


def _remember(key: str, ex: Executor) -> None:
    manifest = _cache_root() / "models" / f"{key}.json"
    manifest.parent.mkdir(parents=True, exist_ok=True)
    data = {"library": str(ex.library.path), "weights": ex.blob_path,
            "segments": [{"entry": s.entry, "labels": list(s.labels)} for s in ex.segments]}
    tmp = manifest.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(manifest)


def extern_function(call: ExternCall):
    """The Python function an extern call runs: a fallback's reference, or the registered one."""
    return fallback_function(call) or lookup_extern(call.name)


def build(graph: Graph, target: str | Target = "c", *, database: object = None,
          winograd: bool = True, fallback: str = "error",
          dtype: str = "float32") -> Executor | CrossModel:
    """Optimise, lower, schedule and compile ``graph`` into one shared library.

    ``winograd=False`` runs every convolution with the direct recipe; by default the 3 x 3,
    stride-1 ones with enough channels run as Winograd F(2x2, 3x3), faster, with a different
    rounding (``polyloop.ops.conv2d_winograd``).

    ``fallback`` says what happens to imported operator calls the graph cannot compile
    (``Op.FOREIGN``): ``"error"`` (the default) refuses the model, listing every one;
    ``"torch"`` or ``"numpy"`` runs each through that reference implementation inside the
    executor, between the compiled kernels, and prints which; ``Executor.report()`` lists
    them beside the compiled kernels.

    ``dtype="bfloat16"`` runs the convolutions and matrix products that ``polyloop.ops``' bf16
    operators take on bfloat16 inputs and weights with float32 sums (AVX-512 BF16 or AMX where
    the CPU has them): weights rounded to bfloat16 (to nearest even) once, at build time,
    activations as each product reads them; everything else, bias and activations included,
    stays float32 (``polyloop.graph.bfloat16``). ``Executor.report()`` marks the kernels that
    run in bfloat16 and lists the products that stayed float32. The default, ``"float32"``,
    computes everything in float32.

    >>> import numpy as np, polyloop as pl, ml_dtypes
    >>> b = pl.graph.GraphBuilder("mlp"); x = b.input("x", ("n", 3))
    >>> w = b.constant(np.array([[1.0, 2.0], [3.0, 4.0], [1 / 3, 0.0]], "float32"), "w")
    >>> y = pl.graph.build(b.build(b.emit(pl.graph.Op.MATMUL, x, w)), dtype="bfloat16")
    >>> y(np.array([[1.0, 0.0, 3.0]], "float32"))     # 1/3 rounded to bfloat16: 0.333984375
    array([[2.0019531, 2.       ]], dtype=float32)

    A model built before (same graph, weights, options and polyloop version) is loaded from
    the cache without generating code again. A C target for another machine (``"c
    -mtriple=aarch64-linux-gnu"``, see ``pl.build``) gives a ``CrossModel``: the library for
    that machine, to export or to run there over RPC (``pl.rpc``).

    >>> import numpy as np, polyloop as pl
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", ("n", 3))
    >>> ex = pl.graph.build(b.build(b.emit(pl.graph.Op.RELU, x)))
    >>> ex(np.array([[-1.0, 0.0, 2.0]], "float32"))
    array([[0., 0., 2.]], dtype=float32)
    """
    kind, c_target = driver.parse_target(target)
    if kind != "c":
        raise PolyloopError(f"pl.graph.build: target {target!r} is not supported; the graph "
                            "executor targets 'c' (or 'c -mtriple=...' for another machine)")
    db = _open_database(database)
    return compile_graph(optimize(graph, winograd=winograd, fallback=fallback, dtype=dtype),
                         database=db, target=c_target)


def compile_graph(g: Graph, *, database: Database | None = None,
                  target: Target = HOST) -> Executor | CrossModel:
    """Generate, compile and link an optimized graph (``optimize``'s result) for ``target``:
    an Executor for this machine, a CrossModel for another."""
    plan = plan_memory(g)
    digest = weights_digest(g)
    key = model_key(g, digest, database, target)
    ex = _cached(g, plan, key) if target.runs_here else None
    if ex is not None:
        return ex
    path, offsets = _blob_path(g, digest)
    units, segments = _generate(g, database, target)
    n_entries = sum(1 for s in segments if s.extern is None)
    k = 0
    for s in segments:
        if s.extern is None:
            s.entry = g.name if n_entries == 1 else f"{g.name}_s{k}"
            units.append((entry_source(s.entry, g, plan, list(s.steps), path, offsets), ()))
            k += 1
    if not units:       # only extern calls: a library with nothing to run
        units.append((f"/* {g.name}: extern calls only */\nint pl_no_kernels;\n", ()))
    library = compile_c_units(units, name=g.name, target=target)
    if not target.runs_here:
        if len(segments) != 1 or segments[0].entry is None:
            raise PolyloopError(f"model '{g.name}' calls extern Python functions, which "
                                f"'{target}' cannot run; build it without register_extern "
                                "routes to build it for another machine")
        return CrossModel(g, plan, library, segments[0].entry, target)
    ex = Executor(g, plan, library, segments, blob_path=path)
    _remember(key, ex)
    return ex


def _open_database(database: object) -> Database | None:
    """The tuning database, opened once per build (not once per kernel)."""
    if database is None:
        return None
    if not isinstance(database, (str, os.PathLike)):
        raise PolyloopError(f"pl.graph.build(database={database!r}): give the path of a tuning "
                            "work directory or of its records.sqlite")
    return Database(database)


def _generate(g: Graph, database: Database | None,
              target: Target = HOST) -> tuple[list, list[Segment]]:
    """The C source of every kernel, and the kernels grouped into runs between extern calls.
    Each kernel's object is compiled in the background while the next kernel is generated
    (gcc runs in its own process), so the final link finds them compiled."""
    units: list[tuple[str, tuple[str, ...]]] = []
    segments: list[Segment] = []
    steps: list[Step] = []
    labels: list[str] = []
    made: dict[str, tuple] = {}    # schedule -> function, size params, role (codegen.team)
    shared = not config.CONFIG.region_per_kernel    # kernels may share a parallel region
    with ThreadPoolExecutor(max(1, min(2, os.cpu_count() or 1))) as pool:
        compiling = []
        for b in g.bindings:
            if isinstance(b, KernelCall):
                sch = _schedule(b, database, target)
                key = workload_key(sch.original, str(target)) + sch.trace.to_json()
                if key not in made:     # a kernel equal to an earlier one calls its function
                    kernel, source, extra, sites = driver.c_kernel(
                        sch, name=b.kernel.name, target=target, team=shared)
                    units.append((source, extra))
                    compiling.append(pool.submit(compile_unit, source, extra, target))
                    made[key] = (kernel.name, tuple(kernel.params),
                                 team_role(kernel, checks_indices=bool(sites)) if shared
                                 else TeamRole.ALONE)
                function, params, role = made[key]
                steps.append(Step(function, (*b.inputs, *b.outputs), params,
                                  outputs=len(b.outputs), role=role))
                labels.append(b.kernel.name)
            elif isinstance(b, ExternCall):
                if steps:
                    segments.append(Segment(steps=tuple(steps), labels=tuple(labels)))
                    steps, labels = [], []
                segments.append(Segment(extern=b, function=extern_function(b)))
        for f in compiling:     # a compiler error surfaces here, as it would at the link
            f.result()
    if steps or not segments:
        segments.append(Segment(steps=tuple(steps), labels=tuple(labels)))
    return units, segments
