# SPDX-License-Identifier: Apache-2.0
"""The Program IR: buffers and statements. Immutable; transformations build new programs.

A statement is one assignment executed at every point of its iteration domain::

    buffer[indices] = value                  (reduction is None)
    buffer[indices] = buffer[indices] + value  (reduction SUM; MAX/MIN likewise)

The domain is a parametric integer set in ISL syntax whose tuple is named after the statement
and whose dimensions are the statement's iterators, e.g. ``[n] -> { C[i, j] : 0 <= i < n and
0 <= j < n }``. Only ``polyloop.poly`` interprets it.
"""
from __future__ import annotations

import enum
import types
from dataclasses import dataclass, field, replace

from ..errors import PolyloopError
from ..util.highlight import to_html
from .dtypes import DType
from .expr import Expr, Load, ReduceKind, Var, VarKind, as_expr, expr_to_str, loads


class MemScope(enum.Enum):
    GLOBAL = "global"
    SHARED = "shared"   # GPU shared / OpenCL local memory
    LOCAL = "local"     # registers / private memory

    @staticmethod
    def parse(text: str | MemScope) -> MemScope:
        if isinstance(text, MemScope):
            return text
        for s in MemScope:
            if s.value == text:
                return s
        raise PolyloopError(f"unknown memory scope {text!r}; valid scopes are "
                            + ", ".join(repr(s.value) for s in MemScope))


class BufferRole(enum.Enum):
    INPUT = "input"
    OUTPUT = "output"
    INOUT = "inout"     # read and written in place, passed by the caller
    TEMP = "temp"       # allocated by the module itself


@dataclass(frozen=True, slots=True)
class StorageAlign:
    """Pad a temporary's allocation so that the stride of dimension ``axis`` (in elements,
    once lowering has sized it) is ``offset`` modulo ``factor``: rows of a shared tile then
    start in different memory banks (``Schedule.storage_align``)."""
    axis: int
    factor: int
    offset: int


@dataclass(frozen=True, slots=True, eq=False)
class Buffer:
    """An array of a program: an argument (input, output or both) or a temporary, with its
    shape (ints and size expressions), dtype and memory scope.

    >>> import polyloop as pl
    >>> n = pl.var("n")
    >>> A = pl.placeholder((n,), "float32", name="A")
    >>> prog = pl.to_program(pl.compute((n,), lambda i: A[i] * 2.0, name="B"))
    >>> [(b.name, b.role.value, str(b.dtype), b.shape) for b in prog.buffers]
    [('A', 'input', 'float32', (<Var n>,)), ('B', 'output', 'float32', (<Var n>,))]
    """
    name: str
    shape: tuple[Expr, ...]
    dtype: DType
    role: BufferRole
    scope: MemScope = MemScope.GLOBAL
    # set by lowering on a compacted 'shared'/'local' temporary: the loop each of whose
    # iterations uses its own elements (no value flows between iterations); None: unknown
    home: str | None = None
    # the loops from the outermost down to ``home``: where isl's AST generation drops the home
    # loop (one iteration), its nearest enclosing loop still declares the temporary
    home_loops: tuple[str, ...] = ()
    # storage decisions of the schedule, applied when lowering sizes the temporary:
    # padded strides (Schedule.storage_align) and the copies it rotates through along its
    # home loop (Schedule.double_buffer: 2)
    align: tuple[StorageAlign, ...] = ()
    stages: int = 1

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_argument(self) -> bool:
        return self.role is not BufferRole.TEMP

    def __class_getitem__(cls, spec: object) -> types.GenericAlias:
        """The annotation of a ``@pl.script`` argument: ``A: pl.Buffer[("n", "n"), "float64"]``
        (shape, dtype); the script front end reads it, nothing else does."""
        return types.GenericAlias(cls, spec if isinstance(spec, tuple) else (spec,))

    def __getitem__(self, indices: object) -> Load:
        idx = indices if isinstance(indices, tuple) else (indices,)
        if len(idx) != self.ndim:
            raise PolyloopError(f"buffer '{self.name}' has {self.ndim} dimensions, "
                                f"indexed with {len(idx)}")
        return Load(self.name, tuple(as_expr(i) for i in idx), self.dtype)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True, eq=False)
class Statement:
    """One assignment of a program, executed once for each point of its ``domain`` (an isl
    set over ``iters``): ``buffer[indices] = value``, or ``+=`` (and the like) for a reduction.

    >>> import polyloop as pl
    >>> n = pl.var("n")
    >>> A = pl.placeholder((n,), "float32", name="A")
    >>> prog = pl.to_program(pl.compute((n,), lambda i: A[i] * 2.0, name="B"))
    >>> st = prog.statements[0]
    >>> st.name, st.iters, st.buffer, str(st.value)
    ('B', ('i',), 'B', 'A[i] * 2.0')
    >>> st.domain
    '[n] -> { B[i] : 0 <= i < n }'
    """
    name: str
    iters: tuple[str, ...]
    domain: str
    buffer: str
    indices: tuple[Expr, ...]
    value: Expr
    reduction: ReduceKind | None = None
    block: str = ""
    is_init: bool = False

    @property
    def block_name(self) -> str:
        return self.block or self.name

    @property
    def target(self) -> Load:
        return Load(self.buffer, self.indices, self.value.dtype)

    def reads(self) -> list[Load]:
        """The loads the statement performs, including the accumulator of a reduction update."""
        rs = loads(self.value)
        for ix in self.indices:
            rs.extend(loads(ix))
        if self.reduction is not None:
            rs.append(self.target)
        return rs


