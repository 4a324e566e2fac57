# SPDX-License-Identifier: Apache-2.0
"""The C target: C99 with OpenMP pragmas, compiled by gcc ``-fopenmp -std=gnu11``.

The entry point of a kernel named ``vadd`` is ``int32_t vadd(void **args, const int64_t *params)``:
``args`` holds the data pointers of the C-contiguous argument arrays in ``kernel.args`` order,
``params`` the size parameters in ``kernel.params`` order. It returns 0, or 1 when a temporary
could not be allocated.
"""
from __future__ import annotations

import math
from dataclasses import replace

from .. import config
from ..errors import BuildError
from ..ir.assumption import Assumption
from ..ir.dtypes import INDEX, DType
from ..ir.expr import Const, UnaryKind
from ..ir.loop_notes import NoteKey
from ..ir.loops import Barrier, Call, For, Kernel, LoopKind, Node, Region
from ..ir.program import Buffer
from ..ir.simplify import simplify
from ..schedule.intrin_registry import lookup
from ..util.isa import ISA, host_isa
from .cfamily import CFamilyPrinter
from .function import InlineFunction
from .guarded_loads import NO_IF_CONVERSION, needs_no_if_conversion
from .helpers import HelperKind
from .index_checks import FAULT_WORDS, INDEX_FAULT_STATUS, IndexSite, fault_symbol
from .names import NameKind, is_c_identifier
from .parallel import MIN_PARALLEL_WORK, chunk, trip_count, work
from .profile import ProfileRegion, emit_profile_prelude, emit_timed
from .size_checks import emit_size_check_call, emit_size_checks
from .team import (TEAM_ARGUMENTS, TEAM_PARAMETERS, TEAM_SIGNATURE, TeamRole, emit_part_bounds,
                   shared_loop, team_parts, team_role, team_symbol)
from .vector import VectorLoopWriter
from .vector_lib import VectorLibrary
from .vector_plan import NotVectorized, plan_vector_loop, short_scalar_loop, simd_accumulation
from .vector_stream import StreamScopes
from .writer import CodeWriter

STACK_LIMIT_BYTES = 64 * 1024   # larger temporaries, or ones of symbolic shape, go on the heap
ALIGNMENT = 64
DEFAULT_UNROLL = 8
MAX_UNROLL = 65534              # gcc's limit for #pragma GCC unroll
INCLUDES = ("math.h", "stdbool.h", "stdint.h", "stdlib.h")
ENTRY_SIGNATURE = "int32_t {name}(void **args, const int64_t *params)"
REPEAT_SIGNATURE = "int32_t {name}(void **args, const int64_t *params, int64_t number)"


def repeat_symbol(entry: str) -> str:
    """The function that calls ``entry`` ``number`` times (``Module.benchmark``).

    >>> repeat_symbol("C_kernel")
    'pl_repeat_C_kernel'
    """
    return f"pl_repeat_{entry}"
C_LOOP_PRAGMAS = {LoopKind.PARALLEL: "#pragma omp parallel for schedule(static)",
                  LoopKind.VECTORIZED: "#pragma omp simd"}


