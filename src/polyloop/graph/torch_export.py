# SPDX-License-Identifier: Apache-2.0
"""Run ``torch.export`` on a module with the user's symbolic sizes, decompose the program to
functional core ATen, and name its size symbols after the user's size names."""
from __future__ import annotations

import inspect
import re

from ..errors import PolyloopError
from .ir import Dim, SizeRule

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SizeNames:
    """``torch.export``'s size symbols (``s0``...) and the size parameters they stand for; a
    size computed from them (``s0*s1`` after a reshape) becomes a derived size parameter."""

    def __init__(self, names: dict[str, str], ranges: dict[str, tuple[int, int | None]]) -> None:
        self.names = names
        self.ranges = ranges
        self.derived: dict[str, SizeRule] = {}
        self._by_expr: dict[str, str] = {}

    def dim(self, d: object) -> Dim:
        """A dimension of the graph (an int or a size parameter) from an int or a SymInt."""
        if isinstance(d, (int, str)):
            return d
        expr = d.node.expr if hasattr(d, "node") else d
        if expr.is_number:
            return int(expr)
        if expr.is_Symbol and str(expr) in self.names:
            return self.names[str(expr)]
        return self._derive(expr)

    def _derive(self, expr) -> str:
        import sympy
        key = str(expr)
        if key in self._by_expr:
            return self._by_expr[key]
        symbols = sorted(expr.free_symbols, key=str)
        text = _describe(expr, self.names)
        if any(str(s) not in self.names for s in symbols):
            raise PolyloopError(f"the size {text} depends on a size that is not named; only "
                                "sizes named in dynamic= (or batch=) may vary")
        try:
            poly = sympy.Poly(expr, *symbols)
        except sympy.PolynomialError:
            poly = None
        if poly is None or any(not c.is_Integer for c in poly.coeffs()):
            raise PolyloopError(f"the size {text} is not a polynomial with integer "
                                "coefficients of the named sizes; polyloop cannot follow it")
        terms = tuple((int(c), tuple(self.names[str(s)] for s, e in zip(symbols, m)
                                     for _ in range(e)))
                      for m, c in poly.terms())
        name = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9]", "_", text.replace("*", "_x_")
                                         .replace("+", "_p_").replace("-", "_m_"))).strip("_")
        while name in self.derived or name in self.names.values():
            name += "_"
        self.derived[name] = SizeRule(name, 1, None, terms)
        self._by_expr[key] = name
        return name

    def rules(self) -> list[SizeRule]:
        """The ranges of the named sizes, then the derived sizes, in the order they appeared."""
        named = [SizeRule(name, lo, hi) for name, (lo, hi) in self.ranges.items()]
        return named + list(self.derived.values())


def _describe(expr, names: dict[str, str]) -> str:
    text = str(expr)
    for sym, name in names.items():
        text = re.sub(rf"\b{sym}\b", name, text)
    return text


def _dynamic_shapes(module, example_inputs: tuple, batch: str | None, dynamic: dict | None):
    """The ``dynamic_shapes`` argument of ``torch.export`` (None when every size is fixed) and
    the (input position, dimension) -> name map it stands for."""
    import torch
    params = list(inspect.signature(module.forward).parameters)
    wanted: dict[int, dict[int, str]] = {}
    if batch is not None:
        wanted = {k: {0: batch} for k, x in enumerate(example_inputs)
                  if isinstance(x, torch.Tensor) and x.dim() > 0}
    for key, dims in (dynamic or {}).items():
        k = params.index(key) if key in params else None
        if k is None or k >= len(example_inputs) or not isinstance(example_inputs[k],
                                                                     torch.Tensor):
            raise PolyloopError(f"from_torch(dynamic=...): {key!r} is not a tensor input of "
                                f"the model's forward; its inputs are "
                                f"{', '.join(params[:len(example_inputs)])}")
        for d, name in dict(dims).items():
            rank = example_inputs[k].dim()
            if not isinstance(d, int) or not -rank <= d < rank:
                raise PolyloopError(f"from_torch(dynamic=...): input {key!r} has {rank} "
                                    f"dimensions, {d!r} is not one of them")
            wanted.setdefault(k, {})[d % rank] = name
    for dims in wanted.values():
        for d, name in dims.items():
            if not isinstance(name, str) or not _NAME.fullmatch(name):
                raise PolyloopError(f"from_torch: the size name {name!r} is not an identifier")
    return wanted


