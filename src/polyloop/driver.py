# SPDX-License-Identifier: Apache-2.0
"""``pl.build``: lower -> generate code -> compile -> a callable module. The one module that
knows the whole pipeline."""
from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np

from .errors import BuildError, PolyloopError
from .frontend.kernel import LoopKernel
from .frontend.te import Tensor
from .ir.program import BufferRole, Program
from .lower import lower
from .poly.bounds import find_out_of_bounds
from .schedule import Schedule
from .schedule.kernel import schedule_of

def dependences(obj: object, *, kind: str = "dataflow"):
    """The dependences of a program, schedule or output tensors: kind (RAW/WAR/WAW), source and
    sink statements, buffer, the exact isl relation and the distance vector where constant.

    ``kind="dataflow"`` (the default) keeps the direct ones: the write whose value each read
    sees, each write's previous write, the reads since the previous write. ``kind="memory"``
    lists every ordered pair of accesses to one element, which is what legality checks use.

    >>> import polyloop as pl
    >>> n = pl.var("n")
    >>> A = pl.placeholder((n,), "float32", name="A")
    >>> B = pl.compute((n,), lambda i: A[i] + 1.0, name="B")
    >>> print(pl.dependences(B))
    no dependences
    """
    from .poly.api import program_dependences
    from .poly.deps import direct
    if kind not in ("dataflow", "memory"):
        raise PolyloopError(f"dependences(kind={kind!r}): kind is 'dataflow' or 'memory'")
    if isinstance(obj, Schedule):
        program, deps = obj.program, obj.state.deps
    elif isinstance(obj, Program):
        program, deps = obj, program_dependences(obj)
    elif isinstance(obj, Tensor):
        program = obj.to_program()
        deps = program_dependences(program)
    elif isinstance(obj, (list, tuple)) and obj and all(isinstance(t, Tensor) for t in obj):
        program = obj[0].to_program(*obj[1:])
        deps = program_dependences(program)
    else:
        raise PolyloopError(f"dependences() takes a Program, a Schedule or output tensors, "
                            f"got {obj!r}")
    return deps if kind == "memory" else direct(deps, program)


def _schedule(obj: object, args: Sequence[Tensor] | None, name: str | None) -> Schedule:
    if isinstance(obj, Schedule):
        if args is not None:
            raise PolyloopError("args= goes to pl.Schedule(...) when building a schedule")
        return obj
    if isinstance(obj, Program):
        return Schedule(obj)
    if isinstance(obj, LoopKernel):
        return schedule_of(obj)
    outs = list(obj) if isinstance(obj, (list, tuple)) else [obj]
    if not outs or not all(isinstance(t, Tensor) for t in outs):
        raise PolyloopError(f"build() takes a Schedule, a Program or output tensors, got {obj!r}")
    return Schedule(*outs, args=args, name=name)


def _build_c(sch: Schedule, *, name: str | None, fast_math: bool, queue: object,
             profile: int = 0, partial_outputs: frozenset[str] = frozenset()):
    from . import codegen
    from .codegen.profile import profile_regions
    from .runtime import Module, compile_c
    if queue is not None:
        raise PolyloopError("queue= is an option of the 'opencl' target")
    from .config import CONFIG
    from .lower.hazards import negative_stride_reduction
    from .runtime.compiler import vectorizes_negative_step_reductions_wrongly
    kernel = lower(sch.program, sch.state.root, name=name)
    regions = tuple(profile_regions(kernel.body, depth=profile))
    source, sites = codegen.generate_c_unit(kernel, profile=regions)
    extra: tuple[str, ...] = ()
    if negative_stride_reduction(kernel.body) and \
            vectorizes_negative_step_reductions_wrongly(CONFIG.cc):
        extra = ("-fno-tree-loop-vectorize",)   # a wrong-code bug of GCC 12.1/12.2
    library = compile_c(source, name=kernel.name, fast_math=fast_math, extra_flags=extra)
    return Module(library, entry=kernel.name, args=kernel.args, params=kernel.params,
                  source=source, target="c",
                  profile=_profile_layout(sch.program, kernel, regions) if regions else None,
                  index_sites=tuple(site.describe() for site in sites),
                  partial_outputs=partial_outputs)


