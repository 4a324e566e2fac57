# SPDX-License-Identifier: Apache-2.0
"""Tensor intrinsics and the structural match behind ``Schedule.tensorize``.

A ``TensorIntrin`` pairs a *description* (a small ``pl.compute``, e.g. a 6 x 32 x kc update
``C[i, j] += A[i, k] * B[k, j]``) with an *implementation* (C source of a function). ``match``
checks that the loop nest under a loop computes exactly the description: the same body up to a
renaming of buffers, one loop per axis with the same extent (isl: with the outer loops fixed the
nest is a box), and accesses whose strides (exact, from isl) move the same operands, contiguous
in each operand's last dimension. Lowering (``lower.tensorize``) replaces each full box by a
call and keeps the original loops for partial ones.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from ..errors import ArgumentError, ScheduleError
from ..ir.dtypes import INDEX
from ..ir.expr import Const, Expr, loads
from ..ir.loop_notes import NoteKey, TensorizeMark, TensorizePart
from ..ir.program import Program, Statement
from ..ir.simplify import simplify
from ..poly.nest_shape import NestShape, nest_shape
from ..poly.tree import LoopNode, Root, StmtNode, loops, path_to
from . import implementation as impl_check
from . import loops as loop_edits
from . import state as st
from . import verdicts as vd
from .intrin_body import check_operands, match_body

ANNOTATION = NoteKey.TENSORIZE
PART = NoteKey.TENSORIZE_LOOP   # on every loop of a tensorized nest: a TensorizePart
_REGISTRY: dict[str, "TensorIntrin"] = {}
_C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class TensorIntrin:
    """A hardware (or hand-written, or polyloop-generated) routine that computes a small tensor
    computation.

    ``description``: the output tensor of a ``pl.compute`` (one statement, every index a plain
    axis, each buffer accessed once), e.g. the update of a 6 x 32 tile of C over ``kc`` steps of
    k (``kc`` may be a ``pl.var``). ``implementation``: either C source that defines
    (``static inline``) the function ``name`` (default: the first function the source defines;
    it may start with ``#include`` lines), or a polyloop computation of the same statement: a
    ``pl.Schedule`` (its schedule is kept: split, unroll, vectorize become the function's loops
    and explicit vector code), a ``pl.compute`` tensor (the default schedule) or a Program.
    polyloop then generates the function (named ``pl_gen_<output>_<hash>`` unless ``name`` is
    given) after checking that it computes the description; a mismatch raises
    ``ArgumentError``. The calling convention is::

        void name(T *out, const T *in_1, ..., const T *in_m,
                  int64_t <strides of out>, int64_t <strides of in_1>, ...,
                  int64_t <trip count of each symbolic axis>)

    Operands come in this order: the written buffer, then the read buffers in the order they
    first appear in the body. Each is a pointer to the first element of its region. The
    strides of an operand of r dimensions are the element distances between consecutive
    indices of its first r - 1 dimensions (the row stride or leading dimension of a matrix);
    its last dimension is contiguous (stride 1). A dimension indexed by an axis of extent 1
    has stride 0 (only its index 0 exists). The trip counts of the axes whose extent is
    symbolic follow, in the description's axis order (reduction axes last). A reduction
    description (``pl.sum``) means an *update*: the function adds to ``out``. The function
    must accept a trip count of 0.

    >>> import polyloop as pl
    >>> kc = pl.var("kc")
    >>> x = pl.placeholder((kc,), "float32", name="x")
    >>> y = pl.placeholder((kc,), "float32", name="y")
    >>> k = pl.reduce_axis((0, kc), name="k")
    >>> d = pl.compute((), lambda: pl.sum(x[k] * y[k], axis=k), name="d")
    >>> src = '''static inline void my_dot(float *d, const float *x, const float *y, int64_t kc) {
    ...     float s = 0.0f;
    ...     for (int64_t k = 0; k < kc; k++) s += x[k] * y[k];
    ...     d[0] += s;
    ... }'''
    >>> dot = pl.TensorIntrin(d, src)
    >>> dot.name, dot.axes, dot.extents
    ('my_dot', ('k',), (None,))

    The same computation, scheduled by polyloop, as the implementation of a 4 x 16 tile update
    (k outermost, the 4 rows unrolled, the 16 columns one vector):

    >>> a = pl.placeholder((4, kc), "float32", name="a")
    >>> b = pl.placeholder((kc, 16), "float32", name="b")
    >>> c = pl.compute((4, 16), lambda i, j: pl.sum(a[i, k] * b[k, j], axis=k), name="c")
    >>> impl = pl.Schedule(c)
    >>> i, j, kk = impl.get_loops("c")
    >>> impl.reorder(kk, i, j); impl.unroll(i); impl.vectorize(j)
    >>> tile = pl.TensorIntrin(c, impl, name="tile_4x16")
    >>> tile.generated, tile.extents
    (True, (4, 16, None))

    ``devices`` maps a GPU target ("opencl", "cuda") to a ``DeviceBody``: the intrinsic's
    implementation there (``polyloop.intrin.wmma_intrin`` has both: tensor cores in CUDA, a
    plain loop nest in OpenCL). Without one, a tensorized nest builds for the C target only.
    """

    def __init__(self, description: object, implementation: object, *, name: str | None = None,
                 devices: "dict[str, DeviceBody] | None" = None):
        self.devices: dict[str, DeviceBody] = dict(devices or {})
        program = _as_program(description)
        self.program = program
        self.statement = _update_statement(program)
        check_operands(self.statement)
        top = st.initial(program).stmt_path(self.statement.name)
        if not top:
            raise ArgumentError("TensorIntrin: the description has no loops; describe at least "
                                "one axis")
        self.shape: NestShape = nest_shape(program, st.initial(program).root, top[0].id,
                                           self.statement.name)
        if not self.shape.is_box:
            raise ArgumentError("TensorIntrin: the description's domain must be a box")
        self.implementation: impl_check.Implementation | None = None
        if isinstance(implementation, str):
            self.source = implementation
            self.name = name if name is not None else _first_function(implementation)
            if not _C_NAME.match(self.name) or not re.search(rf"\b{self.name}\s*\(",
                                                             implementation):
                raise ArgumentError(f"TensorIntrin: the implementation does not define a C "
                                    f"function named {self.name!r}")
        else:
            self.source = ""
            self.implementation = self._generated(implementation, name)
            self.name = name if name is not None else \
                f"pl_gen_{_c_part(self.statement.buffer)}_{self.implementation.fingerprint}"
            if not _C_NAME.match(self.name):
                raise ArgumentError(f"TensorIntrin: name {self.name!r} is not a C identifier")
        _REGISTRY[self.name] = self

    def _generated(self, implementation: object, name: str | None) -> impl_check.Implementation:
        found = impl_check.as_state(implementation)
        if found is None:
            raise ArgumentError("TensorIntrin: implementation must be C source (a str) defining "
                                "the function, a pl.Schedule, a pl.compute tensor or a Program; "
                                f"got {type(implementation).__name__}")
        state, original, replay = found
        return impl_check.check(self.program, self.statement, state, original, replay,
                                name or self.statement.buffer)

    @property
    def generated(self) -> bool:
        """True when polyloop generates the implementation (from a schedule)."""
        return self.implementation is not None

    @property
    def axes(self) -> tuple[str, ...]:
        """The description's axes (its statement's iterators), reduction axes last."""
        return self.statement.iters

    @property
    def extents(self) -> tuple[int | None, ...]:
        """Each axis' extent; ``None`` for a symbolic one (passed to the call)."""
        return self.shape.extents

    @property
    def operands(self) -> tuple[str, ...]:
        """The description's buffers in call order: the written one, then the read ones."""
        return (self.statement.buffer,) + tuple(ld.buffer for ld in loads(self.statement.value))

    def __repr__(self) -> str:
        ext = ", ".join(f"{a}={e if e is not None else '?'}" for a, e in zip(self.axes, self.extents))
        return f"TensorIntrin({self.name!r}: {ext})"