def _spec(wanted: dict[int, dict[int, str]], count: int, *, named: bool):
    """``torch.export``'s ``dynamic_shapes``: one ``Dim`` per name, at least 1 (``named``), or
    ``Dim.DYNAMIC`` everywhere, whose range torch infers from the model (a model that only
    works up to 512 tokens, or that branches on a size of 1, needs that)."""
    import torch
    Dim = torch.export.Dim
    objects = {name: Dim(name, min=1) if named else Dim.DYNAMIC
               for dims in wanted.values() for name in dims.values()}
    return tuple({d: objects[n] for d, n in wanted[k].items()} if k in wanted else None
                 for k in range(count))


def _decomposition_table(keep_whole: tuple[str, ...]):
    import torch
    table = torch.export.default_decompositions()
    for name in keep_whole:
        packet = getattr(torch.ops.aten, name)
        for overload in packet.overloads():
            table.pop(getattr(packet, overload), None)
    return table


def _bound(b) -> int | None:
    """A finite bound of a size's range as an int (None: unbounded)."""
    try:
        return int(b) if b.is_number and b.is_finite else None
    except (TypeError, AttributeError, ValueError):
        return None


def _trace_error(e: Exception) -> PolyloopError:
    text = str(e).strip().splitlines()
    head = "\n".join(text[:12])
    return PolyloopError(f"torch.export could not trace the model ({type(e).__name__}): {head}")


def export_program(module, example_inputs: tuple, *, batch: str | None, dynamic: dict | None,
                   keep_whole: tuple[str, ...]):
    """The exported, decomposed program of ``module`` and its size names."""
    try:
        import torch
    except ImportError:
        raise PolyloopError("from_torch needs PyTorch: pip install 'polyloop[graph]'") from None
    module = module.eval()
    wanted = _dynamic_shapes(module, example_inputs, batch, dynamic)
    try:
        with torch.no_grad():
            try:
                ep = torch.export.export(module, example_inputs, dynamic_shapes=_spec(
                    wanted, len(example_inputs), named=True) if wanted else None)
            except torch._dynamo.exc.UserError:
                if not wanted:
                    raise
                ep = torch.export.export(module, example_inputs, dynamic_shapes=_spec(
                    wanted, len(example_inputs), named=False))
        ep = ep.run_decompositions(_decomposition_table(keep_whole))
    except PolyloopError:
        raise
    except Exception as e:  # torch.export raises many kinds (UserError, constraint violations)
        raise _trace_error(e) from None
    users = [n for n in ep.graph.nodes if n.op == "placeholder"
             and n.name in {s.arg.name for s in ep.graph_signature.input_specs
                            if s.kind.name == "USER_INPUT"}]
    names: dict[str, str] = {}
    for k, dims in wanted.items():
        val = users[k].meta["val"]
        for d, name in dims.items():
            expr = val.shape[d].node.expr if isinstance(val.shape[d], torch.SymInt) else None
            if expr is None or not expr.is_Symbol:
                raise PolyloopError(f"from_torch: dimension {d} of input '{users[k].name}' "
                                    f"cannot vary: torch.export fixed it to {val.shape[d]}")
            if names.get(str(expr), name) != name:
                raise PolyloopError(f"from_torch: sizes {names[str(expr)]!r} and {name!r} are "
                                    "always equal in this model; give them one name")
            names[str(expr)] = name
    ranges: dict[str, tuple[int, int | None]] = {}
    for sym, vr in ep.range_constraints.items():
        name = names.get(str(sym))
        if name is None:
            continue
        lo, hi = _bound(vr.lower) or 1, _bound(vr.upper)
        old_lo, old_hi = ranges.get(name, (1, None))
        ranges[name] = (max(lo, old_lo), hi if old_hi is None else
                        (old_hi if hi is None else min(hi, old_hi)))
    return ep, SizeNames(names, ranges)