class CPrinter(CFamilyPrinter):
    """C99 + OpenMP. Loop kinds become pragmas; THREAD loops and barriers are refused.

    A VECTORIZED loop becomes explicit vector code for ``isa`` (GCC vector extensions, see
    ``vector.py``) where its body allows, else a loop under ``#pragma omp simd`` with a comment
    that says why."""

    target = "c"

    def __init__(self, kernel: Kernel, isa: ISA | None = None,
                 profile: tuple[ProfileRegion, ...] = ()) -> None:
        super().__init__(kernel)
        self.vectors = VectorLibrary(isa if isa is not None else host_isa(config.CONFIG.cc))
        self.profiled = {id(r.node): r for r in profile}   # node -> its timer (profile.py)
        self.streams = StreamScopes(self.vectors)   # "nontemporal" annotations (vector_stream)
        self.team_loop: For | None = None   # split among a running team (team.py), if any

    def math_function(self, op: UnaryKind, d: DType) -> str:
        """libm's function, but ``exp``: polyloop's own (``helpers.HelperKind.EXP``), which gcc
        vectorizes in a loop around it, where a call of libm's ``expf`` stays one call per
        element."""
        if op is UnaryKind.EXP and d in (DType.FLOAT32, DType.FLOAT64):
            return self.use_helper(HelperKind.EXP, d)
        return super().math_function(op, d)

    def emit(self, w: CodeWriter, node: Node) -> None:
        region = self.profiled.get(id(node))
        if region is None:
            super().emit(w, node)
        else:
            emit_timed(w, region, lambda: super(CPrinter, self).emit(w, node))

    def emit_for(self, w: CodeWriter, loop: For) -> None:
        with self.streams.around(w, loop):
            self._emit_for(w, loop)

    def emit_loop_body(self, w: CodeWriter, loop: For, var: str) -> None:
        super().emit_loop_body(w, loop, var)
        self.streams.end_of_iteration(w, loop)

    def _emit_for(self, w: CodeWriter, loop: For) -> None:
        if loop is self.team_loop:
            self._emit_team_loop(w, loop)
            return
        if loop.kind is not LoopKind.VECTORIZED:
            super().emit_for(w, loop)
            return
        plan = plan_vector_loop(loop, self.buffers, self.vectors.isa,
                                has_local_temps=bool(self.local_temps.get(id(loop))))
        if isinstance(plan, NotVectorized):
            short = short_scalar_loop(loop)
            how = f"unrolled ({short} iterations)" if short else "#pragma omp simd"
            w.comment(f"loop {loop.var}: no explicit vector code ({plan.reason}); "
                      f"left to the C compiler, {how}")
            super().emit_for(w, loop)     # loop_pragmas: unrolled when short
            return
        for text in self.annotation_lines(loop):
            w.comment(text)
        var = self.names.ident(NameKind.ITERATOR, loop.var)
        self.bind_iterator(loop, var)
        try:
            VectorLoopWriter(self, self.vectors, loop, plan, self.streams).emit(w, var)
        finally:
            self.unbind_iterator(loop)

    def _emit_team_loop(self, w: CodeWriter, loop: For) -> None:
        """The parallel loop of a team variant: this thread's part of it (``team.py``)."""
        for text in self.annotation_lines(loop):
            w.comment(text)
        w.comment(f"loop {loop.var}: this thread's part of the iterations (the team's loop)")
        with w.block(""):
            emit_part_bounds(w, self.index_expr(loop.start),
                             self.index_expr(simplify(trip_count(loop))),
                             team_parts(loop, self.index_expr))
            var = self.names.ident(NameKind.ITERATOR, loop.var)
            step = "" if loop.step == 1 else f" * {self.step(loop)}"
            with w.block("for (int64_t pl_k = pl_lo; pl_k < pl_hi; pl_k++)"):
                w.statement(f"const {self.type_name(INDEX)} {var} = pl_first + pl_k{step}")
                self.emit_loop_body(w, loop, var)

    def loop_pragmas(self, loop: For) -> list[str]:
        if loop.kind is LoopKind.UNROLLED:
            return [f"#pragma GCC unroll {unroll_count(loop)}"]
        short = short_scalar_loop(loop) if loop.kind is LoopKind.VECTORIZED else None
        if short:       # a vectorized loop that is not explicit vector code (_emit_for)
            return [f"#pragma GCC unroll {short}"]
        if simd_accumulation(loop, self.buffers, self.vectors.isa):
            # gcc would unroll the short row completely and vectorize the pieces poorly; kept
            # a loop, its vectorizer makes it one vector kept in a register across the loops
            # around (gcc still proves the iterations independent itself)
            return ["// the row of a loop-local tile: left to the C compiler's vectorizer",
                    "#pragma GCC unroll 1"]
        if loop.kind is LoopKind.PARALLEL:
            return [self._parallel_pragma(loop)]
        return [C_LOOP_PRAGMAS[loop.kind]] if loop.kind in C_LOOP_PRAGMAS else []

    def _parallel_pragma(self, loop: For) -> str:
        """``omp parallel for`` with the loop's schedule and, unless its work is known to be
        large, the condition that keeps a small one on one thread (``parallel.py``)."""
        balanced = any(k == NoteKey.BALANCED for k, _ in loop.annotations)
        how = (f"schedule(dynamic, {self.index_expr(chunk(loop, config.CONFIG.threads))})"
               if balanced else "schedule(static)")
        amount = work(loop)
        if isinstance(amount, Const):
            when = "" if amount.value >= MIN_PARALLEL_WORK else " if(0)"
        else:
            when = f" if({self.index_expr(amount)} >= {MIN_PARALLEL_WORK})"
        return f"#pragma omp parallel for {how}{when}"

    def thread_index(self, loop: For) -> str:
        raise BuildError(f"loop '{loop.var}' of kernel '{self.kernel.name}' is bound to "
                         f"{str(loop.thread)!r}, which the C target cannot run; build with target "
                         "\"cuda\" or \"opencl\", or remove the binding")

    def barrier(self, node: Barrier) -> str:
        raise BuildError(f"kernel '{self.kernel.name}' has a {node.scope} barrier, which only "
                         "GPU targets have; build with target \"cuda\" or \"opencl\"")

    def declare_local_temp(self, w: CodeWriter, buffer: Buffer) -> None:
        if not on_stack(buffer):
            raise BuildError(f"temporary '{buffer.name}' has scope 'local' but shape "
                             f"{tuple(str(s) for s in buffer.shape)}: a private array needs a "
                             f"constant shape of at most {STACK_LIMIT_BYTES} bytes; split the "
                             "loop with a constant factor, or use scope 'global'")
        super().declare_local_temp(w, buffer)

    def emit_call(self, w: CodeWriter, node: Call) -> None:
        """``f(&C[i][j], &A[i][0], ..., strides, trip counts)``; the prelude defines ``f``.
        An intrinsic whose C needs instructions the target lacks (``TensorIntrin.requires``)
        is replaced by its portable fallback."""
        node = self.intrinsic_for_target(node)
        source = node.source
        if node.implementation is not None:  # generated by polyloop (codegen.function)
            source = self.intrinsics.get(node.function) or \
                InlineFunctionPrinter.text(node.implementation, self)
        known = self.intrinsics.setdefault(node.function, source)
        if known != source:
            raise BuildError(f"two tensor intrinsics named '{node.function}' with different "
                             "implementations in one kernel; give them different names")
        args = [f"&{self.element(a.buffer, a.indices)}" if isinstance(a, Region)
                else self.expr(a) for a in node.args]
        w.statement(f"{node.function}({', '.join(args)})")

    def intrinsic_for_target(self, node: Call) -> Call:
        """``node``, or the call of its intrinsic's fallback when the ISA lacks what the
        intrinsic's C requires; BuildError when it has no fallback."""
        if node.implementation is not None:     # generated by polyloop: portable C
            return node
        intrin = lookup(node.function)
        isa = self.vectors.isa
        missing = [m for m in intrin.requires if not isa.has(m)]
        if not missing:
            return node
        if intrin.fallback is None:
            raise BuildError(f"tensor intrinsic '{node.function}' of kernel "
                             f"'{self.kernel.name}' needs {', '.join(missing)}, which the "
                             f"target ({isa.name}) lacks, and has no portable fallback; give "
                             "the TensorIntrin a fallback=, or tensorize with an intrinsic "
                             "for this target")
        fallback = intrin.fallback
        return replace(node, function=fallback.name, source=fallback.source,
                       implementation=None)

    def emit_function(self, w: CodeWriter) -> None:
        """The body function, then the entry function that calls it.

        The body takes the sizes and the arrays as ``restrict`` parameters: gcc honours
        ``restrict`` on parameters, not on local pointers, and only then may it keep a value
        read from one array in a register across stores to another (a row of B hoisted out of
        the loop over the rows of C). The entry only unpacks ``args`` and ``params``."""
        k = self.kernel
        self._emit_body_function(w, f"pl_{k.name}_body", ())
        self._emit_entry(w, ENTRY_SIGNATURE.format(name=k.name), f"pl_{k.name}_body", ())
        # ``number`` calls in one: Module.benchmark times the kernel without a Python call per
        # run (as TVM's time_evaluator does)
        with w.block(self.kernel_prefix + REPEAT_SIGNATURE.format(name=repeat_symbol(k.name))):
            w.statement("int32_t status = 0")
            with w.block("for (int64_t pl_k = 0; pl_k < number && !status; pl_k++)"):
                w.statement(f"status = {k.name}(args, params)")
            w.statement("return status")

    def emit_team_function(self, w: CodeWriter) -> None:
        """The team variant of a SHARED kernel (``team.py``): its body function, with this
        thread's part of the parallel loop, and ``pl_team_NAME``, which calls it."""
        k = self.kernel
        self.team_loop = shared_loop(k)
        try:
            self._emit_body_function(w, f"pl_{k.name}_team_body", TEAM_PARAMETERS)
        finally:
            self.team_loop = None
        self._emit_entry(w, TEAM_SIGNATURE.format(name=team_symbol(k.name)),
                         f"pl_{k.name}_team_body", TEAM_ARGUMENTS)

    def _emit_body_function(self, w: CodeWriter, name: str, leading: tuple[str, ...]) -> None:
        k = self.kernel
        params = list(leading) + [f"const int64_t {self.param(p)}" for p in k.params]
        params += [self.pointer_parameter(b) for b in k.args]
        attributes = ", ".join(["noinline"] + ([NO_IF_CONVERSION] if needs_no_if_conversion(k)
                                               else []))
        with w.block(f"static __attribute__(({attributes})) int32_t {name}("
                     f"{', '.join(params) or 'void'})"):
            self.emit_body(w)
        w.blank()

    def _emit_entry(self, w: CodeWriter, signature: str, body: str,
                    leading: tuple[str, ...]) -> None:
        """A function that checks the sizes, unpacks ``args``/``params``, calls ``body``."""
        k = self.kernel
        with w.block(self.kernel_prefix + signature):
            emit_size_check_call(w, k.name, k.params)
            for i, p in enumerate(k.params):
                w.statement(f"const int64_t {self.param(p)} = params[{i}]")
            for i, b in enumerate(k.args):
                w.statement(self.pointer_declaration(b, f"args[{i}]"))
            names = list(leading) + [self.param(p) for p in k.params]
            names += [self.buffer_name(b.name) for b in k.args]
            w.statement(f"return {body}({', '.join(names)})")
        w.blank()

    def pointer_parameter(self, buffer: Buffer) -> str:
        """``float (*restrict A)[n]``: the declaration of ``pointer_declaration`` as a
        parameter (the sizes it names come before it in the parameter list)."""
        return self.pointer_declaration(buffer, "").split(" = ")[0]

    def emit_body(self, w: CodeWriter) -> None:
        """Temporaries, the loops, frees, the fault report and ``return 0``."""
        k = self.kernel
        heap = [b for b in self.function_temps if not on_stack(b)]
        for b in self.function_temps:
            if on_stack(b):
                w.statement(self.array_declaration(b, align=ALIGNMENT))
            else:
                w.statement(self.pointer_declaration(b, self.allocation(b)))
        if heap:
            self.emit_allocation_check(w, heap)
        body = CodeWriter()     # printed first: it tells whether indices are checked
        self.emit(body, k.body)
        if self.checks_indices:
            w.statement(f"int64_t {self.fault_words}[{FAULT_WORDS}] = {{0}}")
        w.blank()
        w.lines(body.text().splitlines())
        w.blank()
        for b in heap:
            w.statement(f"free({self.buffer_name(b.name)})")
        if self.checks_indices:
            self.emit_fault_report(w)
        w.statement("return 0")

    def emit_fault_report(self, w: CodeWriter) -> None:
        """Copy the call's first out-of-range index where the runtime reads it."""
        with w.block(f"if ({self.fault_words}[0])"):
            with w.block(f"for (int k = 0; k < {FAULT_WORDS}; k++)"):
                w.statement(f"{fault_symbol(self.kernel.name)}[k] = {self.fault_words}[k]")
            w.statement(f"return {INDEX_FAULT_STATUS}")

    def allocation(self, buffer: Buffer) -> str:
        """``aligned_alloc`` of the buffer, its byte count computed with overflow checks."""
        dims = ", ".join(self.expr(d) for d in buffer.shape)
        size = self.use_helper(HelperKind.ALLOC_BYTES, None)
        return (f"aligned_alloc({ALIGNMENT}, {size}(sizeof({self.type_name(buffer.dtype)}), "
                f"{len(buffer.shape)}, (const int64_t[]){{{dims}}}))")

    def emit_allocation_check(self, w: CodeWriter, heap: list[Buffer]) -> None:
        names = [self.buffer_name(b.name) for b in heap]
        with w.block("if (" + " || ".join(f"{n} == NULL" for n in names) + ")"):
            for n in names:
                w.statement(f"free({n})")
            w.statement("return 1")



