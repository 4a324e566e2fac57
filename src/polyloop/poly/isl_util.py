# SPDX-License-Identifier: Apache-2.0
"""Conversions between polyloop expressions and isl text/objects, with parse caching.

isl objects are immutable values in islpy; parsed objects are cached by their text.
"""
from __future__ import annotations

from functools import lru_cache

import islpy as isl

from ..errors import ParseError
from ..ir.expr import BinOp, BinOpKind, Const, Expr, Unary, UnaryKind, Var

CTX = isl.DEFAULT_CONTEXT


def _parse(kind: type, text: str) -> object:
    try:
        return kind(text)
    except isl.Error as e:
        raise ParseError(f"invalid ISL {kind.__name__.lower()}: {text!r}\n  isl says: {e}") from None


# isl objects whose text polyloop printed itself (a loop expression made by a primitive): the
# text is kept in the tree, and reading it back returns the object instead of parsing it
_PRINTED: dict[str, object] = {}
_PRINTED_LIMIT = 16384


def printed(obj: isl.Set | isl.Map) -> str:
    """``str(obj)``, remembered so that ``set_``/``map_`` of that text return ``obj`` without
    parsing (the tree holds loop expressions as text; the primitives make them as objects).

    >>> m = isl.Map("{ S[i] -> [(i + 1)] }")
    >>> map_(printed(m)) is m
    True
    """
    text = str(obj)
    if len(_PRINTED) >= _PRINTED_LIMIT:
        _PRINTED.clear()
    _PRINTED.setdefault(text, obj)
    return text


@lru_cache(maxsize=4096)
def set_(text: str) -> isl.Set:
    got = _PRINTED.get(text)
    return got if isinstance(got, isl.Set) else _parse(isl.Set, text)  # type: ignore[return-value]


@lru_cache(maxsize=4096)
def map_(text: str) -> isl.Map:
    got = _PRINTED.get(text)
    return got if isinstance(got, isl.Map) else _parse(isl.Map, text)  # type: ignore[return-value]


@lru_cache(maxsize=4096)
def union_map(text: str) -> isl.UnionMap:
    return _parse(isl.UnionMap, text)  # type: ignore[return-value]


def clear_caches() -> None:
    """Forget parsed and printed objects (for timing code generation from scratch)."""
    for fn in (set_, map_, union_map):
        fn.cache_clear()
    _PRINTED.clear()


def out_dims(m: isl.Map, first: int, count: int = 1) -> isl.Map:
    """``m`` keeping only its output dimensions ``first .. first + count - 1``.

    >>> out_dims(isl.Map("{ [k] -> [x, y, z] : x = k and y = 2k and z = 3k }"), 1)
    Map("{ [k] -> [y = 2k] }")
    """
    n = m.dim(isl.dim_type.out)
    m = m.project_out(isl.dim_type.out, first + count, n - first - count)
    return m.project_out(isl.dim_type.out, 0, first)


def solved_dim(c: isl.Constraint, kind: isl.dim_type, n: int) -> int | None:
    """The one dimension of ``kind`` (of ``n``) that the equality ``c`` gives a value as a
    function of the others (coefficient 1 or -1, no other dimension of that kind, no
    division), or None.

    >>> m = isl.Map("[n] -> { [k] -> [x, y] : x = k + n and 2y = k }")
    >>> sorted(str(solved_dim(c, isl.dim_type.out, 2)) for c in m.affine_hull().get_constraints())
    ['0', 'None']
    """
    if not c.is_equality():
        return None
    divs = c.get_local_space().dim(isl.dim_type.div)
    if divs and c.involves_dims(isl.dim_type.div, 0, divs):
        return None
    dims = [d for d in range(n) if not c.get_coefficient_val(kind, d).is_zero()]
    if len(dims) != 1 or not c.get_coefficient_val(kind, dims[0]).abs().is_one():
        return None
    return dims[0]


# Words isl's parser reads as keywords wherever a name could stand (checked one by one with
# isl: as a parameter, a set dimension and in a constraint).
ISL_KEYWORDS = frozenset("""and or not mod floor ceil floord ceild min max exists infty NaN nan
    true false implies rat""".split())