@dataclass(frozen=True, slots=True)
class DeviceBody:
    """A tensor intrinsic's implementation on a GPU target ("opencl" or "cuda").

    ``source(name, spaces)``: the source that defines the device function ``name`` for operands
    in the address spaces ``spaces`` (the target's qualifiers, e.g. ``"__local "``, written
    operand first; OpenCL needs one function per combination). ``warp``: the function is called
    by the 32 lanes of a warp together (``threadIdx.x`` is the lane): the nest must not be
    under a ``threadIdx.x`` loop and the launch must have exactly 32 threads on x. The
    program's meaning stays the one of a single thread running the nest (lane 0): the body
    synchronizes the warp (``__syncwarp``) before and after, so that what other lanes read
    and write is ordered with lane 0's other statements.
    """
    source: Callable[[str, tuple[str, ...]], str]
    warp: bool = False


# The built-in micro-kernels (``polyloop.intrin``, one layer up: it builds their descriptions
# with the te front end) have names that encode their parameters; a trace replayed in a process
# that never created one rebuilds it from the name through this late-bound lookup.
BUILTIN_PREFIX = "pl_ukr_"
# name prefix -> factory that rebuilds an intrinsic from its name (``Schedule.from_trace`` replays
# ``tensorize`` by name); layers above register theirs (``polyloop.intrin`` its micro-kernels)
_FACTORIES: dict[str, Callable[[str], "TensorIntrin"]] = {}


