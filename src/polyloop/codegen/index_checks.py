# SPDX-License-Identifier: Apache-2.0
"""Run-time bounds checks for the accesses isl cannot prove in bounds.

``pl.build`` proves every affine access inside its buffer before generating code (``poly.bounds``).
An index that reads data (``out[idx[i]]``) or is not affine (``A[i * i]``) cannot be decided
there, so the generated code checks it when the kernel runs: each dimension is compared with
the buffer's extent, an access found outside is skipped (a load yields 0), and the first such
index of a call is recorded in a fault word. The entry function then returns
``INDEX_FAULT_STATUS`` and the runtime raises an error naming the buffer, the index and the
statement. Affine indices, the normal case, get no check and cost nothing.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import BuildError
from ..ir.expr import BinOp, BinOpKind, Cast, Const, Expr, Unary, UnaryKind, Var, walk

INDEX_FAULT_STATUS = 2
FAULT_WORDS = 5     # claimed (0: no fault), site, dimension, index, extent
# The most nodes the index of one checked dimension may have. A data-dependent index is a few
# dozen; more means an index no one wrote (isl's piecewise inverse of a loop it had to build
# from a quasi-affine value, say): checking it at every access slows the kernel and can keep
# the C compiler busy for minutes, so the build is refused instead.
MAX_CHECKED_INDEX_NODES = 256

_LINEAR = frozenset({BinOpKind.ADD, BinOpKind.SUB, BinOpKind.MIN, BinOpKind.MAX})


@dataclass(frozen=True, slots=True)
class IndexSite:
    """One checked access: the statement it belongs to, the buffer and the access as printed."""
    statement: str
    buffer: str
    access: str
    is_write: bool

    def describe(self) -> str:
        verb = "writes" if self.is_write else "reads"
        who = f"statement '{self.statement}'" if self.statement else "the kernel"
        return f"{who} {verb} {self.access}"


def fault_symbol(entry: str) -> str:
    """The exported C array where a kernel's entry copies the first fault of a call."""
    return f"{entry}_index_fault"


def is_affine_index(e: Expr) -> bool:
    """Whether isl can reason about index ``e``: integer constants, iterators, sizes, sums,
    products with a constant, floor division and modulo by a positive constant.

    >>> from polyloop.ir.expr import Var
    >>> i = Var("i")
    >>> is_affine_index(2 * i + 1), is_affine_index(i * i)
    (True, False)
    """
    if isinstance(e, Const):
        return e.dtype.is_int
    if isinstance(e, Var):
        return True
    if isinstance(e, Unary):
        return e.op is UnaryKind.NEG and is_affine_index(e.operand)
    if isinstance(e, Cast):
        return e.dtype.is_int and is_affine_index(e.value)
    if not isinstance(e, BinOp):
        return False
    if e.op in _LINEAR:
        return is_affine_index(e.lhs) and is_affine_index(e.rhs)
    if e.op is BinOpKind.MUL:
        constant = isinstance(e.lhs, Const) or isinstance(e.rhs, Const)
        return constant and is_affine_index(e.lhs) and is_affine_index(e.rhs)
    if e.op in (BinOpKind.FLOORDIV, BinOpKind.MOD):
        positive = isinstance(e.rhs, Const) and e.rhs.dtype.is_int and int(e.rhs.value) > 0
        return positive and is_affine_index(e.lhs)
    return False


def needs_check(indices: tuple[Expr, ...]) -> bool:
    """Whether an access with these indices is checked when the kernel runs."""
    return not all(is_affine_index(i) for i in indices)


def refuse_large_check(site: IndexSite, indices: tuple[Expr, ...]) -> None:
    """Raise BuildError when a dimension of a checked access has more than
    ``MAX_CHECKED_INDEX_NODES`` nodes (see there why).

    >>> from polyloop.ir.expr import Var
    >>> refuse_large_check(IndexSite("B", "A", "A[i]", False), (Var("i") * Var("i"),))
    """
    for d, index in enumerate(indices):
        size = sum(1 for _ in walk(index))
        if size <= MAX_CHECKED_INDEX_NODES:
            continue
        text = str(index)
        shown = text if len(text) <= 120 else text[:120] + " ..."
        who = f"statement '{site.statement}'" if site.statement else "the kernel"
        raise BuildError(
            f"{who} {'writes' if site.is_write else 'reads'} {site.buffer} at an index that "
            f"is not affine in the loops around it, so the code would check it at every "
            f"access, and its dimension {d} has {size} nodes ({shown}); a run-time check may "
            f"have at most {MAX_CHECKED_INDEX_NODES}. Compute such an index in a stage of its "
            "own and read it from there, or, where the index is not what the program wrote, "
            "change the schedule around the statement (a fused loop whose parts isl cannot "
            "recover makes such piecewise indices)")


# The check of one dimension: true when in range, else the first fault of the call is recorded
# (compare-and-swap: OpenMP threads may fault at once) and the access is skipped.
C_CHECK_HELPER = """\
static inline bool pl_index_ok(int64_t *fault, int64_t site, int64_t dim, int64_t index,
                               int64_t extent) {
    if (__builtin_expect((uint64_t)index < (uint64_t)extent, 1)) return true;
    int64_t none = 0;
    if (__atomic_compare_exchange_n(&fault[0], &none, 1, false, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED)) {
        fault[1] = site;
        fault[2] = dim;
        fault[3] = index;
        fault[4] = extent;
    }
    return false;
}"""

# OpenCL 1.2 has 32-bit atomics only: the first word is claimed with atomic_cmpxchg on an int,
# the winner writes the rest.
OPENCL_CHECK_HELPER = """\
inline bool pl_index_ok(__global long *fault, long site, long dim, long index, long extent) {
    if ((ulong)index < (ulong)extent) return true;
    if (atomic_cmpxchg((volatile __global int *)fault, 0, 1) == 0) {
        fault[1] = site;
        fault[2] = dim;
        fault[3] = index;
        fault[4] = extent;
    }
    return false;
}"""