def _profile_layout(program: Program, kernel, regions: tuple):
    """What the timers of ``regions`` measure, with their work counted by isl for the sizes of
    a call (cached per sizes)."""
    from .poly.nest_work import nest_work
    from .runtime.profile import ProfileLayout
    buffers = {b.name: b for b in (*kernel.args, *kernel.temps)}
    cache: dict[tuple, list] = {}

    def counts(sizes):
        key = tuple(sorted(sizes.items()))
        if key not in cache:
            cache[key] = nest_work(program, buffers, kernel.params, kernel.body,
                                   [r.node for r in regions], sizes)
        return cache[key]
    return ProfileLayout(tuple(r.label for r in regions), tuple(r.depth for r in regions),
                         tuple(r.parallel for r in regions), counts)


def _build_opencl(sch: Schedule, *, name: str | None, fast_math: bool, queue: object,
                  profile: int = 0, partial_outputs: frozenset[str] = frozenset()):
    if profile:
        raise PolyloopError("profile= is an option of the 'c' target; the OpenCL target has "
                            "no per-nest timers")
    from .codegen.opencl import generate_opencl_unit
    from .lower.launches import lower_device
    from .runtime.opencl import FAULT_BUFFER, LaunchSpec, OpenCLModule, default_queue
    queue = queue if queue is not None else default_queue()   # a clear error without OpenCL
    device = lower_device(sch.program, sch.state.root, name=name)
    unit = generate_opencl_unit(device)
    launches = tuple(LaunchSpec(x.kernel.name, x.groups, x.items,
                                tuple(b.name for b in x.kernel.args)
                                + ((FAULT_BUFFER,) if x.kernel.name in unit.faulting else ()))
                     for x in device.launches)
    return OpenCLModule(unit.source, entry=device.name, args=device.args, params=device.params,
                        scratch=device.scratch, launches=launches, queue=queue,
                        index_sites=tuple(site.describe() for site in unit.index_sites),
                        partial_outputs=partial_outputs)


# target -> builder (lower, generate code, compile, wrap in a callable module)
TARGETS = {"c": _build_c, "opencl": _build_opencl}


def build(obj: object, target: str = "c", *, args: Sequence[Tensor] | None = None,
          name: str | None = None, check: bool = False, fast_math: bool = False,
          queue: object = None, profile: bool | int = False):
    """Compile a schedule (or tensors/program with the default schedule) into a callable module.

    >>> import numpy as np, polyloop as pl
    >>> n = pl.var("n")
    >>> A = pl.placeholder((n,), "float32", name="A")
    >>> B = pl.compute((n,), lambda i: A[i] + 1.0, name="B")
    >>> mod = pl.build(B)
    >>> mod(np.zeros(3, "float32"))
    array([1., 1., 1.], dtype=float32)

    Targets: ``"c"`` (C with OpenMP) and ``"opencl"`` (PyOpenCL; ``queue=`` runs on a given
    command queue, else on the first device found). ``check=True`` runs the reference
    interpreter once on small random inputs and refuses to return a module whose results differ.
    ``profile=True`` times each top-level loop nest of the C function (``profile=2``, ``3``...:
    also the nests inside them, that many levels deep); ``mod.profile()`` then says where the
    time of the calls went. Without it no timing code is generated.
    """
    if target not in TARGETS:
        raise PolyloopError(f"unknown target {target!r}; valid targets: {', '.join(TARGETS)}")
    sch = _schedule(obj, args, name)
    outside = find_out_of_bounds(sch.original)
    if outside is not None:
        raise PolyloopError(f"{outside}; keep indices inside the tensor's shape, or guard the "
                            "read with pl.where(condition, read, other)")
    partial = _check_dataflow(sch)
    mod = TARGETS[target](sch, name=name, fast_math=fast_math, queue=queue,
                          profile=_profile_depth(profile), partial_outputs=partial)
    mod.schedule = sch
    if check:
        _check(sch, mod)
    return mod


