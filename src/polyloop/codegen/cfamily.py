# SPDX-License-Identifier: Apache-2.0
"""The C-family printer: expressions and the loop AST in C syntax, driven by tables.

A target is a subclass that swaps a table (type names, math functions) or overrides a hook
(``kernel_prefix``, ``address_space``, ``thread_index``, ``barrier``, ``loop_pragmas``,
``declare_local_temp``); the walk over the loop AST is shared by all of them.
"""
from __future__ import annotations

from typing import Mapping

from ..errors import BuildError
from ..ir.dtypes import INDEX, DType
from ..ir.expr import (BinOp, BinOpKind, Const, Expr, Load, ReduceKind, UnaryKind, Var, VarKind,
                       binop, same)
from ..ir.extern import ExternFunction
from ..ir.loops import Barrier, Block, Call, For, If, Kernel, LoopKind, Node, Prefetch, Store
from ..ir.program import Buffer, BufferRole
from ..ir.simplify import simplify
from .half import emit_conversions, from_float_name, to_float_name
from .helpers import Helper, HelperKind, emit_helper, helper
from .index_checks import C_CHECK_HELPER, IndexSite, needs_check, refuse_large_check
from .names import NameKind, Names
from .tables import (ADDITIVE, C_BINARY_FUNCTIONS, C_INT_LIMITS, C_KEYWORDS, C_LIBM_SUFFIX,
                     C_MATH_FUNCTIONS, C_OPERATORS, C_TYPES, C_UNSIGNED_TYPES,
                     REDUCTION_HELPERS)
from .temps import temp_homes
from .cexpr import CExpressions
from .flatten import flat_offset
from .writer import CodeWriter

# a reduction update of a stored-only 16-bit float, as the operation it repeats
HALF_REDUCTIONS = {ReduceKind.SUM: BinOpKind.ADD, ReduceKind.PROD: BinOpKind.MUL,
                   ReduceKind.MAX: BinOpKind.MAX, ReduceKind.MIN: BinOpKind.MIN}

CACHE_LINE = 64    # bytes: one software prefetch per line


