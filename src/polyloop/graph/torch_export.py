# SPDX-License-Identifier: Apache-2.0
"""Run ``torch.export`` on a module with the user's symbolic sizes, decompose the program to
functional core ATen, and name its size symbols after the user's size names (``torch_sizes``)."""
from __future__ import annotations

import contextlib
import inspect
import re

from ..errors import PolyloopError
from .torch_sizes import SizeNames

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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


def _spec(wanted: dict[int, dict[int, str]], count: int):
    """``torch.export``'s ``dynamic_shapes``: ``Dim.DYNAMIC`` for every named dimension, whose
    range torch infers from the model (a model that only works up to 512 tokens, or that
    branches on a size of 1, needs that); what a range cannot say torch records as a run-time
    assertion (``prefer_deferred_runtime_asserts_over_guards``), read by ``export_program``."""
    import torch
    return tuple({d: torch.export.Dim.DYNAMIC for d in wanted[k]} if k in wanted else None
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


@contextlib.contextmanager
def _size_oblivious(on: bool):
    """Trace with sizes that may be 1: by default ``torch.export`` assumes a dynamic size is
    neither 0 nor 1 (its "0/1 specialization") and the program it returns is checked for
    sizes of 2 or more only. Traced size-obliviously, a size may be 1 unless the model's code
    branches on it being 1 (then torch records the guard and the range starts at 2)."""
    import torch.fx.experimental._config as fx_config
    if not on or not hasattr(fx_config, "backed_size_oblivious"):
        yield
        return
    with fx_config.patch(backed_size_oblivious=True):
        yield


def _export(module, example_inputs: tuple, wanted: dict, keep_whole: tuple[str, ...]):
    import torch
    options = {}
    if wanted and "prefer_deferred_runtime_asserts_over_guards" in \
            inspect.signature(torch.export.export).parameters:
        options["prefer_deferred_runtime_asserts_over_guards"] = True
    try:
        with torch.no_grad(), _size_oblivious(bool(wanted)):
            ep = torch.export.export(module, example_inputs, dynamic_shapes=_spec(
                wanted, len(example_inputs)) if wanted else None, **options)
            return ep.run_decompositions(_decomposition_table(keep_whole))
    except PolyloopError:
        raise
    except Exception as e:  # torch.export raises many kinds (UserError, constraint violations)
        raise _trace_error(e) from None


def _size_symbols(ep, wanted: dict) -> tuple[dict[str, str], dict[str, int]]:
    """torch's symbol -> the user's size name, and each symbol's traced value."""
    import torch
    users = [n for n in ep.graph.nodes if n.op == "placeholder"
             and n.name in {s.arg.name for s in ep.graph_signature.input_specs
                            if s.kind.name == "USER_INPUT"}]
    names: dict[str, str] = {}
    examples: dict[str, int] = {}
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
            examples[str(expr)] = int(val.shape[d].node.hint)
    return names, examples


def export_program(module, example_inputs: tuple, *, batch: str | None, dynamic: dict | None,
                   keep_whole: tuple[str, ...]):
    """The exported, decomposed program of ``module`` and its sizes (``SizeNames``): their
    ranges from torch's, narrowed by the conditions torch recorded as run-time assertions."""
    try:
        import torch
    except ImportError:
        raise PolyloopError("from_torch needs PyTorch: pip install 'polyloop[graph]'") from None
    try:
        module = module.eval()
    except NotImplementedError:     # an exported graph (PT2E's convert_pt2e) has no modes
        pass
    wanted = _dynamic_shapes(module, example_inputs, batch, dynamic)
    ep = _export(module, example_inputs, wanted, keep_whole)
    names, examples = _size_symbols(ep, wanted)
    sizes = SizeNames(names, {}, examples)
    for sym, vr in ep.range_constraints.items():
        if str(sym) in names:
            sizes.bound(names[str(sym)], low=max(_bound(vr.lower) or 1, 1),
                        high=_bound(vr.upper))
    for n in ep.graph.nodes:
        if n.op == "call_function" and n.target is torch.ops.aten._assert_scalar.default:
            condition = n.args[0].meta["val"]
            if isinstance(condition, torch.SymBool):
                sizes.require(condition.node.expr, "torch.export found it while tracing")
    return ep, sizes
