# SPDX-License-Identifier: Apache-2.0
"""``pl.build``: lower -> generate code -> compile -> a callable module. The one module that
knows the whole pipeline."""
from __future__ import annotations

import os
import warnings
from typing import Sequence


from . import codegen
from .codegen.cuda import generate_cuda
from .codegen.explain import explain_kernel
from .codegen.opencl import generate_opencl_unit
from .codegen.profile import profile_regions
from .errors import BuildError, PolyloopError
from .frontend.kernel import LoopKernel
from .frontend.te import Tensor
from .ir.program import BufferRole, Program
from .lower import lower
from .lower.hazards import negative_stride_reduction
from .lower.launches import lower_device
from .poly.assumptions import assumption_checks
from .ir.assumption import Assumption
from .poly.preconditions import Preconditions, preconditions, with_preconditions
from .poly.coverage import unwritten_elements, unwritten_reads
from .poly.nest_work import nest_work
from .runtime import Module, compile_c
from .runtime.compiler import workaround_flags
from .runtime.cross import CrossModule
from .runtime.cuda import CudaLaunch, CudaModule
from .runtime.cuda_compiler import compile_cuda
from .runtime.opencl import FAULT_BUFFER, LaunchSpec, OpenCLModule, default_queue
from .runtime.profile import ProfileLayout
from .runtime.records import Database, workload_key
from .runtime.target import HOST, Target
from .schedule import Schedule
from .schedule.gpu_default import map_unbound_nests
from .schedule.kernel import schedule_of
from .testing.oracle import check_against_interpreter

def _target_and_args(second: object, target: str | Target | None,
                     args: Sequence[Tensor] | None
                     ) -> tuple[str | Target, Sequence[Tensor] | None]:
    """Sort ``build(obj, "c")``, ``build(obj, target="c")`` and ``build(obj, [A, B], "c")``."""
    if isinstance(second, (list, tuple)):
        if args is not None:
            raise PolyloopError("build() got the argument list twice: positionally and as args=")
        return (target or "c"), second
    if second is not None and target is not None:
        raise PolyloopError(f"build() got the target twice: {second!r} and target={target!r}")
    if second is not None and not isinstance(second, (str, Target)):
        raise PolyloopError(f"build(obj, {second!r}): the second argument is the target (a "
                            "string such as 'c') or the list of argument tensors")
    return (second or target or "c"), args


def _check_argument_list(sch: Schedule, args: Sequence[Tensor]) -> None:
    given = [getattr(t, "name", None) for t in args]
    if not all(isinstance(t, Tensor) for t in args):
        raise PolyloopError(f"build(sch, [...]): the argument list holds tensors, got {given}")
    if tuple(given) != tuple(sch.program.args):
        raise PolyloopError(
            f"build(sch, [{', '.join(map(str, given))}]): the schedule's arguments are "
            f"[{', '.join(sch.program.args)}] in this order; build(sch) uses them, or choose "
            "the order when making the schedule: pl.Schedule(C, args=[A, B, C])")


def _schedule(obj: object, args: Sequence[Tensor] | None, name: str | None) -> Schedule:
    if isinstance(obj, Schedule):
        if args is not None:
            _check_argument_list(obj, args)
        return obj
    if isinstance(obj, Program):
        return Schedule(obj)
    if isinstance(obj, LoopKernel):
        return schedule_of(obj)
    outs = list(obj) if isinstance(obj, (list, tuple)) else [obj]
    if not outs or not all(isinstance(t, Tensor) for t in outs):
        raise PolyloopError(f"build() takes a Schedule, a Program or output tensors, got {obj!r}")
    return Schedule(*outs, args=args, name=name)


# the preconditions of a program and every condition on its sizes a call checks
Sized = tuple[Preconditions, tuple[Assumption, ...]]


