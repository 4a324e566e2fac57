# SPDX-License-Identifier: Apache-2.0
"""Lowering: a scheduled program -> a target-independent Kernel (loop AST plus signature).

The pipeline is a list of named steps (``STEPS``); ``POLYLOOP_DUMP=lower`` prints the program
or loop nest after each, and an error raised inside a step names it.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import Callable, Generic, Mapping, Protocol, TypeVar

from .. import config
from ..errors import PolyloopError
from ..ir.expr import Expr
from ..ir.loops import Block, For, If, Kernel, Node, Store, iter_nodes, map_children
from ..ir.printer import loops_to_str
from ..ir.program import Buffer, BufferRole, Program
from ..poly.astgen import build_ast
from ..poly.hardware_ids import HardwareLoop
from ..poly.tree import Root
from ..ir.barriers import barrier_scope
from .barriers import explicit_barriers
from .storage import place_temporaries
from ..ir.simplify import simplify
from .guard_split import split_guarded_loops
from .init_fusion import fuse_reduction_inits
from .math_calls import math_calls_as_operators
from .names import kernel_name
from .normalize import normalize_loops
from .prefetch import apply_prefetch, mark_paths
from .promote import promote_registers
from .strength import canonical_divisions
from .tensorize import apply_tensorize


def _map_exprs(node: Node, fn: Callable[[Expr], Expr]) -> Node:
    if isinstance(node, For):
        return replace(node, start=fn(node.start), stop=fn(node.stop),
                       body=_map_exprs(node.body, fn))
    if isinstance(node, If):
        return If(fn(node.cond), _map_exprs(node.then, fn),
                  None if node.otherwise is None else _map_exprs(node.otherwise, fn))
    if isinstance(node, Block):
        return Block(tuple(_map_exprs(c, fn) for c in node.body))
    if isinstance(node, Store):
        return Store(node.buffer, tuple(fn(i) for i in node.indices), fn(node.value),
                     node.reduction, node.statement)
    return node


def _flatten(node: Node) -> Node:
    """Merge nested blocks so the printed code has no empty scopes."""
    if isinstance(node, Block):
        out: list[Node] = []
        for c in node.body:
            c = _flatten(c)
            out.extend(c.body if isinstance(c, Block) else (c,))
        return out[0] if len(out) == 1 else Block(tuple(out))
    return map_children(node, _flatten)


@dataclass(frozen=True, slots=True)
class Lowering:
    """What the steps of ``lower`` pass on: the inputs, then the loop AST once isl built it."""
    program: Program
    root: Root
    compact: bool
    hardware: Mapping[int, HardwareLoop] | None
    gpu: bool = False
    temps: tuple[Buffer, ...] = ()
    notes: tuple[str, ...] = ()
    body: Node | None = None

    def text(self) -> str:
        """The program before isl built the loop AST, the loop AST after."""
        return str(self.program) if self.body is None else loops_to_str(self.body)


def _fuse_inits(s: Lowering) -> Lowering:
    """A reduction's initialisation nest written into its update's loops (``init_fusion``);
    CPU code only (a GPU launch per top-level nest keeps its own structure)."""
    if s.gpu or s.hardware:
        return s
    root, notes = fuse_reduction_inits(s.program, s.root)
    return replace(s, root=root, notes=s.notes + notes)


def _place_temporaries(s: Lowering) -> Lowering:
    if not s.compact:   # the caller placed them already
        temps = tuple(b for b in s.program.buffers if b.role is BufferRole.TEMP)
        return replace(s, temps=temps)
    program, temps, notes = place_temporaries(s.program, s.root)
    return replace(s, program=program, temps=tuple(temps), notes=s.notes + tuple(notes))


def _build_ast(s: Lowering) -> Lowering:
    body = build_ast(s.program, mark_paths(s.root), isolate=True, hardware=s.hardware)
    return replace(s, body=body)


def _on_body(fn: Callable[[Node], Node]) -> Callable[[Lowering], Lowering]:
    return lambda s: replace(s, body=fn(s.body))  # type: ignore[arg-type]


class Stage(Protocol):
    """What a list of steps passes on: anything that prints itself for the dump."""

    def text(self) -> str: ...


S = TypeVar("S", bound=Stage)


@dataclass(frozen=True, slots=True)
class Step(Generic[S]):
    """One named step of a lowering pipeline (``STEPS`` here, ``launches.DEVICE_STEPS``)."""
    name: str
    run: Callable[[S], S]


# In order. tensorize runs after simplify (it reads isl's loop bounds); prefetch after
# tensorize (its nests stay intact).
STEPS: tuple[Step[Lowering], ...] = (
    Step("fuse reduction inits", lambda s: _fuse_inits(s)),
    Step("place temporaries", _place_temporaries),
    Step("build loop AST", _build_ast),
    Step("explicit barriers", lambda s: replace(
        s, body=explicit_barriers(s.program, s.root, s.body, gpu=s.gpu),  # type: ignore[arg-type]
        temps=tuple(b for b in s.temps if barrier_scope(b.name) is None))),
    Step("simplify", _on_body(lambda n: _map_exprs(n, simplify))),
    Step("canonical divisions", _on_body(lambda n: _map_exprs(n, canonical_divisions))),
    Step("flatten", _on_body(_flatten)),
    Step("tensorize", lambda s: replace(s, body=apply_tensorize(s.program, s.root, s.body))),
    Step("prefetch", lambda s: replace(s, body=apply_prefetch(s.program, s.root, s.body))),
    Step("normalize loops", _on_body(normalize_loops)),
    Step("math library calls", _on_body(math_calls_as_operators)),
    Step("promote registers", lambda s: _promote(s)),
    Step("split guarded loops", _on_body(split_guarded_loops)),
)


def run_steps(state: S, steps: tuple[Step[S], ...]) -> S:
    """``state`` after each of ``steps``; with ``POLYLOOP_DUMP=lower`` each result is printed
    to stderr. An error inside a step says which step it was."""
    dump = "lower" in config.CONFIG.dump
    for step in steps:
        try:
            state = step.run(state)
        except PolyloopError as e:
            e.add_note(f"raised in lowering step '{step.name}'")
            raise
        except Exception as e:  # a bug in a step must say which step
            raise PolyloopError(f"lowering step '{step.name}' failed: "
                                f"{type(e).__name__}: {e}") from e
        if dump:
            print(f"# --- after {step.name}\n{state.text()}", file=sys.stderr)
    return state


def lower(program: Program, root: Root, *, name: str | None = None,
          compact: bool = True, hardware: Mapping[int, HardwareLoop] | None = None,
          gpu: bool = False) -> Kernel:
    """The Kernel for ``program`` scheduled by the loop tree ``root``, made by ``STEPS``. With
    ``compact=False`` the temporaries are taken as they are (a caller that placed them
    already). ``hardware``: the loops a GPU runs as work-groups and work-items, which isl does
    not generate (``poly.astgen.build_ast``). GPU targets call it once per launch
    (``launches.lower_device``). ``gpu``: explicit barriers become ``Barrier`` nodes (else
    they are dropped).

    >>> import polyloop as pl
    >>> from polyloop.ir.printer import loops_to_str
    >>> A = pl.placeholder((10,), "float32", name="A")
    >>> B = pl.compute((10,), lambda i: A[i] + 1.0, name="B")
    >>> sch = pl.Schedule(B)
    >>> print(loops_to_str(lower(sch.program, sch.state.root).body))
    for i in range(10):
        B[i] = A[i] + 1.0
    >>> [step.name for step in STEPS][:3]
    ['fuse reduction inits', 'place temporaries', 'build loop AST']
    """
    done = run_steps(Lowering(program, root, compact, hardware, gpu), STEPS)
    program = done.program
    kname = kernel_name(name or program.name, {b.name for b in program.buffers}
                        | set(program.params) | {t.name for t in done.temps})
    return Kernel(kname, tuple(program.arg_buffers()), program.params, done.temps,
                  done.body, done.notes)  # type: ignore[arg-type]


def _promote(s: Lowering) -> Lowering:
    """Accumulators kept in registers across inner loops (``promote.promote_registers``): the
    registers join the temporaries, and what was promoted joins the notes."""
    program, body = s.program, s.body
    taken = {b.name for b in program.buffers} | set(program.params) | _loop_vars(body)
    body, registers, promoted = promote_registers(body, {b.name: b for b in program.buffers},
                                                  taken)
    return replace(s, body=body, temps=s.temps + tuple(registers),
                   notes=s.notes + tuple(p.describe() for p in promoted))


def _loop_vars(body: Node | None) -> set[str]:
    return {n.var for n in iter_nodes(body) if isinstance(n, For)} if body is not None else set()