def register_factory(prefix: str, factory: Callable[[str], "TensorIntrin"]) -> None:
    """Let ``lookup`` rebuild intrinsics whose names start with ``prefix`` with ``factory``."""
    _FACTORIES[prefix] = factory


def lookup(intrin: TensorIntrin | str) -> TensorIntrin:
    """The intrinsic itself, or the one created under that name (traces record the name);
    a built-in micro-kernel's name (``pl_ukr_gemm_avx512_6x32``) rebuilds it."""
    if isinstance(intrin, TensorIntrin):
        return intrin
    if isinstance(intrin, str) and intrin in _REGISTRY:
        return _REGISTRY[intrin]
    for prefix, factory in _FACTORIES.items():
        if isinstance(intrin, str) and intrin.startswith(prefix):
            return factory(intrin)
    known = ", ".join(sorted(_REGISTRY)) or "none yet"
    raise ScheduleError(f"tensorize: unknown intrinsic {intrin!r}: no pl.TensorIntrin of that "
                        "name was created in this process (a trace records intrinsics by name; "
                        "create the intrinsic again, with the same name, before replaying it). "
                        f"Known: {known}")


def _c_part(name: str) -> str:
    return re.sub(r"\W", "_", name)


def _as_program(description: object) -> Program:
    if isinstance(description, Program):
        return description
    if hasattr(description, "to_program"):
        return description.to_program()  # type: ignore[union-attr]
    raise ArgumentError("TensorIntrin: the description must be a tensor from pl.compute or a "
                        f"Program, got {type(description).__name__}")


def _update_statement(program: Program) -> Statement:
    main = [s for s in program.statements if not s.is_init]
    if len(main) != 1:
        raise ArgumentError(f"TensorIntrin: the description must be one pl.compute, got "
                            f"{len(main)} statements ({', '.join(s.name for s in main)})")
    return main[0]


def _first_function(source: str) -> str:
    m = re.search(r"\b([A-Za-z_]\w*)\s*\([^;{]*\)\s*\{", source)
    if m is None:
        raise ArgumentError("TensorIntrin: no function definition found in the implementation; "
                            "pass name=")
    return m.group(1)


# --- the match ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Operand:
    """One argument region of the call: description buffer -> actual buffer and access."""
    described: str
    buffer: str
    access: int                      # 0: the written element, k: the k-th load of the body
    strides: tuple[Expr, ...]        # element strides of the description's dims but the last


@dataclass(frozen=True, slots=True)
class Match:
    intrin: TensorIntrin
    statement: str
    loops: tuple[int, ...]           # the nest's loop ids, outermost first
    axis_of_loop: tuple[int, ...]    # the description axis each loop runs
    operands: tuple[Operand, ...]    # in call order


def _chain(top: LoopNode) -> tuple[list[LoopNode], str]:
    nodes = [top]
    while True:
        kids = nodes[-1].children
        if len(kids) == 1 and isinstance(kids[0], LoopNode):
            nodes.append(kids[0])
            continue
        if len(kids) == 1 and isinstance(kids[0], StmtNode):
            return nodes, kids[0].statement
        what = ", ".join(getattr(k, "name", None) or getattr(k, "statement") for k in kids)
        raise ScheduleError(f"tensorize: loop '{nodes[-1].name}' holds {len(kids)} children "
                            f"({what}); the nest under '{top.name}' must be a perfect nest "
                            "around one statement (move other blocks out, e.g. with "
                            "decompose_reduction)")


