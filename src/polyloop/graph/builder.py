# SPDX-License-Identifier: Apache-2.0
"""GraphBuilder: write a graph by hand, one operator call at a time (importers use it too)."""
from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import PolyloopError
from .ir import (Binding, Call, Constant, Dim, ExternCall, Graph, Op, SizeRule, TensorType,
                 Value)
from .kinds import BinaryFn
from .oplib.custom import call_te, te_dim
from .reference import evaluate
from .shapes import ATTR_DEFAULTS, infer

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DTYPES = ("float32", "float64", "int32", "int64", "bool", "int8", "uint8", "int16", "float16")


def _freeze(v: object) -> object:
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


def clean_name(name: str) -> str:
    """A C-identifier version of an arbitrary name (``layer1.0.conv`` -> ``layer1_0_conv``)."""
    s = re.sub(r"[^A-Za-z0-9_]", "_", name) or "v"
    return s if not s[0].isdigit() else f"v{s}"


def copy_graph(sub: Graph, bound: Sequence[tuple[Value, Value]], fresh: Callable[[str], str],
               what: str) -> tuple[list[Constant], list[Call], list[Value]]:
    """(the constants and calls of ``sub``, its outputs) with each value renamed
    ``fresh(name)``, except each value of ``sub`` paired in ``bound`` with a value of another
    graph: that value replaces it and must have the same type (``what`` names the copy in the
    error)."""
    values: dict[str, Value] = {}
    for mine, v in bound:
        if mine.type != v.type:
            raise PolyloopError(f"{what}: %{mine.name} is {mine.type}, the graph's %{v.name} "
                                f"is {v.type}")
        values[mine.name] = v

    def rename(v: Value) -> Value:
        if v.name not in values:
            values[v.name] = Value(fresh(v.name), v.type)
        return values[v.name]
    constants = [Constant(rename(c.value), c.data) for c in sub.constants]
    calls = []
    for b in sub.bindings:
        if not isinstance(b, Call):
            raise PolyloopError(f"{what}: the copied graph holds {b.callee()}; only operator "
                                "calls can be copied")
        calls.append(Call(tuple(rename(v) for v in b.outputs), b.op,
                          tuple(rename(v) for v in b.inputs), b.attrs))
    return constants, calls, [rename(v) for v in sub.outputs]


