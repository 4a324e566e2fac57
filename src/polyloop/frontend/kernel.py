# SPDX-License-Identifier: Apache-2.0
"""``pl.make_kernel``: a kernel from loop domains (ISL sets) and instructions (Loo.py style).

>>> import polyloop as pl
>>> knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")
>>> print(knl.program.statements[0].domain)
[n] -> { insn[i] : 0 <= i < n }

Instructions run like the loop program they spell: consecutive instructions share the loops
of their common leading inames (in the order the domains declare them), so the seed's
Cholesky-like Fortran nest is written with one instruction per statement and nested domains.
The result is a :class:`LoopKernel`: the Program plus its loop tree; transformations
(``pl.split_iname``, ``pl.tag_inames``, ...) return new kernels and ``pl.build`` compiles one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import ParseError, foreign_errors
from ..ir.printer import loops_to_str
from ..ir.program import Program
from ..poly import kernel_domains as kd
from ..poly.astgen import build_ast
from ..poly.order import original_tree
from .kernel_args import ArrayArg, ValueArg
from .kernel_builder import Builder
from .kernel_exprs import KernelRule
from .kernel_lines import Instruction, parse_kernel_text


@dataclass(frozen=True, slots=True, eq=False)
class LoopKernel:
    """A kernel as written (``program``, whose ``nesting`` is the loop nest of the instructions)
    and, once transformed, the schedule the transformations built (``schedule``, a
    ``pl.Schedule``) with their history.

    >>> import polyloop as pl
    >>> knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")
    >>> type(knl).__name__, knl.domains, knl.schedule is None
    ('LoopKernel', ('{ [i] : 0 <= i < n }',), True)
    >>> knl = pl.split_iname(knl, "i", 4)
    >>> [step[0] for step in knl.history], type(knl.schedule).__name__
    (['split_iname'], 'Schedule')
    >>> print(knl.loops())
    for i_outer in range((n - 1) // 4 + 1):
        for i_inner in range(min(4, n - 4 * i_outer)):
            out[4 * i_outer + i_inner] = 2.0 * a[4 * i_outer + i_inner]
    """
    program: Program
    domains: tuple[str, ...]
    instructions: tuple[Instruction, ...]
    schedule: Any = None
    history: tuple[tuple[str, tuple, tuple], ...] = ()
    # the transformations' own state: the schedule without loop kinds and the tags by loop id
    plain: Any = field(default=None, repr=False)
    tags: tuple[tuple[int, Any], ...] = field(default=(), repr=False)
    # substitution rules, expanded in ``program``; ``pl.precompute`` materialises one
    rules: tuple[KernelRule, ...] = ()

    @property
    def name(self) -> str:
        return self.program.name

    def loops(self) -> str:
        """The loop nest as Python-like text (transformed when a schedule is attached)."""
        if self.schedule is not None:
            return str(self.schedule)
        return loops_to_str(build_ast(self.program, original_tree(self.program)[0]))

    def __str__(self) -> str:
        lines = [f"kernel {self.name}", "domains:"]
        lines += [f"  {d}" for d in self.domains]
        lines.append("instructions:")
        lines += [f"  {r.text.strip()}" for r in self.rules]
        lines += [f"  {ins.text}" for ins in self.instructions]
        if self.program.assumptions:
            lines.append(f"assumptions: {self.program.assumptions}")
        lines.append("loops:")
        lines += ["  " + x for x in self.loops().splitlines()]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<LoopKernel {self.name}: {len(self.instructions)} instructions, " \
               f"{len(self.history)} transformations>"


@foreign_errors("make_kernel")
def make_kernel(domains: str | Sequence[str], instructions: str | Sequence[str],
                args: Sequence[ArrayArg | ValueArg | Any] | None = None, *,
                assumptions: str | None = None, name: str | None = None) -> LoopKernel:
    """A kernel from loop domains in ISL syntax and instructions, one per line.

    >>> knl = make_kernel("{ [i, j] : 0 <= i < n and 0 <= j < m }",
    ...                   "out[j, i] = a[i, j]  {id=transpose}")
    >>> sorted((b.name, b.role.value, [str(d) for d in b.shape]) for b in knl.program.buffers)
    [('a', 'input', ['n', 'm']), ('out', 'output', ['m', 'n'])]
    """
    domains = _texts(domains, "loop domains", "'{ [i] : 0 <= i < n }'")
    instructions = _texts(instructions, "instructions", "'out[i] = 2*a[i]'")
    doms = kd.parse_domains(domains)
    text = parse_kernel_text(instructions)
    insns = list(text.instructions)
    decl = _declarations(args or ())
    builder = Builder(doms, insns, decl, assumptions or "", text.rules)
    program = builder.build(name or _default_name(insns))
    dom_texts = (domains,) if isinstance(domains, str) else tuple(domains)
    return LoopKernel(program, dom_texts, tuple(insns), rules=builder.kernel_rules())


def _texts(value: object, what: str, example: str) -> str | tuple[str, ...]:
    """``value`` as text or a tuple of texts (bytes are read as UTF-8), or a ParseError."""
    def text(v: object) -> str:
        if isinstance(v, (bytes, bytearray)):
            try:
                return bytes(v).decode("utf-8")
            except UnicodeDecodeError as e:
                raise ParseError(f"make_kernel: {what} are not UTF-8 text: byte {e.start} is "
                                 f"{bytes(v)[e.start:e.start + 1]!r}; pass a str") from None
        if isinstance(v, str):
            return v
        raise ParseError(f"make_kernel: {what} must be a string or a list of strings, like "
                         f"{example}; got {type(v).__name__} {v!r:.80}")
    if isinstance(value, (str, bytes, bytearray)):
        return text(value)
    if isinstance(value, (list, tuple)):
        return tuple(text(v) for v in value)
    return text(value)


def _default_name(insns: list[Instruction]) -> str:
    return "loopy_kernel" if len(insns) != 1 or not insns[0].explicit_id else insns[0].id


def _declarations(args: Sequence[Any]) -> dict[str, ArrayArg | ValueArg]:
    out: dict[str, ArrayArg | ValueArg] = {}
    for a in args:
        if a is Ellipsis:
            continue
        if not isinstance(a, (ArrayArg, ValueArg)):
            raise ParseError(f"args= takes pl.ArrayArg and pl.ValueArg, got {a!r}")
        if a.name in out:
            raise ParseError(f"argument '{a.name}' is declared twice in args=")
        out[a.name] = a
    return out


__all__ = ["ArrayArg", "LoopKernel", "ValueArg", "make_kernel"]