class InlineFunctionPrinter(InlineFunction, CPrinter):
    """A polyloop-generated tensor intrinsic: its signature and strided operands from
    ``codegen.function``, its loops and vector code from ``CPrinter``."""

def on_stack(buffer: Buffer) -> bool:
    """A temporary of constant shape and at most STACK_LIMIT_BYTES lives on the stack."""
    if not all(isinstance(s, Const) for s in buffer.shape):
        return False
    count = math.prod(int(s.value) for s in buffer.shape)  # type: ignore[attr-defined]
    return count * buffer.dtype.itemsize <= STACK_LIMIT_BYTES


def unroll_count(loop: For) -> int:
    """The factor of an UNROLLED loop: its unroll_factor, else its constant trip count, else 8."""
    if loop.unroll_factor is not None:
        return max(1, min(loop.unroll_factor, MAX_UNROLL))
    if isinstance(loop.start, Const) and isinstance(loop.stop, Const):
        trips = -(-(int(loop.stop.value) - int(loop.start.value)) // loop.step)
        return max(1, min(trips, MAX_UNROLL))
    return DEFAULT_UNROLL


def _check_name(kernel: Kernel) -> None:
    if not is_c_identifier(kernel.name) or kernel.name.startswith("pl_"):
        raise BuildError(f"kernel name {kernel.name!r} is not usable as a C function name; "
                         "use letters, digits and underscores, not starting with a digit or pl_")


def _emit_notes(w: CodeWriter, kernel: Kernel) -> None:
    w.comment(f"Kernel '{kernel.name}', generated by polyloop for the C target.")
    for note in kernel.notes:
        w.comment(note)
    w.line()


def generate_c(kernel: Kernel, *, isa: ISA | None = None,
               profile: tuple[ProfileRegion, ...] = ()) -> str:
    """The C translation unit of a kernel: notes, includes, helpers, the body function (the
    arrays as ``restrict`` parameters) and the entry function that calls it.

    Vectorized loops use the vector unit of ``isa`` (default: the host's, as ``CONFIG.cc
    -march=native`` sees it). ``profile``: regions of ``kernel.body`` to time (``profile.py``);
    none, the default, emits no profiling code at all.

    >>> from polyloop.ir.dtypes import DType
    >>> from polyloop.ir.expr import Var, VarKind
    >>> from polyloop.ir.loops import For, Store
    >>> from polyloop.ir.program import Buffer, BufferRole
    >>> n, i = Var("n", VarKind.PARAM), Var("i")
    >>> A = Buffer("A", (n,), DType.FLOAT32, BufferRole.INPUT)
    >>> B = Buffer("B", (n,), DType.FLOAT32, BufferRole.OUTPUT)
    >>> body = For("i", Const(0, DType.INT64), n, Store("B", (i,), A[i] * 2.0))
    >>> src = generate_c(Kernel("double_it", (A, B), ("n",), (), body))
    >>> "int32_t pl_double_it_body(const int64_t n, const float *restrict A," in src
    True
    >>> print(src[src.index("    for (int64_t i"):], end="")
        for (int64_t i = 0; i < n; i++) {
            B[i] = A[i] * 2.0f;
        }
    <BLANKLINE>
        return 0;
    }
    <BLANKLINE>
    int32_t double_it(void **args, const int64_t *params) {
        if (double_it_check_sizes(params)) return 3;
        const int64_t n = params[0];
        const float *restrict A = (const float *)args[0];
        float *restrict B = (float *)args[1];
        return pl_double_it_body(n, A, B);
    }
    <BLANKLINE>
    int32_t pl_repeat_double_it(void **args, const int64_t *params, int64_t number) {
        int32_t status = 0;
        for (int64_t pl_k = 0; pl_k < number && !status; pl_k++) {
            status = double_it(args, params);
        }
        return status;
    }
    """
    return generate_c_unit(kernel, isa=isa, profile=profile)[0]


def generate_c_unit(kernel: Kernel, *, isa: ISA | None = None,
                    profile: tuple[ProfileRegion, ...] = (),
                    assumptions: tuple[Assumption, ...] = (), team: bool = False
                    ) -> tuple[str, tuple[IndexSite, ...]]:
    """``generate_c``'s text and the accesses it checks at run time, by site number
    (``index_checks``): what an out-of-range fault of the compiled kernel refers to.
    ``assumptions``: the conditions on the sizes the entry checks besides their being
    non-negative (``size_checks``). ``team``: add the team variant (``team.py``) when the
    kernel's role is SHARED."""
    _check_name(kernel)
    printer = CPrinter(kernel, isa, tuple(profile))
    function = CodeWriter()
    printer.emit_function(function)  # first: it records the helpers the prelude must define
    if team and team_role(kernel, checks_indices=printer.checks_indices) is TeamRole.SHARED:
        printer.emit_team_function(function)
    w = CodeWriter()
    _emit_notes(w, kernel)
    headers = INCLUDES + (("immintrin.h",) if printer.vectors.needs_immintrin else ())
    for header in headers:
        w.line(f"#include <{header}>")
    for fn in printer.externs.values():
        if fn.header:
            w.line(fn.include_line())
    w.line()
    printer.vectors.emit_prelude(w)
    printer.emit_prelude(w)
    if printer.checks_indices:
        w.comment("the first out-of-range index of the latest faulting call (index_checks)")
        w.statement(f"int64_t {fault_symbol(kernel.name)}[{FAULT_WORDS}]")
        w.line()
    if profile:
        emit_profile_prelude(w, list(profile))
    emit_size_checks(w, kernel.name, kernel.params, assumptions)
    w.lines(function.text().splitlines())
    return w.text(), tuple(printer.index_sites)


def generate_c_header(kernel: Kernel) -> str:
    """A C header declaring the entry function, documenting its arguments and parameters.

    >>> from polyloop.ir.loops import Block
    >>> header = generate_c_header(Kernel("nop", (), (), (), Block(())))
    >>> [line for line in header.splitlines() if line.startswith("int32_t")]
    ['int32_t nop(void **args, const int64_t *params);']
    """
    _check_name(kernel)
    printer = CPrinter(kernel)
    guard = f"POLYLOOP_{kernel.name.upper()}_H"
    w = CodeWriter()
    w.comment(f"Kernel '{kernel.name}', generated by polyloop.")
    w.comment("args: data pointers of C-contiguous arrays, in this order:")
    for i, b in enumerate(kernel.args):
        shape = ", ".join(printer.expr(s) for s in b.shape)
        w.comment(f"  args[{i}]  {b.name}: {b.dtype}[{shape}] ({b.role.value})")
    w.comment("params: the size parameters, in this order:")
    for i, p in enumerate(kernel.params):
        w.comment(f"  params[{i}]  {p}")
    w.comment("Returns 0, or 1 if a temporary could not be allocated.")
    w.comment("Arrays must not overlap: they are accessed through restrict pointers.")
    w.line(f"#ifndef {guard}")
    w.line(f"#define {guard}")
    w.line("#include <stdint.h>")
    w.line("#ifdef __cplusplus")
    w.line('extern "C" {')
    w.line("#endif")
    w.statement(ENTRY_SIGNATURE.format(name=kernel.name))
    w.line("#ifdef __cplusplus")
    w.line("}")
    w.line("#endif")
    w.line(f"#endif  // {guard}")
    return w.text()