def _check_dataflow(sch: Schedule) -> frozenset[str]:
    """Refuse a temporary element read before any instance writes it (it would be whatever the
    memory held); warn for such reads of outputs. Returns the outputs some element of which
    the program may not write: allocated zeroed, never overwritten where not written."""
    from .poly.coverage import unwritten_elements, unwritten_reads
    program, schedule = sch.program, sch.state.schedule_map()
    for read in unwritten_reads(program, schedule):
        if read.ordinary:
            raise BuildError(f"{read}; a temporary has no initial value: write it before "
                             "reading it (or read an input instead)")
        warnings.warn(f"{read}, a temporary with no initial value (only where a size is 0: "
                      "do not call the kernel with those sizes)", RuntimeWarning, stacklevel=3)
    for read in unwritten_reads(program, schedule, frozenset({BufferRole.OUTPUT})):
        warnings.warn(f"{read}: the output's element keeps the value it had before the call "
                      "(zero when polyloop allocates it)", RuntimeWarning, stacklevel=3)
    return frozenset(b.name for b in program.arg_buffers() if b.role is BufferRole.OUTPUT
                     and unwritten_elements(program, b.name) is not None)


def _profile_depth(profile: object) -> int:
    if isinstance(profile, bool):
        return int(profile)
    if isinstance(profile, int) and profile >= 0:
        return profile
    raise PolyloopError(f"profile={profile!r}: give True, False, or the number of nest levels "
                        "to time (1: the top-level nests)")


def _random_inputs(program: Program, rng: np.random.Generator, sizes: dict[str, int]):
    from .ir.shapes import evaluate
    arrays = {}
    for b in program.arg_buffers():
        if b.role is BufferRole.OUTPUT:
            continue
        shape = tuple(evaluate(d, sizes) for d in b.shape)
        if b.dtype.is_float:
            arrays[b.name] = rng.standard_normal(shape).astype(b.dtype.numpy)
        elif b.dtype.is_int:
            arrays[b.name] = rng.integers(-9, 10, size=shape).astype(b.dtype.numpy)
        else:
            arrays[b.name] = rng.integers(0, 2, size=shape).astype(bool)
    return arrays


def _check(sch: Schedule, mod) -> None:
    from .testing import interpret
    program = sch.original
    rng = np.random.default_rng(0)
    sizes = {p: int(rng.integers(5, 12)) for p in program.params}
    inputs = _random_inputs(program, rng, sizes)
    ref_args = {k: v.copy() for k, v in inputs.items()}
    mod_args = {k: v.copy() for k, v in inputs.items()}
    expected = interpret(program, **ref_args, **sizes)
    got = mod(**mod_args, **sizes)
    # the returned outputs, then the arrays both updated in place
    inout = [b.name for b in program.arg_buffers() if b.role is BufferRole.INOUT]
    exp_t = (expected if isinstance(expected, tuple) else (expected,)) + tuple(
        ref_args[name] for name in inout)
    got_t = (got if isinstance(got, tuple) else (got,)) + tuple(mod_args[name] for name in inout)
    for e, g in zip(exp_t, got_t):
        if e is None:
            continue
        tol = 1e-4 if e.dtype == np.float32 else 1e-9
        if not np.allclose(g, e, rtol=tol, atol=tol, equal_nan=False):
            bad = np.argwhere(~np.isclose(g, e, rtol=tol, atol=tol))[0]
            raise BuildError(f"check failed: the compiled '{mod.entry}' differs from the reference "
                             f"interpreter at {tuple(int(x) for x in bad)} (sizes {sizes}): "
                             f"{g[tuple(bad)]} vs {e[tuple(bad)]}. Source: {_source_of(mod)}")


def _source_of(mod) -> str:
    library = getattr(mod, "library", None)
    return str(library.source_path) if library is not None else "mod.source"