class GraphBuilder:
    """Build a ``Graph``: inputs, constants and operator calls, each result typed on the spot.
    With ``fold=True`` a call whose inputs are all constants is computed now (when NumPy can:
    ``graph.reference``) and becomes a constant.

    >>> import numpy as np, polyloop as pl
    >>> b = pl.graph.GraphBuilder("mlp")
    >>> x = b.input("x", ("batch", 3))
    >>> w = b.constant(np.ones((2, 3), "float32"), "w")
    >>> y = b.emit(pl.graph.Op.LINEAR, x, w)
    >>> print(b.build(b.emit(pl.graph.Op.RELU, y)).outputs[0].type)
    float32[batch, 2]
    """

    def __init__(self, name: str = "main", *, fold: bool = False) -> None:
        self.name = clean_name(name)
        self.fold = fold
        self._inputs: list[Value] = []
        self._constants: list[Constant] = []
        self._bindings: list[Binding] = []
        self._names: set[str] = set()
        self._rules: dict[str, SizeRule] = {}
        self._data: dict[str, np.ndarray] = {}

    def fresh(self, hint: str) -> str:
        base = clean_name(hint)
        name, k = base, 1
        while name in self._names:
            name, k = f"{base}_{k}", k + 1
        self._names.add(name)
        return name

    def input(self, name: str, shape: tuple[Dim, ...], dtype: str = "float32") -> Value:
        """A graph input; a dimension is an int or a size-parameter name such as ``"batch"``."""
        if dtype not in DTYPES:
            raise PolyloopError(f"input {name!r}: dtype {dtype!r} is not supported; use one of "
                                f"{', '.join(DTYPES)}")
        for d in shape:
            if isinstance(d, str) and not _NAME.fullmatch(d):
                raise PolyloopError(f"input {name!r}: size parameter {d!r} is not an identifier")
        v = Value(self.fresh(name), TensorType(tuple(_freeze(d) for d in shape), dtype))
        self._inputs.append(v)
        return v

    def constant(self, data: object, name: str = "const") -> Value:
        """A weight (any array-like; float64 data stays float64, Python floats become float32)."""
        arr = np.asarray(data)
        if arr.dtype == np.float64 and not isinstance(data, np.ndarray):
            arr = arr.astype(np.float32)
        if arr.dtype.name not in DTYPES:
            arr = arr.astype(np.int64 if arr.dtype.kind in "iub" else np.float32)
        arr = np.require(arr, requirements="C")     # keeps a 0-d array 0-d
        v = Value(self.fresh(name), TensorType(tuple(int(d) for d in arr.shape), arr.dtype.name))
        self._constants.append(Constant(v, arr))
        self._data[v.name] = arr
        return v

    def data(self, v: Value) -> np.ndarray | None:
        """The array of a constant value, else None."""
        return self._data.get(v.name)

    def emit(self, op: Op, *inputs: Value, name: str | None = None, **attrs: object) -> Value:
        """Append ``op(*inputs, **attrs)``; returns its (typed) result."""
        frozen = {**ATTR_DEFAULTS.get(op, {}), **{k: _freeze(v) for k, v in attrs.items()}}
        out_type = infer(op, tuple(v.type for v in inputs), frozen)
        if self.fold and 0 in out_type.shape:      # no elements: nothing to compute
            return self.constant(np.zeros(out_type.shape, out_type.dtype), name or str(op))
        if self.fold and inputs and all(v.name in self._data for v in inputs):
            value = evaluate(op, [self._data[v.name] for v in inputs], frozen, out_type)
            if value is not None:
                return self.constant(value, name or str(op))
        out = Value(self.fresh(name or str(op)), out_type)
        self._bindings.append(Call((out,), op, tuple(inputs), tuple(sorted(frozen.items()))))
        return out

    def arange(self, length: Dim, dtype: str, start: float = 0, step: float = 1,
               name: str = "arange") -> Value:
        """``start + step * k`` for ``k`` in ``[0, length)`` as a 1-D tensor; ``length`` may be
        a size parameter (the positions of a sequence): a running sum of ones.

        >>> b = GraphBuilder("a"); x = b.input("x", ("n",)); b.arange("n", "int64").type
        TensorType(shape=('n',), dtype='int64')
        """
        ones = self.emit(Op.BROADCAST_TO, self.constant(np.array([1], dtype), f"{name}_1"),
                         shape=(length,), name=f"{name}_1")
        out = self.emit(Op.CUMSUM, ones, axis=0, exclusive=True, name=f"{name}_count")
        if step != 1:
            out = self.emit(Op.BINARY, out, self.constant(np.array(step, dtype), f"{name}_s"),
                            fn=BinaryFn.MUL, name=f"{name}_step")
        if start != 0:
            out = self.emit(Op.BINARY, out, self.constant(np.array(start, dtype), f"{name}_o"),
                            fn=BinaryFn.ADD, name=f"{name}_start")
        return out

    def emit_te(self, fn, *inputs: Value, name: str | None = None) -> Value:
        """Append a kernel written with tensor expressions: ``fn(*te_tensors)`` returns the
        result tensor (as seed 001's ``emit_te``). The program's text is part of the call, so
        a changed function never reuses a cached build.

        >>> import polyloop as pl
        >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", ("n", 4))
        >>> y = b.emit_te(lambda t: pl.compute(t.shape, lambda i, j: t[i, j] * 2.0), x)
        >>> print(y.type)
        float32[n, 4]
        """
        result = call_te(fn, inputs)
        digest = hashlib.sha256(str(result.to_program()).encode()).hexdigest()[:16]
        shape = tuple(te_dim(d) for d in result.shape)
        out = Value(self.fresh(name or "te"), TensorType(shape, str(result.dtype)))
        self._bindings.append(Call((out,), Op.TE, tuple(inputs),
                                   (("fn", fn), ("program", digest))))
        return out

    def emit_extern(self, extern: str, *inputs: Value, out_type: TensorType,
                    name: str | None = None) -> Value:
        """Append a call of the extern function registered as ``extern``."""
        out = Value(self.fresh(name or extern.rpartition(".")[2]), out_type)
        self._bindings.append(ExternCall((out,), extern, tuple(inputs)))
        return out

    def emit_foreign(self, reference: object, inputs: tuple[Value, ...],
                     out_types: tuple[TensorType, ...], name: str | None = None
                     ) -> tuple[Value, ...]:
        """Append a call the graph IR has no operator for, typed by the importer
        (``reference``: a ``graph.foreign.Reference``); ``build(fallback=...)`` runs it through
        the reference's implementation or refuses it."""
        hint = name or reference.op.split(".")[1 if reference.op.count(".") else 0]
        outs = tuple(Value(self.fresh(hint if k == 0 else f"{hint}_{k}"), t)
                     for k, t in enumerate(out_types))
        self._bindings.append(Call(outs, Op.FOREIGN, tuple(inputs),
                                   (("op", reference.op), ("reference", reference))))
        return outs

    def inline(self, sub: Graph, inputs: Sequence[Value], name: str) -> tuple[Value, ...]:
        """Append the constants and calls of ``sub`` (a graph of operator calls) reading
        ``inputs`` (each of the type of ``sub``'s input in its place), its values renamed
        ``name_<value>``; returns ``sub``'s outputs.

        >>> import polyloop as pl
        >>> s = pl.graph.GraphBuilder("double"); t = s.input("t", (3,))
        >>> sub = s.build(s.emit(pl.graph.Op.ADD, t, t))
        >>> b = pl.graph.GraphBuilder("m"); x = b.input("x", (3,))
        >>> (y,) = b.inline(sub, [x], "twice"); print(y.name, y.type)
        twice_add float32[3]
        """
        if len(inputs) != len(sub.inputs):
            raise PolyloopError(f"inline {sub.name}: it takes {len(sub.inputs)} inputs, got "
                                f"{len(inputs)}")
        constants, calls, outputs = copy_graph(sub, list(zip(sub.inputs, inputs)),
                                               lambda v: self.fresh(f"{name}_{v}"),
                                               f"inline {sub.name}")
        for c in constants:
            self._constants.append(c)
            self._data[c.value.name] = c.data
        self._bindings.extend(calls)
        return tuple(outputs)

    def size_rule(self, rule: SizeRule) -> None:
        """Bound a size parameter, or define a derived one (see ``SizeRule``): a derived
        size's terms may only use sizes of the inputs or sizes derived before it."""
        if not _NAME.fullmatch(rule.name):
            raise PolyloopError(f"size parameter {rule.name!r} is not an identifier")
        known = {p for v in self._inputs for p in v.type.params} | set(self._rules)
        unknown = {n for _, names in rule.terms for n in names} - known
        if unknown:
            raise PolyloopError(f"derived size {rule.name!r} uses {sorted(unknown)}, which no "
                                "input's shape or earlier derived size defines")
        self._rules[rule.name] = rule

    def build(self, *outputs: Value) -> Graph:
        """The graph returning ``outputs``."""
        params: list[str] = []
        for v in self._inputs:
            params += [p for p in v.type.params if p not in params]
        params += [name for name, r in self._rules.items() if r.terms and name not in params]
        return Graph(self.name, tuple(self._inputs), tuple(self._constants),
                     tuple(self._bindings), tuple(outputs), tuple(params),
                     tuple(self._rules.values()))