def _build_c(sch: Schedule, sized: Sized, *, name: str | None, fast_math: bool, queue: object,
             profile: int = 0, partial_outputs: frozenset[str] = frozenset(),
             target: Target = HOST):
    if queue is not None:
        raise PolyloopError("queue= is an option of the 'opencl' target")
    if not target.runs_here:
        return _build_cross(sch, sized, name=name, fast_math=fast_math, profile=profile,
                            partial_outputs=partial_outputs, target=target)
    kernel, source, extra, sites = c_kernel(sch, name=name, profile=profile, sized=sized)
    regions = tuple(profile_regions(kernel.body, depth=profile))
    library = compile_c(source, name=kernel.name, fast_math=fast_math, extra_flags=extra)
    mod = Module(library, entry=kernel.name, args=kernel.args, params=kernel.params,
                 source=source, target="c",
                 profile=_profile_layout(sch.program, kernel, regions) if regions else None,
                 assumptions=sized[1], temps=kernel.temps,
                 index_sites=tuple(site.describe() for site in sites),
                 partial_outputs=partial_outputs)
    mod.explanation = explain_kernel(kernel)
    return mod


def _build_cross(sch: Schedule, sized: Sized, *, name: str | None, fast_math: bool,
                 profile: int, partial_outputs: frozenset[str], target: Target) -> CrossModule:
    """A kernel for another machine: code for its vector ISA, its cross compiler, no loading."""
    if profile:
        raise PolyloopError(f"profile= times nests on this machine; a module for "
                            f"'{target}' runs elsewhere: build it without profile=")
    kernel, source, extra, sites = c_kernel(sch, name=name, sized=sized, target=target)
    library = compile_c(source, name=kernel.name, fast_math=fast_math, extra_flags=extra,
                        target=target)
    mod = CrossModule(library, entry=kernel.name, args=kernel.args, params=kernel.params,
                      source=source, target=target, assumptions=sized[1],
                      temps=kernel.temps, index_sites=tuple(site.describe() for site in sites),
                      partial_outputs=partial_outputs)
    mod.explanation = explain_kernel(kernel, target.isa())
    return mod


def sized_program(sch: Schedule) -> Sized:
    """The preconditions under which every access of the program stays in its buffer
    (``poly.preconditions``: lowering relies on them) and the conditions on the sizes every
    call checks: the program's assumptions, then those preconditions. Raises BuildError when
    no useful size is left."""
    pre = preconditions(sch.original)
    if pre.refusal is not None:
        raise BuildError(pre.refusal)
    return pre, assumption_checks(sch.program) + pre.requirements


def c_kernel(sch: Schedule, *, name: str | None = None, profile: int = 0,
             check_bounds: bool = True, sized: Sized | None = None, target: Target = HOST,
             team: bool = False):
    """Lower a schedule and generate its C function: ``(kernel, source, extra_flags, sites)``,
    where ``kernel`` has the entry's ``name``, ``args`` and ``params``, ``extra_flags`` are the
    compiler flags the source needs and ``sites`` the accesses checked at run time. (The graph
    executor links many such sources into one library.) ``sized``: what ``sized_program``
    returns (computed here when not given, unless ``check_bounds=False``: then only the
    program's own assumptions are checked); the C function checks those conditions itself.
    ``target``: the machine the code is for (its vector ISA; this machine's by default).
    ``team``: also the variant a model's parallel region calls (``codegen.team``).

    >>> import polyloop as pl
    >>> B = pl.compute((4,), lambda i: pl.placeholder((4,), name="A")[i] + 1.0, name="B")
    >>> kernel, source, flags, sites = c_kernel(pl.Schedule(B), name="inc")
    >>> kernel.name, "int32_t inc(" in source
    ('inc', True)
    """
    if sized is None:
        sized = sized_program(sch) if check_bounds else (Preconditions(),
                                                         assumption_checks(sch.program))
    pre, conditions = sized
    kernel = lower(with_preconditions(sch.program, pre), sch.state.root, name=name)
    regions = tuple(profile_regions(kernel.body, depth=profile))
    source, sites = codegen.generate_c_unit(kernel, profile=regions, assumptions=conditions,
                                            isa=None if target.runs_here else target.isa(),
                                            team=team)
    flags = workaround_flags(negative_step_reduction=negative_stride_reduction(kernel.body),
                             target=target)
    return kernel, source, flags, sites