def match(program: Program, root: Root, loop_id: int, intrin: TensorIntrin) -> Match:
    """Check that the nest under ``loop_id`` computes ``intrin``'s description; raise
    ``ScheduleError`` saying what differs."""
    path = path_to(root, loop_id)
    if path is None:
        raise ScheduleError(f"tensorize: loop #{loop_id} is not in the schedule")
    chain, stmt_name = _chain(path[-1])
    stmt = program.statement(stmt_name)
    desc = intrin.statement
    match_body(desc, stmt, intrin.name)
    names = [n.name for n in chain]
    shape = nest_shape(program, root, loop_id, stmt_name)
    want = intrin.shape
    if len(chain) != len(intrin.axes):
        raise ScheduleError(f"tensorize: the nest under '{names[0]}' has {len(chain)} loops "
                            f"({', '.join(names)}), intrinsic '{intrin.name}' has "
                            f"{len(intrin.axes)} axes ({', '.join(intrin.axes)})")
    if not shape.is_box:
        raise ScheduleError(f"tensorize: the nest under '{names[0]}' is not a rectangular box "
                            "(an inner loop's bounds depend on another inner loop)")
    for a, row in enumerate(shape.deltas):
        for t, d in enumerate(row):
            if d is None:
                raise ScheduleError(f"tensorize: access {_access(stmt, a)} has no constant "
                                    f"stride along loop '{names[t]}'")
    axes = _assign_axes(shape, want, names, intrin, stmt, program)
    for t, a in enumerate(axes):
        e_want, e_have = want.extents[a], shape.extents[t]
        if e_want is not None and e_have != e_want:
            have = "an unbounded number of" if e_have is None else f"up to {e_have}"
            raise ScheduleError(f"tensorize: loop extent differs: loop '{names[t]}' runs {have} "
                                f"iterations, axis '{intrin.axes[a]}' of intrinsic "
                                f"'{intrin.name}' has extent {e_want}; split it by {e_want}")
    operands = _operands(program, stmt, shape, want, axes, intrin.operands, names)
    return Match(intrin, stmt_name, tuple(n.id for n in chain), tuple(axes), operands)


def _access(stmt: Statement, a: int) -> str:
    return str(([stmt.target] + loads(stmt.value))[a])


def _assign_axes(shape: NestShape, want: NestShape, names: list[str], intrin: TensorIntrin,
                 stmt: Statement, program: Program) -> list[int]:
    """Each loop runs an unused axis that moves the same operands; among several, one of the
    same extent whose contiguous dimensions are contiguous in the nest, else the first."""
    def moves(s: NestShape, t: int) -> tuple[bool, ...]:
        return tuple(any(row[t]) for row in s.deltas)  # type: ignore[arg-type]

    accesses = [stmt.target] + loads(stmt.value)

    def fits(t: int, a: int) -> bool:
        if want.extents[a] is not None and want.extents[a] != shape.extents[t]:
            return False
        for k, row in enumerate(want.deltas):
            last = row[a][-1] if row[a] else 0  # type: ignore[index]
            if last:
                stride = _linear(shape.deltas[k][t], program.buffer(accesses[k].buffer).shape)  # type: ignore[arg-type]
                if not (isinstance(stride, Const) and stride.value == 1):
                    return False
        return True

    used: set[int] = set()
    out = []
    for t in range(len(names)):
        sig = moves(shape, t)
        candidates = [a for a in range(len(intrin.axes)) if a not in used and moves(want, a) == sig]
        if not candidates and shape.extents[t] == 1:
            # a loop of one iteration moves nothing: it can run any axis of a symbolic extent
            candidates = [a for a in range(len(intrin.axes))
                          if a not in used and want.extents[a] in (None, 1)]
        if not candidates:
            moved = [_access(stmt, k) for k, m in enumerate(sig) if m]
            raise ScheduleError(f"tensorize: access stride differs: loop '{names[t]}' moves "
                                f"{', '.join(moved) or 'no operand'}; no axis of intrinsic "
                                f"'{intrin.name}' moves the same operands")
        a = next((a for a in candidates if fits(t, a)), candidates[0])
        used.add(a)
        out.append(a)
    return out


