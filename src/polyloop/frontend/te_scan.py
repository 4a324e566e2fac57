# SPDX-License-Identifier: Apache-2.0
"""``pl.scan``: a recurrence along the first axis, as TVM's ``tvm.scan`` spells it.

``state`` is a placeholder standing for the result; ``init`` computes its first rows and
``update`` every later row from earlier rows of ``state`` (``state[t - 1, i]``). The result is
one tensor whose statements are the init rows and the update rows; the dependence between
rows is exact, so a schedule may parallelize the other axes but never reorder the rows.

>>> import polyloop as pl
>>> m, n = pl.var("m"), pl.var("n")
>>> X = pl.placeholder((m, n), "float32", name="X")
>>> s_state = pl.placeholder((m, n), "float32", name="s_state")
>>> s_init = pl.compute((1, n), lambda _, i: X[0, i], name="s_init")
>>> s_update = pl.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i], name="s_update")
>>> s = pl.scan(s_init, s_update, s_state, inputs=[X], name="s")
>>> [st.name for st in pl.to_program(s).statements]
['s_init', 's']
"""
from __future__ import annotations

import itertools
from typing import Sequence

from ..errors import PolyloopError
from ..ir.expr import Const, Expr, Load, Reduce, Var, rewrite, walk
from ..ir.simplify import simplify
from .te import Piece, Tensor, _counter
from .te_axes import _tensor_name


def scan(init: Tensor, update: Tensor, state: Tensor, inputs: Sequence[Tensor] | None = None,
         name: str | None = None) -> Tensor:
    """The tensor whose first ``init.shape[0]`` rows are ``init`` and whose later rows are
    ``update``, where ``update`` reads earlier rows through the placeholder ``state``.

    A running sum down the rows of ``X``:

    >>> import polyloop as pl
    >>> m, n = pl.var("m"), pl.var("n")
    >>> X = pl.placeholder((m, n), "float32", name="X")
    >>> state = pl.placeholder((m, n), "float32", name="state")
    >>> init = pl.compute((1, n), lambda _, i: X[0, i], name="init")
    >>> update = pl.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="update")
    >>> print(pl.Schedule(pl.scan(init, update, state, inputs=[X], name="s")))
    if m >= 1:
        for i in range(n):
            s[0, i] = X[0, i]
    for t in range(1, m):
        for i in range(n):
            s[t, i] = s[t - 1, i] + X[t, i]
    """
    _check_shapes(init, update, state)
    result = _tensor_name(name, "scan")

    def renamed(body: Expr) -> Expr:
        return rewrite(body, lambda e: Load(result, e.indices, e.dtype)
                       if isinstance(e, Load) and e.buffer == state.name else None)

    _check_reads(update, state)
    pieces = (Piece(init.body, init.iters, Const(0, state.shape[0].dtype, True), init.shape[0]),
              Piece(renamed(update.body), update.iters, init.shape[0], state.shape[0]))
    reads = [t for t in itertools.chain(init.inputs, update.inputs) if t is not state]
    for t in inputs or ():
        if not any(t is r for r in reads):
            raise PolyloopError(f"scan: inputs= lists '{t.name}', which neither init nor update "
                                "reads; list the tensors the recurrence reads")
    return Tensor(result, state.shape, state.dtype, next(_counter), pieces[1].body,
                  update.iters, tuple(dict.fromkeys(reads)), pieces)


def _check_shapes(init: Tensor, update: Tensor, state: Tensor) -> None:
    for t, what in ((init, "init"), (update, "update"), (state, "state")):
        if not isinstance(t, Tensor):
            raise PolyloopError(f"scan: {what} must be a tensor, got {t!r}")
    if not state.is_placeholder:
        raise PolyloopError(f"scan: state '{state.name}' must be a pl.placeholder standing for "
                            "the result")
    for t, what in ((init, "init"), (update, "update")):
        if t.is_placeholder or isinstance(t.body, Reduce):
            raise PolyloopError(f"scan: {what} '{t.name}' must be a pl.compute without a "
                                "reduction at its top; compute the reduction as its own tensor")
        if t.dtype is not state.dtype or t.ndim != state.ndim or state.ndim == 0:
            raise PolyloopError(f"scan: {what} '{t.name}' is {t.dtype} with {t.ndim} axes; it "
                                f"must match state '{state.name}' ({state.dtype}, {state.ndim} "
                                "axes, the first one the scan axis)")
    if [str(d) for d in init.shape[1:]] != [str(d) for d in state.shape[1:]]:
        raise PolyloopError(f"scan: init '{init.name}' must have the shape of state "
                            f"'{state.name}' after its first axis")


def _check_reads(update: Tensor, state: Tensor) -> None:
    """Every read of ``state`` is of an earlier row, ``state[t - c, ...]`` with ``c >= 1``."""
    t = Var(update.iters[0])
    for ld in walk(update.body):
        if not (isinstance(ld, Load) and ld.buffer == state.name):
            continue
        back = simplify(t - ld.indices[0])
        if not (isinstance(back, Const) and isinstance(back.value, int) and back.value >= 1):
            raise PolyloopError(
                f"scan: update '{update.name}' reads {ld}; a row of state '{state.name}' may "
                f"only be read by later rows: index its first axis as {t.name} - 1 (or "
                f"{t.name} - c for a constant c >= 1)")
