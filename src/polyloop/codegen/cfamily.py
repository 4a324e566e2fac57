# SPDX-License-Identifier: Apache-2.0
"""The C-family printer: expressions and the loop AST in C syntax, driven by tables.

A target is a subclass that swaps a table (type names, math functions) or overrides a hook
(``kernel_prefix``, ``address_space``, ``thread_index``, ``barrier``, ``loop_pragmas``,
``declare_local_temp``); the walk over the loop AST is shared by all of them.
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from ..errors import BuildError
from ..ir.dtypes import INDEX, DType
from ..ir.expr import (BinOp, BinOpKind, Cast, Const, Expr, Load, Reduce, ReduceKind, Select,
                       Unary, UnaryKind, Var, VarKind, binop)
from ..ir.extern import Extern, ExternFunction
from ..ir.loops import Barrier, Block, Call, For, If, Kernel, LoopKind, Node, Prefetch, Store
from ..ir.program import Buffer, BufferRole
from ..ir.simplify import simplify
from .helpers import Helper, HelperKind, emit_helper, helper
from .index_checks import C_CHECK_HELPER, IndexSite, needs_check
from .names import NameKind, Names
from .tables import (ADDITIVE, C_BINARY_FUNCTIONS, C_INT_LIMITS, C_KEYWORDS, C_LIBM_SUFFIX,
                     C_MATH_FUNCTIONS, C_OPERATORS, C_TYPES, C_UNSIGNED_TYPES, CONDITIONAL,
                     HELPER_OPERATORS, MULTIPLICATIVE, POSTFIX, REDUCTION_HELPERS, UNARY)
from .temps import temp_homes
from .flatten import flat_offset
from .writer import CodeWriter

CACHE_LINE = 64    # bytes: one software prefetch per line


class CFamilyPrinter:
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

    # expressions -------------------------------------------------------------------------------
    def expr(self, e: Expr) -> str:
        """``e`` in C syntax with minimal parentheses."""
        return self._expr(e)[0]

    def index_expr(self, e: Expr, min_prec: int = 0) -> str:
        """``e`` as index arithmetic (an index, a loop bound, a condition on indices): a floor
        division or remainder of a proven non-negative value is plain C division there. A
        value the program computes keeps NumPy's helpers, whatever its operands."""
        self.index_depth += 1
        try:
            return self._operand(e, min_prec)
        finally:
            self.index_depth -= 1

    def _expr(self, e: Expr) -> tuple[str, int]:
        if isinstance(e, Const):
            return self.literal(e)
        if isinstance(e, Var):
            return self.variable(e), POSTFIX
        if isinstance(e, Load):
            if needs_check(e.indices):
                cond = self.index_condition(e.buffer, e.indices, str(e), is_write=False)
                zero = f"({self.type_name(e.dtype)})0"
                return f"{cond} ? {self.element(e.buffer, e.indices)} : {zero}", CONDITIONAL
            return self.element(e.buffer, e.indices), POSTFIX
        if isinstance(e, BinOp):
            return self._binary(e)
        if isinstance(e, Unary):
            return self._unary(e)
        if isinstance(e, Cast):
            return f"({self.type_name(e.dtype)}){self._operand(e.value, UNARY)}", UNARY
        if isinstance(e, Extern):
            return self._extern(e), POSTFIX
        if isinstance(e, Select):
            parts = [self._operand(x, CONDITIONAL + 1)
                     for x in (e.cond, e.true_value, e.false_value)]
            return f"{parts[0]} ? {parts[1]} : {parts[2]}", CONDITIONAL
        if isinstance(e, Reduce):
            raise BuildError(f"reduction {e} reached code generation; lowering turns "
                             "reductions into an init and an update statement")
        raise BuildError(f"cannot print expression node {type(e).__name__}")

    def _extern(self, e: Extern) -> str:
        fn = e.function
        if self.target != "c":
            raise BuildError(f"extern '{fn.name}' is C code; target '{self.target}' cannot call "
                             "it (build for target='c')")
        known = self.externs.setdefault(fn.name, fn)
        if known != fn:
            raise BuildError(f"two different extern functions are named '{fn.name}'; declare "
                             "it once with pl.extern and reuse the result")
        return f"{fn.name}({', '.join(self.expr(a) for a in e.args)})"

    def _operand(self, e: Expr, min_prec: int, *, unclear: bool = False) -> str:
        text, prec = self._expr(e)
        return f"({text})" if prec < min_prec or unclear else text

    def _binary(self, e: BinOp) -> tuple[str, int]:
        if e.op in (BinOpKind.FLOORDIV, BinOpKind.MOD) and self._plain_division(e):
            # floor and C's truncation agree for a non-negative dividend and positive divisor
            lhs = self._operand(e.lhs, MULTIPLICATIVE)
            return f"{lhs} {'/' if e.op is BinOpKind.FLOORDIV else '%'} " \
                   f"{self._operand(e.rhs, MULTIPLICATIVE + 1)}", MULTIPLICATIVE
        if e.op in HELPER_OPERATORS:
            name = self.use_helper(HELPER_OPERATORS[e.op], e.lhs.dtype)
            return f"{name}({self.expr(e.lhs)}, {self.expr(e.rhs)})", POSTFIX
        if (e.op, e.lhs.dtype) in self.binary_functions:
            name = self.binary_functions[(e.op, e.lhs.dtype)]
            return f"{name}({self.expr(e.lhs)}, {self.expr(e.rhs)})", POSTFIX
        if e.lhs.dtype is DType.FLOAT16 and (e.op, DType.FLOAT32) in self.binary_functions:
            name = self.binary_functions[(e.op, DType.FLOAT32)]
            return (f"({self.type_name(DType.FLOAT16)}){name}((float){self._operand(e.lhs, UNARY)}"
                    f", (float){self._operand(e.rhs, UNARY)})"), UNARY
        if e.op is BinOpKind.DIV and not e.lhs.dtype.is_float:
            raise BuildError(f"true division of {e.lhs.dtype} operands in {e}; the IR casts "
                             "them to float first, so this expression was built by hand")
        symbol, prec = self.operators[e.op]
        if e.op.is_comparison and e.lhs.dtype.is_int and e.rhs.dtype.is_int:
            self.index_depth += 1   # a comparison of integers: a condition on indices
            try:
                lhs = self._operand(e.lhs, prec, unclear=self._unclear(e.op, e.lhs))
                rhs = self._operand(e.rhs, prec + 1, unclear=self._unclear(e.op, e.rhs))
            finally:
                self.index_depth -= 1
            return f"{lhs} {symbol} {rhs}", prec
        lhs = self._operand(e.lhs, prec, unclear=self._unclear(e.op, e.lhs))
        # left-associative: an equal-precedence right operand keeps its parentheses
        rhs = self._operand(e.rhs, prec + 1, unclear=self._unclear(e.op, e.rhs))
        return f"{lhs} {symbol} {rhs}", prec

    def _plain_division(self, e: BinOp) -> bool:
        return (self.index_depth > 0 and e.dtype.is_int and isinstance(e.rhs, Const)
                and isinstance(e.rhs.value, int)
                and not isinstance(e.rhs.value, bool) and e.rhs.value > 0
                and self.nonnegative(e.lhs))

    def nonnegative(self, e: Expr) -> bool:
        """Is the integer ``e`` proven >= 0: built from non-negative constants and iterators
        of loops that start at a non-negative value by +, *, min, max, and floor division and
        modulo by a positive constant? (Size parameters are not assumed non-negative.)"""
        if isinstance(e, Const):
            return isinstance(e.value, int) and e.value >= 0
        if isinstance(e, Var):
            flags = self.nonneg.get(e.name) if e.kind is VarKind.ITER else None
            return bool(flags) and flags[-1]
        if isinstance(e, BinOp):
            if e.op in (BinOpKind.ADD, BinOpKind.MUL, BinOpKind.MIN):
                return self.nonnegative(e.lhs) and self.nonnegative(e.rhs)
            if e.op is BinOpKind.MAX:
                return self.nonnegative(e.lhs) or self.nonnegative(e.rhs)
            if e.op in (BinOpKind.FLOORDIV, BinOpKind.MOD):
                return (self.nonnegative(e.lhs) and isinstance(e.rhs, Const)
                        and isinstance(e.rhs.value, int) and e.rhs.value > 0)
        return False

    def bind_iterator(self, loop: For, var: str) -> None:
        """``loop``'s iterator is spelled ``var`` until ``unbind_iterator``."""
        self.nonneg.setdefault(loop.var, []).append(self.nonnegative(loop.start))
        self.bound.setdefault(loop.var, []).append(var)

    def unbind_iterator(self, loop: For) -> None:
        self.bound[loop.var].pop()
        self.nonneg[loop.var].pop()

    @staticmethod
    def _unclear(op: BinOpKind, child: Expr) -> bool:
        """C allows ``a < b == c`` and ``a && b || c``; readers (and gcc -Wall) want parentheses."""
        if not isinstance(child, BinOp):
            return False
        return (op.is_comparison and child.op.is_comparison
                or op is BinOpKind.OR and child.op is BinOpKind.AND)

    def _unary(self, e: Unary) -> tuple[str, int]:
        if e.op in (UnaryKind.NEG, UnaryKind.NOT):
            text = self._operand(e.operand, UNARY)
            if e.op is UnaryKind.NEG and text.startswith("-"):
                text = f"({text})"  # not "--x"
            return ("-" if e.op is UnaryKind.NEG else "!") + text, UNARY
        # the operand's dtype picks the function (isnan's result is a bool)
        d = e.operand.dtype
        if d is DType.FLOAT16 and (e.op, d) not in self.math_functions:
            # no half-precision libm: compute in float and round back (isnan needs no cast)
            arg = self._operand(e.operand, UNARY)
            call = f"{self.math_function(e.op, DType.FLOAT32)}((float){arg})"
            return (call, POSTFIX) if e.dtype is DType.BOOL else \
                (f"({self.type_name(d)}){call}", UNARY)
        return f"{self.math_function(e.op, d)}({self.expr(e.operand)})", POSTFIX

    def literal(self, c: Const) -> tuple[str, int]:
        """A constant spelled so that C gives it exactly ``c.dtype`` and ``c.value``."""
        if c.dtype is DType.BOOL:
            return ("true" if c.value else "false"), POSTFIX
        text = self._int_literal(c) if c.dtype.is_int else self._float_literal(c)
        return text, UNARY if text[0] in "-(" else POSTFIX

    def _int_literal(self, c: Const) -> str:
        lo, hi, min_name = self.int_limits[c.dtype]
        v = int(c.value)
        if not lo <= v <= hi:
            raise BuildError(f"constant {v} in kernel '{self.kernel.name}' does not fit in "
                             f"{c.dtype} (from {lo} to {hi}), the type the generated code "
                             "computes it in; use smaller constants (steps, moduli, bounds)")
        if v == lo:
            return min_name  # -2**63 has no literal: 2**63 overflows before the minus applies
        if c.dtype is DType.INT64 and not -2**31 <= v < 2**31:
            return self._wide_int64(v)
        return str(v)

    def _wide_int64(self, v: int) -> str:
        """An int64 literal outside the int range (C: ``INT64_C``)."""
        return f"INT64_C({v})"

    def _float_literal(self, c: Const) -> str:
        if c.dtype is DType.FLOAT16:     # a float literal rounded to half, typed as one
            return f"({self.type_name(c.dtype)}){float(np.float16(c.value))!r}f"
        with np.errstate(over="ignore"):
            v = float(np.float32(c.value)) if c.dtype is DType.FLOAT32 else float(c.value)
        if math.isfinite(v):
            return str(np.float32(v)) + "f" if c.dtype is DType.FLOAT32 else repr(v)
        text = "NAN" if math.isnan(v) else "-INFINITY" if v < 0 else "INFINITY"
        return text if c.dtype is DType.FLOAT32 else f"({self.type_name(c.dtype)}){text}"

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