def isl_name(name: str) -> str:
    """A spelling of the Python identifier ``name`` that isl reads as a name: an isl keyword
    gets a trailing ``_``, a character outside ASCII becomes ``_<hex>_``.

    >>> isl_name("n"), isl_name("max"), isl_name("größe")
    ('n', 'max_', 'gr_f6__df_e')
    """
    out = "".join(c if c.isascii() else f"_{ord(c):x}_" for c in name)
    return out + "_" if out in ISL_KEYWORDS else out


def params_prefix(params: tuple[str, ...] | list[str]) -> str:
    return f"[{', '.join(params)}] -> " if params else ""


def with_params(params: tuple[str, ...] | list[str], text: str) -> str:
    """``text`` naming the parameters ``params`` unless it names its own (the texts kept in
    statements and loop trees leave them out; isl aligns parameters by name).

    >>> with_params(("n",), "{ S[i] : 0 <= i < n }"), with_params(("n",), "[m] -> { [0] }")
    ('[n] -> { S[i] : 0 <= i < n }', '[m] -> { [0] }')
    """
    return text if text.lstrip().startswith("[") else params_prefix(params) + text


def map_in(params: tuple[str, ...] | list[str], text) -> isl.Map:
    """``map_`` of ``text`` with the parameters ``params`` (``with_params``); a loop
    expression (``loop_expr.LoopExpr``, which imports this module) gives its own map."""
    if not isinstance(text, str):
        return text.map(params)
    return map_(with_params(params, text))


class NotAffine(Exception):
    """An expression that isl cannot represent (loads, floats, products of variables)."""


def expr_to_isl(e: Expr) -> str:
    """Quasi-affine text of an integer expression, or raise NotAffine.

    >>> expr_to_isl(Var("i") // 8)   # doctest: +SKIP
    'floor((i)/8)'
    """
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Const):
        if isinstance(e.value, bool) or not isinstance(e.value, int):
            raise NotAffine(e)
        return str(e.value)  # isl rejects "(-4) * x" but reads "-4 * x"
    if isinstance(e, Unary) and e.op is UnaryKind.NEG:
        return f"(-{expr_to_isl(e.operand)})"
    if isinstance(e, BinOp):
        a, b = e.lhs, e.rhs
        if e.op is BinOpKind.ADD:
            return f"({expr_to_isl(a)} + {expr_to_isl(b)})"
        if e.op is BinOpKind.SUB:
            return f"({expr_to_isl(a)} - {expr_to_isl(b)})"
        if e.op is BinOpKind.MUL:
            if isinstance(b, Const):
                a, b = b, a
            if isinstance(a, Const):
                return f"({expr_to_isl(a)} * {expr_to_isl(b)})"
            raise NotAffine(e)
        if e.op in (BinOpKind.FLOORDIV, BinOpKind.MOD) and _positive_const(b):
            op = "floor(({})/{})" if e.op is BinOpKind.FLOORDIV else "(({}) mod {})"
            return op.format(expr_to_isl(a), b.value)  # type: ignore[union-attr]
        if e.op in (BinOpKind.MIN, BinOpKind.MAX):
            return f"{e.op.value}({expr_to_isl(a)}, {expr_to_isl(b)})"
    raise NotAffine(e)


def _positive_const(e: Expr) -> bool:
    return isinstance(e, Const) and isinstance(e.value, int) and e.value > 0


def is_affine(e: Expr) -> bool:
    try:
        expr_to_isl(e)
        return True
    except NotAffine:
        return False


def tuple_name(s: isl.Set | isl.Map, dim: isl.dim_type = isl.dim_type.set) -> str:
    return s.get_tuple_name(dim)


def point_values(p: isl.Point, n: int) -> tuple[int, ...]:
    return tuple(p.get_coordinate_val(isl.dim_type.set, k).to_python() for k in range(n))


def sample_assignment(s: isl.Set) -> dict[str, int]:
    """One point of s with its parameters, as {name: value} (params first, then dims)."""
    p = s.sample_point()
    out: dict[str, int] = {}
    for k in range(s.dim(isl.dim_type.param)):
        out[s.get_dim_name(isl.dim_type.param, k)] = p.get_coordinate_val(
            isl.dim_type.param, k).to_python()
    for k in range(s.dim(isl.dim_type.set)):
        out[s.get_dim_name(isl.dim_type.set, k) or f"x{k}"] = p.get_coordinate_val(
            isl.dim_type.set, k).to_python()
    return out