def _linear(delta: tuple[int, ...], shape: tuple[Expr, ...]) -> Expr:
    """Element distance of an index step in a row-major buffer."""
    total: Expr = Const(0, INDEX, weak=True)
    for d, step in enumerate(delta):
        if step:
            size: Expr = Const(step, INDEX, weak=True)
            for extent in shape[d + 1:]:
                size = size * extent
            total = total + size
    return simplify(total)


def _operands(program: Program, stmt: Statement, shape: NestShape, want: NestShape,
              axes: list[int], described: tuple[str, ...], names: list[str]
              ) -> tuple[Operand, ...]:
    out = []
    loop_of_axis = {a: t for t, a in enumerate(axes)}
    for k, want_row in enumerate(want.deltas):
        actual = shape.deltas[k]
        buffer = ([stmt.target] + loads(stmt.value))[k].buffer
        ndim = len(want_row[0]) if want_row else 0  # type: ignore[arg-type]
        strides = []
        for dim in range(ndim):
            axis = next((a for a, d in enumerate(want_row) if d[dim]), None)  # type: ignore[index]
            if axis is None:
                # an axis of extent 1 indexes this dimension: only its index 0 exists
                strides.append(Const(0, INDEX, weak=True))
                continue
            t = loop_of_axis[axis]
            if shape.extents[t] == 1 and not any(actual[t]):  # type: ignore[arg-type]
                # the loop has one iteration: only index 0 of this dimension is touched
                strides.append(Const(0, INDEX, weak=True))
                continue
            stride = _linear(actual[t], program.buffer(buffer).shape)  # type: ignore[arg-type]
            if dim == ndim - 1 and not (isinstance(stride, Const) and stride.value == 1):
                raise ScheduleError(f"tensorize: access stride differs: {_access(stmt, k)} moves "
                                    f"by {stride} elements along loop '{names[t]}', the "
                                    "intrinsic needs a contiguous last dimension (stride 1); "
                                    "change the layout with transform_layout")
            strides.append(stride)
        # one region per described buffer: check_operands made them distinct
        out.append(Operand(described[k], buffer, k, tuple(strides[:-1])))
    return tuple(out)


def tensorize(state: st.State, node: LoopNode, intrin: TensorIntrin) -> st.State:
    """The state with ``node`` marked for ``intrin`` once the nest under it matches; refused
    if running the nest in the description's axis order would break a dependence."""
    m = match(state.program, state.root, node.id, intrin)
    nodes = [state.loop(i) for i in m.loops]
    in_order = [nodes[m.axis_of_loop.index(a)] for a in sorted(m.axis_of_loop)]
    if [n.id for n in in_order] != list(m.loops):  # type: ignore[union-attr]
        vd.verify(loop_edits.reorder(state, in_order),  # type: ignore[arg-type]
                  f"tensorize: intrinsic '{intrin.name}' runs the nest in the order "
                  f"{', '.join(intrin.axes)}; that")
    for t, loop_id in enumerate(m.loops):
        # every loop of the nest names it: isl writes no loop for an axis of one iteration
        # (extent 1), and lowering must still find the nest from the loops that remain
        n = state.loop(loop_id)
        ann = tuple((k, v) for k, v in n.annotations if k not in (ANNOTATION, PART))
        if t == 0:
            ann += ((ANNOTATION, TensorizeMark(intrin.name, node.id)),)
        ann += ((PART, TensorizePart(node.id, t)),)
        state = loop_edits.set_kind(state, n, n.kind, annotations=ann)  # type: ignore[arg-type]
    return state


def nest_part(annotations: tuple[tuple[str, object], ...]) -> tuple[int, int] | None:
    """(id of the tensorized loop, position in its nest) of a loop of a tensorized nest."""
    for k, v in annotations:
        if k == PART and isinstance(v, TensorizePart):
            return v.loop, v.position
    return None


def marked_loops(root: Root) -> dict[int, str]:
    """Loop id -> intrinsic name, for every loop marked by tensorize."""
    out = {}
    for n in loops(root):
        for k, v in n.annotations:
            if k == ANNOTATION and isinstance(v, TensorizeMark):
                out[n.id] = v.intrin
    return out