def _profile_layout(program: Program, kernel, regions: tuple):
    """What the timers of ``regions`` measure, with their work counted by isl for the sizes of
    a call (cached per sizes)."""
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


def _build_opencl(sch: Schedule, sized: Sized, *, name: str | None, fast_math: bool, queue: object,
                  profile: int = 0, partial_outputs: frozenset[str] = frozenset()):
    if profile:
        raise PolyloopError("profile= is an option of the 'c' target; the OpenCL target has "
                            "no per-nest timers")
    queue = queue if queue is not None else default_queue()   # a clear error without OpenCL
    sch = map_unbound_nests(sch)    # a nest left unbound runs on work-groups where it can
    device = lower_device(with_preconditions(sch.program, sized[0]), sch.state.root, name=name)
    unit = generate_opencl_unit(device)
    launches = tuple(LaunchSpec(x.kernel.name, x.groups, x.items,
                                tuple(b.name for b in x.kernel.args)
                                + ((FAULT_BUFFER,) if x.kernel.name in unit.faulting else ()))
                     for x in device.launches)
    return OpenCLModule(unit.source, entry=device.name, args=device.args, params=device.params,
                        scratch=device.scratch, launches=launches, queue=queue,
                        index_sites=tuple(site.describe() for site in unit.index_sites),
                        partial_outputs=partial_outputs, assumptions=sized[1])


def _build_cuda(sch: Schedule, sized: Sized, *, name: str | None, fast_math: bool, queue: object,
                profile: int = 0, partial_outputs: frozenset[str] = frozenset()):
    if profile or queue is not None:
        raise PolyloopError("profile= and queue= are options of the 'c' and 'opencl' targets")
    device = lower_device(with_preconditions(sch.program, sized[0]), sch.state.root, name=name)
    source = generate_cuda(device)
    ptx = compile_cuda(source, name=device.name, fast_math=fast_math)
    launches = tuple(CudaLaunch(x.kernel.name, x.groups, x.items,
                                tuple(b.name for b in x.kernel.args)) for x in device.launches)
    return CudaModule(source, ptx.text, entry=device.name, args=device.args,
                      params=device.params, scratch=device.scratch, launches=launches,
                      assumptions=sized[1])


# target -> builder (lower, generate code, compile, wrap in a callable module)
TARGETS = {"c": _build_c, "opencl": _build_opencl, "cuda": _build_cuda}


