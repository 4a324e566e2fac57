# SPDX-License-Identifier: Apache-2.0
"""``TensorIntrin`` (a description paired with an implementation) and the registry that finds an
intrinsic again by name: ``lookup`` (traces record intrinsics by name) and ``register_factory``
(layers above rebuild their built-in micro-kernels from a name).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from ..errors import ArgumentError, ScheduleError
from ..ir.expr import loads
from ..ir.program import Program, Statement
from ..poly.nest_shape import NestShape, nest_shape
from . import implementation as impl_check
from . import state as st
from .intrin_body import check_operands

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

    ``requires`` names the C compiler's predefined macros the C implementation needs (x86
    intrinsics: ``("__AVX512F__",)``); a C target without them (an ARM or RISC-V device) gets
    ``fallback`` instead, an intrinsic of the same description and calling convention in
    portable C, or a BuildError when there is none.
    """

    def __init__(self, description: object, implementation: object, *, name: str | None = None,
                 devices: "dict[str, DeviceBody] | None" = None,
                 requires: tuple[str, ...] = (), fallback: "TensorIntrin | None" = None):
        self.devices: dict[str, DeviceBody] = dict(devices or {})
        self.requires = tuple(requires)
        self.fallback = fallback
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