@dataclass(frozen=True, slots=True, eq=False)
class Program:
    """Buffers, statements in program order, size parameters, and the argument order.

    >>> import polyloop as pl
    >>> n = pl.var("n")
    >>> A = pl.placeholder((n,), "float32", name="A")
    >>> prog = pl.to_program(pl.compute((n,), lambda i: A[i] * 2.0, name="B"))
    >>> prog.args, prog.params, len(prog.statements)
    (('A', 'B'), ('n',), 1)
    >>> print(prog)
    # program B  (params: n)
    # input  A: float32[n]
    # output B: float32[n]
    B: [n] -> { B[i] : 0 <= i < n }
        B[i] = A[i] * 2.0
    """

    name: str
    buffers: tuple[Buffer, ...]
    statements: tuple[Statement, ...]
    params: tuple[str, ...]
    args: tuple[str, ...]
    assumptions: str = ""
    _by_name: dict = field(default_factory=dict, repr=False, compare=False)
    # The loop nest the program was written as (the script front end's imperfect nests): per
    # statement name, its position among its siblings at each depth of the nest, outermost
    # first, one more entry than it has iterators; statements whose positions agree up to
    # depth k share their first k loops. Empty: one loop nest per statement, in program order.
    nesting: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def __post_init__(self) -> None:
        seen: dict[str, str] = {}
        for b in self.buffers:
            if b.name in seen:
                raise PolyloopError(f"two buffers are named '{b.name}'; give tensors unique names")
            seen[b.name] = "buffer"
            self._by_name[b.name] = b
        for s in self.statements:
            if s.name in seen and seen[s.name] == "statement":
                raise PolyloopError(f"two statements are named '{s.name}'")
            seen.setdefault(s.name, "statement")
            self._by_name["stmt:" + s.name] = s
            if s.buffer not in self._by_name:
                raise PolyloopError(f"statement '{s.name}' writes unknown buffer '{s.buffer}'")

    def buffer(self, name: str) -> Buffer:
        try:
            return self._by_name[name]
        except KeyError:
            raise PolyloopError(f"no buffer named '{name}' in program '{self.name}'; buffers: "
                                + ", ".join(b.name for b in self.buffers)) from None

    def has_buffer(self, name: str) -> bool:
        return name in self._by_name and isinstance(self._by_name[name], Buffer)

    def statement(self, name: str) -> Statement:
        try:
            return self._by_name["stmt:" + name]
        except KeyError:
            raise PolyloopError(f"no statement named '{name}' in program '{self.name}'; "
                                "statements: " + ", ".join(s.name for s in self.statements)) from None

    def arg_buffers(self) -> list[Buffer]:
        return [self.buffer(a) for a in self.args]

    def with_statements(self, statements: tuple[Statement, ...],
                        buffers: tuple[Buffer, ...] | None = None) -> Program:
        return Program(self.name, self.buffers if buffers is None else buffers, statements,
                       self.params, self.args, self.assumptions)

    def replace(self, **changes: object) -> Program:
        return replace(self, _by_name={}, **changes)  # type: ignore[arg-type]

    def __str__(self) -> str:
        return program_to_str(self)

    def _repr_html_(self) -> str:
        """The program's text, highlighted (Jupyter displays a program this way)."""
        return to_html(str(self), "python")


def param(name: str) -> Var:
    return Var(name, VarKind.PARAM)


def statement_to_str(s: Statement) -> str:
    lhs = expr_to_str(s.target)
    if s.reduction is None:
        return f"{lhs} = {expr_to_str(s.value)}"
    if s.reduction.value == "sum":
        return f"{lhs} += {expr_to_str(s.value)}"
    return f"{lhs} = {s.reduction.value}({lhs}, {expr_to_str(s.value)})"


def program_to_str(p: Program) -> str:
    lines = [f"# program {p.name}" + (f"  (params: {', '.join(p.params)})" if p.params else "")]
    for b in p.buffers:
        shape = ", ".join(expr_to_str(d) for d in b.shape)
        scope = "" if b.scope.value == "global" else f" @{b.scope.value}"
        lines.append(f"# {b.role.value:6} {b.name}: {b.dtype}[{shape}]{scope}")
    for s in p.statements:
        lines.append(f"{s.name}: {s.domain}")
        lines.append(f"    {statement_to_str(s)}")
    return "\n".join(lines)