def build(obj: object, target_or_args: object = None, target: str | Target | None = None, *,
          args: Sequence[Tensor] | None = None, name: str | None = None, check: bool = False,
          fast_math: bool = False, queue: object = None, profile: bool | int = False,
          database: object = None, explain: bool = False):
    """Compile a schedule (or tensors/program with the default schedule) into a callable module.

    >>> import numpy as np, polyloop as pl
    >>> n = pl.var("n")
    >>> A = pl.placeholder((n,), "float32", name="A")
    >>> B = pl.compute((n,), lambda i: A[i] + 1.0, name="B")
    >>> mod = pl.build(B)
    >>> mod(np.zeros(3, "float32"))
    array([1., 1., 1.], dtype=float32)

    Targets: ``"c"`` (C with OpenMP), ``"opencl"`` (PyOpenCL; ``queue=`` runs on a given
    command queue, else on the first device found) and ``"cuda"`` (nvcc or NVRTC to PTX; runs
    on the first CUDA GPU; built and readable, ``mod.source`` and ``mod.ptx``, without one).
    A C target for another machine, ``"c -mtriple=aarch64-linux-gnu"`` (also
    ``arm-linux-gnueabihf``, ``riscv64-linux-gnu``; ``-mcpu=``, ``-mattr=``, or a
    ``pl.Target``), compiles with that machine's cross compiler and returns a ``CrossModule``:
    export it, or run it there over RPC (``pl.rpc``). ``check=True`` runs the reference
    interpreter once on small random inputs and refuses to return a module whose results differ.
    ``profile=True`` times each top-level loop nest of the C function (``profile=2``, ``3``...:
    also the nests inside them, that many levels deep); ``mod.profile()`` then says where the
    time of the calls went. Without it no timing code is generated.

    TVM's spelling ``pl.build(sch, [A, B, C], target="c")`` names the arguments in order: the
    list must be the schedule's arguments (``pl.Schedule(C, args=[...])`` chooses them).
    ``database=`` (a ``pl.tune`` work directory or its ``records.sqlite``) builds the fastest
    schedule recorded there for this program and target, or, with a warning, the given one.
    ``explain=True`` prints what code generation made of the schedule (``mod.explain()``):
    loops marked vectorized that are not vector code and why, unrolled loops without a
    constant trip count, temporaries sized to a loop, accumulators kept in registers.
    """
    target, args = _target_and_args(target_or_args, target, args)
    kind, c_target = parse_target(target)
    sch = _schedule(obj, args, name)
    if database is not None:
        sch = best_known(sch, str(c_target) if kind == "c" else kind, database)
    if check and not c_target.runs_here:
        raise PolyloopError(f"check=True runs the module on this machine; a module for "
                            f"'{c_target}' runs elsewhere: check it over RPC instead")
    sized = sized_program(sch)
    partial = _check_dataflow(sch, with_preconditions(sch.program, sized[0]))
    options = {"target": c_target} if kind == "c" else {}
    mod = TARGETS[kind](sch, sized, name=name, fast_math=fast_math, queue=queue,
                        profile=_profile_depth(profile), partial_outputs=partial, **options)
    mod.schedule = sch
    if explain:
        print(mod.explain() if hasattr(mod, "explain") else
              f"explain=True: the {target!r} target gives no explanation")
    if check:
        check_against_interpreter(with_preconditions(sch.original, sized[0]), mod)
    return mod


def parse_target(target: str | Target) -> tuple[str, Target]:
    """``(kind, C target)`` of a ``build`` target: ``("c", Target(...))`` for a C target (this
    machine's, or another's with ``-mtriple=``), ``("opencl", HOST)``, ``("cuda", HOST)``.

    >>> parse_target("c -mtriple=riscv64-linux-gnu")[1].triple
    'riscv64-linux-gnu'
    """
    if isinstance(target, Target):
        return "c", target
    if isinstance(target, str) and target.split()[:1] == ["c"]:
        return "c", Target.parse(target)
    if target not in TARGETS:
        raise PolyloopError(f"unknown target {target!r}; valid targets: {', '.join(TARGETS)}, "
                            "or 'c -mtriple=<triple>' for another machine")
    return str(target), HOST


def best_known(sch: Schedule, target: str, database: object) -> Schedule:
    """The best schedule a tuning database (a ``pl.tune`` work directory or its
    ``records.sqlite``, or an open ``Database``: callers building many kernels open it once)
    records for ``sch``'s program on ``target``, or ``sch`` with a warning."""
    if isinstance(database, Database):
        db = database
    elif isinstance(database, (str, os.PathLike)):
        db = Database(database)
    else:
        raise PolyloopError(f"build(database={database!r}): give the path of a tuning work "
                            "directory or of its records.sqlite")
    best = db.best(workload_key(sch.original, target))
    if best is None:
        warnings.warn(f"build: {db.path} has no successful record of program "
                      f"'{sch.original.name}' on target '{target}'; building the given schedule "
                      "(run pl.tune on it to fill the database)", RuntimeWarning, stacklevel=3)
        return sch
    return Schedule.from_trace(sch.original, best.trace)


def _check_dataflow(sch: Schedule, program: Program) -> frozenset[str]:
    """Refuse a temporary element read before any instance writes it (it would be whatever the
    memory held); warn for such reads of outputs. Returns the outputs some element of which
    the program may not write: allocated zeroed, never overwritten where not written."""
    schedule = sch.state.schedule_map()
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