class CFamilyPrinter(CExpressions):
    """Prints one kernel's expressions and loop AST in a C-family language.

    Subclasses change the tables below and the hook methods; they do not re-walk the AST.

    >>> from polyloop.ir.expr import Var, VarKind
    >>> p = CFamilyPrinter(Kernel("k", (), ("n",), (), Block(())))
    >>> n = Var("n", VarKind.PARAM)
    >>> p.expr((n + 1) * 2 // 3)
    'pl_floordiv_i64((n + 1) * 2, 3)'
    """

    target = "c-family"
    types: Mapping[DType, str] = C_TYPES
    unsigned_types: Mapping[DType, str] = C_UNSIGNED_TYPES
    operators: Mapping[BinOpKind, tuple[str, int]] = C_OPERATORS
    math_functions: Mapping[tuple[UnaryKind, DType], str] = C_MATH_FUNCTIONS
    binary_functions: Mapping[tuple[BinOpKind, DType], str] = C_BINARY_FUNCTIONS
    libm_suffix: Mapping[DType, str] = C_LIBM_SUFFIX
    # (lowest, highest, the name of the lowest): the lowest has no literal of its own
    int_limits: Mapping[DType, tuple[int, int, str]] = C_INT_LIMITS
    restrict = "restrict"
    helper_qualifier = "static inline"
    # 16-bit float dtypes stored but computed in float32 (``half.py``): C has _Float16, but
    # gcc 12 knows no __bf16 type on x86-64 (gcc 13 adds it), so bfloat16 is uint16_t bits
    stored_halves: frozenset[DType] = frozenset({DType.BFLOAT16})
    kernel_prefix = ""
    index_check_helper = C_CHECK_HELPER    # index_checks: the check of one dimension
    fault_words = "pl_fault"               # where the first out-of-range index is recorded
    # names the generated code calls or declares: a user's buffer, loop or size named like one
    # of them is renamed instead of shadowing it
    reserved: frozenset[str] = (C_KEYWORDS | frozenset(C_MATH_FUNCTIONS.values())
                                | frozenset(C_BINARY_FUNCTIONS.values())
                                | {"args", "params", "aligned_alloc", "free", "malloc", "size_t",
                                   "pl_fault", "pl_index_ok"})

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.buffers = {b.name: b for b in (*kernel.args, *kernel.temps)}
        self.names = Names(self.reserved)
        self.bound: dict[str, list[str]] = {}   # iterator name -> C names of enclosing loops
        self.nonneg: dict[str, list[bool]] = {}  # iterator name -> is it proven >= 0, likewise
        self.index_depth = 0     # > 0 while printing index arithmetic (see ``index_expr``)
        self.helpers: set[Helper] = set()
        self.conversions: set[str] = set()      # 16-bit float conversion helpers used (half.py)
        self.intrinsics: dict[str, str] = {}    # function name -> C source (tensorize)
        self.externs: dict[str, ExternFunction] = {}   # pl.extern functions called
        self.local_temps, self.function_temps = temp_homes(kernel)
        self.index_sites: list[IndexSite] = []  # accesses checked at run time (index_checks)
        self.index_site_numbers: dict[tuple, int] = {}
        self._statement = ""                    # the statement of the store being printed
        self.checks_indices = False             # this printer emitted a check

    # hooks -------------------------------------------------------------------------------------
    def type_name(self, d: DType) -> str:
        try:
            return self.types[d]
        except KeyError:
            raise BuildError(f"dtype {d} has no type on target '{self.target}'; store the data "
                             "as float32 (or a supported integer type) for this target") from None

    def to_float(self, d: DType) -> str:
        """The function that widens a stored-only 16-bit float to float32."""
        self.conversions.add(to_float_name(d))
        return to_float_name(d)

    def from_float(self, d: DType) -> str:
        """The function that rounds a float32 to a stored-only 16-bit float (nearest even)."""
        self.conversions.add(from_float_name(d))
        return from_float_name(d)

    def math_function(self, op: UnaryKind, d: DType) -> str:
        try:
            return self.math_functions[(op, d)]
        except KeyError:
            raise BuildError(f"'{op.value}' has no {d} form on target '{self.target}'; cast the "
                             "operand with .astype() to a float dtype") from None

    def address_space(self, buffer: Buffer) -> str:
        """Qualifier before a buffer's element type (``__global `` in OpenCL); none in C."""
        return ""

    def loop_pragmas(self, loop: For) -> list[str]:
        """Lines printed just before a ``for`` loop (OpenMP pragmas, ``#pragma unroll``)."""
        return []

    def annotation_lines(self, loop: For) -> list[str]:
        """Loop annotations no hook understands are kept as comments above the loop."""
        return [f"{key}: {value}" for key, value in loop.annotations]

    def thread_index(self, loop: For) -> str:
        """The index expression of a THREAD loop (``blockIdx.x``, ``get_group_id(0)``)."""
        raise BuildError(f"loop '{loop.var}' is bound to {str(loop.thread)!r}, which target "
                         f"'{self.target}' cannot run")

    def barrier(self, node: Barrier) -> str:
        """The statement of a work-group barrier (``__syncthreads()``)."""
        raise BuildError(f"target '{self.target}' has no barriers (kernel '{self.kernel.name}')")

    def declare_local_temp(self, w: CodeWriter, buffer: Buffer) -> None:
        """Declare a LOCAL-scope temporary at the top of the loop body that owns it."""
        w.statement(self.array_declaration(buffer))

    def emit_call(self, w: CodeWriter, node: Call) -> None:
        """A call of a tensor intrinsic (``tensorize``); only targets that compile C have one."""
        raise BuildError(f"kernel '{self.kernel.name}' calls tensor intrinsic '{node.function}' "
                         f"(tensorize), whose implementation is C: target '{self.target}' "
                         "cannot run it; build with target \"c\" or remove the tensorize step")

    def emit_prefetch(self, w: CodeWriter, node: Prefetch) -> None:
        """A software prefetch (``Schedule.prefetch``): GCC's ``__builtin_prefetch`` at the
        first element and every ``CACHE_LINE`` bytes after it, plus the last element, so that
        every line the ``count`` elements touch is requested whatever their alignment."""
        flags = f"{int(node.write)}, {node.locality}"
        if not node.indices:
            w.statement(f"__builtin_prefetch(&{self.element(node.buffer, ())}, {flags})")
            return
        step = max(1, CACHE_LINE // self.buffers[node.buffer].dtype.itemsize)

        def at(offset: Expr) -> str:
            last = simplify(binop(BinOpKind.ADD, node.indices[-1], offset))
            return f"__builtin_prefetch(&{self.element(node.buffer, node.indices[:-1] + (last,))}" \
                   f", {flags})"
        count = node.count
        if isinstance(count, Const):
            offsets = list(range(0, int(count.value), step))
            if (int(count.value) - 1) % step:
                offsets.append(int(count.value) - 1)
            for k in offsets:
                w.statement(at(Const(k, INDEX, weak=True)))
            return
        var = self.names.ident(NameKind.ITERATOR, "prefetch_at")
        self.bound.setdefault("prefetch_at", []).append(var)
        try:
            below = self.expr(binop(BinOpKind.LT, Var("prefetch_at"), count))
            with w.block(f"for ({self.type_name(INDEX)} {var} = 0; {below}; {var} += {step})"):
                w.statement(at(Var("prefetch_at")))
        finally:
            self.bound["prefetch_at"].pop()
        w.statement(at(simplify(binop(BinOpKind.SUB, count, 1))))

    def variable(self, v: Var) -> str:
        """An iterator of an enclosing loop, else a size parameter of the kernel."""
        if v.kind is VarKind.ITER and self.bound.get(v.name):
            return self.bound[v.name][-1]
        if v.name in self.kernel.params:
            return self.names.ident(NameKind.PARAM, v.name)
        params = ", ".join(self.kernel.params) or "none"
        if v.kind is VarKind.ITER:
            raise BuildError(f"kernel '{self.kernel.name}' uses loop variable '{v.name}' outside "
                             f"of its loop (size parameters: {params})")
        raise BuildError(f"kernel '{self.kernel.name}' uses size parameter '{v.name}', which is "
                         f"not in its params ({params}); add it to Kernel.params")

    def param(self, name: str) -> str:
        """The C name of a size parameter."""
        return self.names.ident(NameKind.PARAM, name)

    def buffer_name(self, name: str) -> str:
        return self.names.ident(NameKind.BUFFER, name)

    def element(self, buffer: str, indices: tuple[Expr, ...]) -> str:
        """``A[i][j]``; a 0-d buffer is a one-element array, ``A[0]``."""
        b = self.buffers.get(buffer)
        if b is None:
            raise BuildError(f"kernel '{self.kernel.name}' accesses buffer '{buffer}', which is "
                             "neither an argument nor a temporary of the kernel")
        if len(indices) != b.ndim:
            raise BuildError(f"buffer '{buffer}' has {b.ndim} dimensions, accessed with "
                             f"{len(indices)} indices in kernel '{self.kernel.name}'")
        flat = flat_offset(indices, b.shape)
        if flat is not None:    # a fused loop's quotient and remainder: no division
            k, offset = flat
            head = "".join(f"[{self.index_expr(i)}]" for i in indices[:k]) + "[0]" * (b.ndim - k)
            return f"(&{self.buffer_name(buffer)}{head})[{self.index_expr(offset)}]"
        subscripts = "".join(f"[{self.index_expr(i)}]" for i in indices) or "[0]"
        return self.buffer_name(buffer) + subscripts

    def index_condition(self, buffer: str, indices: tuple[Expr, ...], access: str, *,
                        is_write: bool) -> str:
        """``pl_index_ok(...) && ...``: every dimension of an access checked (index_checks)."""
        b = self.buffers.get(buffer)
        if b is None or len(indices) != b.ndim:
            self.element(buffer, indices)   # raises the error that explains it
            raise AssertionError(buffer)
        key = (self._statement, buffer, access, is_write)
        refuse_large_check(IndexSite(*key), indices)
        site = self.index_site_numbers.get(key)
        if site is None:
            site = self.index_site_numbers[key] = len(self.index_sites)
            self.index_sites.append(IndexSite(*key))
        index = self.type_name(INDEX)
        self.checks_indices = True
        return " && ".join(
            f"pl_index_ok({self.fault_words}, {site}, {d}, ({index})({self.expr(i)}), "
            f"{self.expr(extent)})" for d, (i, extent) in enumerate(zip(indices, b.shape)))

    def use_helper(self, kind: HelperKind, d: DType | None) -> str:
        """Name of a helper function, recorded so that the prelude defines it."""
        h = helper(kind, d)
        self.helpers.add(h)
        return h.name

    def emit_prelude(self, w: CodeWriter) -> None:
        """Definitions of the helpers used so far, in a fixed order."""
        for h in sorted(self.helpers, key=lambda h: h.sort_key):
            emit_helper(w, h, qualifier=self.helper_qualifier, types=self.types,
                        unsigned_types=self.unsigned_types, libm_suffix=self.libm_suffix)
            w.line()
        emit_conversions(w, self.conversions, target=self.target, qualifier=self.helper_qualifier,
                         storage=self.types.get(DType.BFLOAT16, "uint16_t"))
        for fn in self.externs.values():        # the user's C definitions, as written
            if fn.source:
                w.lines(fn.source.strip("\n").splitlines())
                w.line()
        if self.index_sites:
            w.lines(self.index_check_helper.splitlines())
            w.line()
        for source in self.intrinsics.values():  # each tensor intrinsic once per module
            w.lines(source.strip("\n").splitlines())
            w.line()

    # declarations ------------------------------------------------------------------------------
    def pointer_declaration(self, buffer: Buffer, source: str) -> str:
        """``float (*restrict A)[n] = (float (*)[n])source``: a buffer as a C99 array pointer."""
        const = "const " if buffer.role is BufferRole.INPUT else ""
        element = f"{self.address_space(buffer)}{const}{self.type_name(buffer.dtype)}"
        name = self.buffer_name(buffer.name)
        if buffer.ndim <= 1:
            return f"{element} *{self.restrict} {name} = ({element} *){source}"
        dims = "".join(f"[{self.expr(s)}]" for s in buffer.shape[1:])
        return f"{element} (*{self.restrict} {name}){dims} = ({element} (*){dims}){source}"

    def array_declaration(self, buffer: Buffer, *, align: int = 64) -> str:
        """``_Alignas(64) float T[16][16]`` for a temporary of constant shape."""
        dims = "".join(f"[{self.expr(s)}]" for s in buffer.shape) or "[1]"
        return (f"_Alignas({align}) {self.address_space(buffer)}{self.type_name(buffer.dtype)} "
                f"{self.buffer_name(buffer.name)}{dims}")

    # statements --------------------------------------------------------------------------------
    def emit(self, w: CodeWriter, node: Node) -> None:
        """Print a loop-AST node and everything below it."""
        if isinstance(node, Block):
            for child in node.body:
                self.emit(w, child)
        elif isinstance(node, For):
            self.emit_for(w, node)
        elif isinstance(node, If):
            self.emit_if(w, node)
        elif isinstance(node, Store):
            self.emit_store(w, node)
        elif isinstance(node, Barrier):
            w.statement(self.barrier(node))
        elif isinstance(node, Call):
            self.emit_call(w, node)
        elif isinstance(node, Prefetch):
            self.emit_prefetch(w, node)
        else:
            raise BuildError(f"cannot print loop-AST node {type(node).__name__}")

    def emit_for(self, w: CodeWriter, loop: For) -> None:
        for text in self.annotation_lines(loop):
            w.comment(text)
        if loop.kind is LoopKind.THREAD:
            self.emit_thread_loop(w, loop)
            return
        if loop.kind in (LoopKind.SERIAL, LoopKind.UNROLLED) and _one_iteration(loop):
            # a value bound for the body (a fused loop's recovered iterator): no loop
            var = self.names.ident(NameKind.ITERATOR, loop.var)
            with w.block(""):
                w.statement(f"const {self.type_name(INDEX)} {var} = {self.index_expr(loop.start)}")
                self.emit_loop_body(w, loop, var)
            return
        w.lines(self.loop_pragmas(loop))
        start, stop = self.index_expr(loop.start), self.index_expr(loop.stop)
        var = self.names.ident(NameKind.ITERATOR, loop.var)
        step = f"{var}++" if loop.step == 1 else f"{var} += {self.step(loop)}"
        with w.block(f"for ({self.type_name(INDEX)} {var} = {start}; {var} < {stop}; {step})"):
            self.emit_loop_body(w, loop, var)

    def step(self, loop: For) -> str:
        """The step of ``loop`` as a literal of the index type; BuildError if it has none."""
        _, hi, _ = self.int_limits[INDEX]
        if not 0 < loop.step <= hi:
            raise BuildError(f"loop '{loop.var}' of kernel '{self.kernel.name}' steps by "
                             f"{loop.step}, which the generated code cannot represent (indices "
                             f"are int64, at most {hi}); use a smaller step or modulus")
        return str(loop.step) if loop.step < 2**31 else self._wide_int64(loop.step)

    def emit_thread_loop(self, w: CodeWriter, loop: For) -> None:
        """One GPU thread runs one iteration: ``i = start + index * step`` if ``i < stop``."""
        index = self.thread_index(loop)
        if loop.step != 1:
            index = f"({index}) * {self.step(loop)}"
        starts_at_zero = isinstance(loop.start, Const) and loop.start.value == 0
        value = index if starts_at_zero else f"{self._operand(loop.start, ADDITIVE)} + {index}"
        stop = self.expr(loop.stop)
        var = self.names.ident(NameKind.ITERATOR, loop.var)
        with w.block(""):
            w.statement(f"const {self.type_name(INDEX)} {var} = {value}")
            with w.block(f"if ({var} < {stop})"):
                self.emit_loop_body(w, loop, var)

    def emit_loop_body(self, w: CodeWriter, loop: For, var: str) -> None:
        """The body of a loop whose iterator is spelled ``var``, with its private temporaries."""
        self.bind_iterator(loop, var)
        try:
            for buffer in self.local_temps.get(id(loop), ()):
                self.declare_local_temp(w, buffer)
            self.emit(w, loop.body)
        finally:
            self.unbind_iterator(loop)

    def emit_if(self, w: CodeWriter, node: If, *, chained: bool = False) -> None:
        header = ("else " if chained else "") + f"if ({self.index_expr(node.cond)})"
        with w.block(header, chained=chained):
            self.emit(w, node.then)
        if isinstance(node.otherwise, If):
            self.emit_if(w, node.otherwise, chained=True)
        elif node.otherwise is not None:
            with w.block("else", chained=True):
                self.emit(w, node.otherwise)

    def emit_store(self, w: CodeWriter, node: Store) -> None:
        self._statement = node.statement
        if needs_check(node.indices):
            access = str(Load(node.buffer, node.indices, node.value.dtype))
            cond = self.index_condition(node.buffer, node.indices, access, is_write=True)
            with w.block(f"if ({cond})"):
                self._emit_store(w, node)
        else:
            self._emit_store(w, node)
        self._statement = ""

    def _emit_store(self, w: CodeWriter, node: Store) -> None:
        target = self.element(node.buffer, node.indices)
        d = node.value.dtype
        if node.reduction is not None and d in self.stored_halves:
            # ``+=`` on the bits would be wrong: read, combine in float32, round, store
            current = Load(node.buffer, node.indices, d)
            combined = BinOp(HALF_REDUCTIONS[node.reduction], current, node.value, d)
            w.statement(f"{target} = {self.expr(combined)}")
            return
        value = self.expr(node.value)
        if node.reduction is None:
            w.statement(f"{target} = {value}")
        elif node.reduction is ReduceKind.SUM:
            w.statement(f"{target} += {value}")
        elif node.reduction is ReduceKind.PROD:
            w.statement(f"{target} *= {value}")
        else:
            fn = self.use_helper(REDUCTION_HELPERS[node.reduction], self.buffers[node.buffer].dtype)
            w.statement(f"{target} = {fn}({target}, {value})")


def _one_iteration(loop: For) -> bool:
    """Does ``loop`` run exactly once (``range(e, e + 1)``), whatever the sizes?"""
    return loop.step == 1 and same(simplify(binop(BinOpKind.SUB, loop.stop, loop.start)),
                                   Const(1, INDEX, True))
