# SPDX-License-Identifier: Apache-2.0
"""The builder of ``pl.make_kernel``: parsed domains and instructions to a Program and its loop
nest (name classification, dtype inference, reductions, buffer shapes)."""
from __future__ import annotations

from typing import Sequence

from ..errors import ParseError
from ..ir.dtypes import DType, as_dtype
from ..ir.expr import Expr, Load, Var, const, free_vars, reduce_identity, select
from ..ir.program import Buffer, BufferRole, MemScope, Program, Statement
from ..util.names import unique_name
from ..ir.simplify import simplify
from ..poly import kernel_domains as kd
from ..poly.isl_util import NotAffine
from .kernel_args import ArrayArg, ValueArg
from .kernel_barriers import barrier_array, barrier_loops, barrier_statement
from .kernel_exprs import (FUNCTIONS, Converter, KernelRule, Names, Reduction, RuleUse,
                           join_dtypes)
from .kernel_lines import Instruction, SubstRule
from .kernel_parse import ExprParser, SyntaxErrorAt, error_at, tokenize
from .kernel_program import (assign, nesting, privatized, reads_of, sharing_cap,
                             with_roles)


def parse_shape_entry(entry: object, params: set[str], array: str) -> Expr:
    """A declared extent: an int, a size parameter, an expression text like ``"n + 2"``."""
    if isinstance(entry, Expr):
        return entry
    if isinstance(entry, int) and not isinstance(entry, bool):
        return const(entry)
    if not isinstance(entry, str):
        raise ParseError(f"shape of '{array}': extents are ints or texts like 'n + 2', "
                         f"got {entry!r}")
    try:
        p = ExprParser(tokenize(entry))
        syn = p.expr()
        if p.tok.kind != "end":
            raise SyntaxErrorAt(p.tok.col, f"unexpected {p.tok.text!r}")
        names = Names(set(), params | {s.text for s in syn.walk() if s.kind == "name"}, {}, {})
        e = Converter(names).expr(syn)
    except SyntaxErrorAt as err:
        raise error_at(entry, 0, err.col, f"in the shape of '{array}': {err.message}") from None
    return e


class Builder:
    """Turns parsed domains and instructions into a Program and its loop tree."""

    def __init__(self, doms: list[kd.Domain], insns: list[Instruction],
                 decl: dict[str, ArrayArg | ValueArg], assumptions: str,
                 rules: Sequence[SubstRule] = ()):
        self.doms, self.insns, self.decl = doms, insns, decl
        self.rules = {r.name: r for r in rules}
        for r in rules:
            if r.name in FUNCTIONS:
                raise error_at(r.text, r.line, max(0, r.text.find(r.name)), f"'{r.name}' is a "
                               "function of the kernel language; give the substitution rule "
                               "another name")
        self.inames = {i for d in doms for i in d.inames}
        self.order = kd.iname_order(doms)
        params = kd.size_params(doms)
        params += [a.name for a in decl.values() if isinstance(a, ValueArg)
                   and as_dtype(a.dtype).is_int and a.name not in params]
        for a in decl.values():
            if isinstance(a, ArrayArg) and a.shape is not None:
                shape = a.shape if isinstance(a.shape, (tuple, list)) else (a.shape,)
                for s in shape:
                    if isinstance(s, str):
                        params += [t.text for t in tokenize(s) if t.kind == "name"
                                   and t.text not in params]
        self.params = params
        self.assumptions = assumptions
        self.names = self._classify()

    # names ---------------------------------------------------------------------------------------
    def _classify(self) -> Names:
        arrays: dict[str, int] = {}
        temps: dict[str, str] = {}
        scalars: set[str] = set()

        def note(name: str, ndim: int, ins: Instruction | SubstRule, col: int) -> None:
            if name in self.inames or name in self.params or name in self.rules:
                kind = "an iname" if name in self.inames else "a size parameter" \
                    if name in self.params else "a substitution rule"
                raise error_at(ins.text, ins.line, col, f"'{name}' is {kind}; it cannot be "
                               "assigned or indexed")
            if arrays.get(name, ndim) != ndim:
                raise error_at(ins.text, ins.line, col, f"'{name}' is used with {ndim} and with "
                               f"{arrays[name]} indices")
            arrays[name] = ndim
        for ins in self.insns:
            if ins.barrier is not None:
                continue
            col = ins.text.find(ins.target)
            note(ins.target, len(ins.indices), ins, max(col, 0))
            if ins.temporary is not None:
                temps[ins.target] = ins.temporary
            elif not ins.indices and not isinstance(self.decl.get(ins.target), ArrayArg):
                temps.setdefault(ins.target, "")
            for syn in (*ins.indices, ins.value, *ins.conditions):
                for s in syn.walk():
                    if s.kind == "subscript":
                        note(s.text, len(s.args), ins, s.col)
        for rule in self.rules.values():
            for s in rule.body.walk():
                if s.kind == "subscript" and s.text not in rule.params:
                    note(s.text, len(s.args), rule, s.col)
        for a in self.decl.values():
            if isinstance(a, ValueArg) and not as_dtype(a.dtype).is_int:
                arrays.setdefault(a.name, 0)
                scalars.add(a.name)
            elif isinstance(a, ArrayArg) and a.name not in arrays:
                ndim = len(a.shape) if isinstance(a.shape, (tuple, list)) else 1
                arrays[a.name] = ndim
        self.temps = temps
        dtypes: dict[str, DType | None] = {}
        read = {s.text for ins in self.insns for syn in (*ins.indices, ins.value, *ins.conditions)
                for s in syn.walk() if s.kind in ("subscript", "name")}
        read |= {s.text for r in self.rules.values() for s in r.body.walk()
                 if s.kind in ("subscript", "name") and s.text not in r.params}
        for n in arrays:
            d = self.decl.get(n)
            if d is not None and d.dtype is not None:
                dtypes[n] = as_dtype(d.dtype)
            elif n in temps and temps[n]:
                dtypes[n] = as_dtype(temps[n])
            else:
                # an argument the kernel reads holds the caller's data: float32 unless declared
                dtypes[n] = None if n in temps or n not in read else DType.FLOAT32
        return Names(self.inames, set(self.params), arrays, dtypes, scalars, dict(self.rules))

    def _infer_dtypes(self) -> None:
        unknown = [n for n, d in self.names.dtypes.items() if d is None]
        guess: dict[str, tuple[DType, bool] | None] = {n: None for n in unknown}
        for _ in range(len(unknown) + 2):
            cands: dict[str, tuple[DType, bool] | None] = {n: None for n in unknown}
            for ins in self.insns:
                if ins.target not in cands:
                    continue
                v = self._value(ins)
                e = v.source if isinstance(v, Reduction) else v
                cands[ins.target] = join_dtypes(cands[ins.target], (e.dtype, e.weak))
            if cands == guess:
                break
            guess = cands
            for n, g in cands.items():   # loads of names still inferred stay weak
                self.names.dtypes[n] = None
                self._weak[n] = g[0] if g else DType.INT64
        for n in unknown:
            g = guess[n]
            self.names.dtypes[n] = g[0] if g is not None else DType.FLOAT32

    # conversion ----------------------------------------------------------------------------------
    def _converter(self, uses: list[RuleUse] | None = None) -> Converter:
        conv = Converter(self.names, uses)
        weak = self._weak

        def load(name: str, idx: tuple[Expr, ...], col: int) -> Load:
            d = self.names.dtypes.get(name)
            if d is None:
                return Load(name, idx, weak.get(name, DType.INT64), weak=True)
            return Load(name, idx, d)
        conv.load = load  # type: ignore[method-assign]
        return conv

    def _value(self, ins: Instruction) -> Expr | Reduction:
        try:
            return self._converter().top(ins.value)
        except SyntaxErrorAt as e:
            raise error_at(ins.text, ins.line, e.col, e.message) from None

    def _exprs(self, ins: Instruction) -> tuple[tuple[Expr, ...], Expr | Reduction, list[Expr]]:
        conv = self._converter(self.rule_uses)
        try:
            idx = tuple(conv.expr(s) for s in ins.indices)
            for s, e in zip(ins.indices, idx):
                if not e.dtype.is_int:
                    raise SyntaxErrorAt(s.col, f"index {s} of '{ins.target}' is {e.dtype}; "
                                        "indices must be integers")
            value = conv.top(ins.value)
            conds = [conv.expr(c) for c in ins.conditions]
            for s, c in zip(ins.conditions, conds):
                if c.dtype is not DType.BOOL:
                    raise SyntaxErrorAt(s.col, f"the condition {s} is not a comparison")
        except SyntaxErrorAt as e:
            raise error_at(ins.text, ins.line, e.col, e.message) from None
        return idx, value, conds

    # loops ---------------------------------------------------------------------------------------
    def _own_inames(self, idx, value, conds) -> set[str]:
        used: set[str] = set()
        for e in (*idx, *conds):
            used |= free_vars(e)
        if isinstance(value, Reduction):
            used |= free_vars(value.source) - set(value.inames)
        else:
            used |= free_vars(value)
        return kd.outer_inames(self.doms, sorted(used & self.inames))

    def _inherit(self, own: list[set[str]], reads: list[set[str]]) -> None:
        """A statement writing a scalar temporary runs inside the loops common to all its
        readers (as in Loo.py): ``acc = 0`` before ``acc = acc + a[i, k]`` belongs to loop i."""
        changed = True
        while changed:
            changed = False
            for k, ins in enumerate(self.insns):
                if ins.target not in self.temps or self.names.arrays[ins.target] != 0:
                    continue
                readers = [own[r] for r in range(len(self.insns)) if ins.target in reads[r]]
                if not readers:
                    continue
                common = set.intersection(*readers)
                if not common <= own[k]:
                    own[k] |= kd.outer_inames(self.doms, sorted(common))
                    changed = True

    def _ordered(self, inames: set[str]) -> list[str]:
        return [i for i in self.order if i in inames]

    # the program -----------------------------------------------------------------------------------
    def build(self, name: str) -> Program:
        self._weak: dict[str, DType] = {}
        self._accumulators: dict[str, tuple[str, ...]] = {}
        self.rule_uses: list[RuleUse] = []
        self._infer_dtypes()
        converted = [self._exprs(ins) for ins in self.insns]
        own = [self._own_inames(*c) for c in converted]
        reads = [reads_of(c) for c in converted]
        self._inherit(own, reads)
        statements: list[Statement] = []
        items: list[tuple[str, list[str], bool]] = []
        barriers: list[Statement] = []
        caps: dict[str, int] = {}
        temporaries = {ins.target for ins in self.insns if ins.temporary is not None}
        for k, (ins, (idx, value, conds), inames) in enumerate(zip(self.insns, converted, own)):
            if ins.barrier is not None:
                loops = barrier_loops(self.insns, k, own, self.inames, self.doms, self.order)
                st = barrier_statement(self.doms, ins, loops)
                items.append((st.name if st is not None else ins.id, [] if st is None
                              else list(st.iters), False))
                barriers += [st] if st is not None else []
                statements += [st] if st is not None else []
                continue
            made = list(self._statements(ins, idx, value, conds, inames))
            cap = sharing_cap(statements, [st for st, _, _ in made], made[0][1], temporaries) \
                if made else None
            if cap is not None:
                caps[made[0][0].name] = cap
            for st, loops, fresh in made:
                statements.append(st)
                items.append((st.name, loops, fresh))
        buffers = self._buffers([s for s in statements if s not in barriers])
        buffers += [barrier_array(b, self.params, self.assumptions) for b in barriers]
        args = self._argument_order(buffers)
        where = nesting(items, caps)
        program = Program(_identifier(name), tuple(buffers), tuple(statements),
                          tuple(self.params), tuple(args),
                          kd.assumptions_text(self.params, self.assumptions)
                          if self.assumptions else "",
                          nesting=tuple((st.name, where[st.name]) for st in statements))
        program = privatized(program, self._accumulators)
        return with_roles(program, {n: k for k, n in enumerate(self.decl)})

    def kernel_rules(self) -> tuple[KernelRule, ...]:
        """The rules with their expansions (after ``build``) and their bodies over integer
        parameters (what ``pl.precompute`` stores; None where the body needs other ones)."""
        out = []
        for rule in self.rules.values():
            conv = self._converter()
            conv.env.append({p: Var(p) for p in rule.params})
            try:
                body: Expr | None = conv.expr(rule.body)
            except (SyntaxErrorAt, ParseError):
                body = None
            uses = tuple(u for u in self.rule_uses if u.rule == rule.name)
            out.append(KernelRule(rule.name, rule.params, body, uses, rule.text))
        return tuple(out)

    def _statements(self, ins: Instruction, idx, value, conds, inames: set[str]):
        affine, data = [], []
        for c in conds:
            try:
                affine.append(kd.condition_to_isl(c))
            except NotAffine:
                data.append(c)
        loops = self._ordered(inames)
        target_dtype = self.names.dtypes[ins.target]
        assert target_dtype is not None
        if isinstance(value, Reduction):
            if data:
                raise error_at(ins.text, ins.line, 0, "a reduction cannot be under a condition "
                               "on array values; compute it into a temporary first")
            for r in value.inames:
                if r in inames:
                    raise error_at(ins.text, ins.line, max(0, ins.text.find(r)),
                                   f"iname '{r}' is reduced over and also used outside the "
                                   "reduction")
            red = self._ordered(kd.outer_inames(self.doms, value.inames) - inames)
            init_dom = kd.statement_domain(self.doms, f"{ins.id}_init", loops, affine)
            upd_dom = kd.statement_domain(self.doms, ins.id, loops + red, affine)
            src = assign(target_dtype, value.source)
            if ins.target not in self.temps:
                return self._accumulated(ins, idx, value, src, loops, red, affine)
            init = Statement(f"{ins.id}_init", tuple(loops), init_dom, ins.target, idx,
                             reduce_identity(value.kind, target_dtype), block=ins.id, is_init=True)
            upd = Statement(ins.id, tuple(loops + red), upd_dom, ins.target, idx, src,
                            value.kind, block=ins.id)
            # Separate nests (all initializations, then all updates) only when each element of
            # the target belongs to one iteration of the loops: c[i, j] over i, j.
            separate = sorted(str(i) for i in idx) == sorted(loops) and all(
                isinstance(i, Var) for i in idx)
            return [(init, loops, False), (upd, loops + red, separate)]
        v = assign(target_dtype, value)
        for c in reversed(data):
            v = select(c, v, Load(ins.target, idx, target_dtype))
        dom = kd.statement_domain(self.doms, ins.id, loops, affine)
        return [(Statement(ins.id, tuple(loops), dom, ins.target, idx, v, block=ins.id),
                 loops, False)]

    def _accumulated(self, ins: Instruction, idx, value: Reduction, src: Expr,
                     loops: list[str], red: list[str], affine: list[str]):
        """A reduction into an array runs on a private accumulator, as Loo.py writes it:
        ``acc = 0; for k: acc += ...; c[i, j] = acc``, all three inside the instruction's own
        loops. Privatisation gives the accumulator one element per iteration of those loops,
        so they carry no dependence through it and keep any g./l. tag; the reduction loops
        still carry one (refused as parallel loops)."""
        dtype = self.names.dtypes[ins.target]
        assert dtype is not None
        acc = self._fresh_temp("acc_" + "_".join(value.inames))
        self.names.arrays[acc] = 0
        self.names.dtypes[acc] = dtype
        self.temps[acc] = dtype.value
        self._accumulators[acc] = tuple(loops)
        names = (f"{ins.id}_init", ins.id, f"{ins.id}_store")
        doms = [kd.statement_domain(self.doms, n, its, affine)
                for n, its in zip(names, (loops, loops + red, loops))]
        init = Statement(names[0], tuple(loops), doms[0], acc, (), reduce_identity(value.kind, dtype),
                         block=ins.id, is_init=True)
        upd = Statement(names[1], tuple(loops + red), doms[1], acc, (), src, value.kind,
                        block=ins.id)
        store = Statement(names[2], tuple(loops), doms[2], ins.target, idx, Load(acc, (), dtype),
                          block=ins.id)
        return [(init, loops, False), (upd, loops + red, False), (store, loops, False)]

    def _fresh_temp(self, base: str) -> str:
        taken = set(self.names.arrays) | self.inames | set(self.params) | \
            {ins.id for ins in self.insns}
        return unique_name(base, taken)

    def _buffers(self, statements: list[Statement]) -> list[Buffer]:
        accesses: dict[str, list[kd.ArrayAccess]] = {}
        for s in statements:
            for ld in [s.target, *(x for x in s.reads())]:
                accesses.setdefault(ld.buffer, []).append(kd.ArrayAccess(s.domain, s.iters,
                                                                         ld.indices))
        out = []
        for n, ndim in self.names.arrays.items():
            dtype = self.names.dtypes[n]
            assert dtype is not None
            shape = self._shape(n, ndim, accesses.get(n, []))
            if n in self.temps:
                out.append(Buffer(n, shape, dtype, BufferRole.TEMP, MemScope.LOCAL))
            else:
                out.append(Buffer(n, shape, dtype, BufferRole.INPUT))
        return out

    def _shape(self, n: str, ndim: int, accesses: list[kd.ArrayAccess]) -> tuple[Expr, ...]:
        d = self.decl.get(n)
        if isinstance(d, ArrayArg) and d.shape is not None:
            shape = d.shape if isinstance(d.shape, (tuple, list)) else (d.shape,)
            if len(shape) != ndim:
                raise ParseError(f"'{n}' is declared with {len(shape)} dimension(s) but indexed "
                                 f"with {ndim}")
            return tuple(parse_shape_entry(x, set(self.params), n) for x in shape)
        if ndim == 0:
            return ()
        exts = kd.infer_extents(n, ndim, accesses, self.params, self.assumptions)
        return tuple(simplify(e) for e in exts)

    def _argument_order(self, buffers: list[Buffer]) -> list[str]:
        names = [b.name for b in buffers if b.role is not BufferRole.TEMP]
        declared = [n for n in self.decl if n in names]
        return declared + [n for n in names if n not in declared]


def _identifier(name: str) -> str:
    if not name.isidentifier():
        raise ParseError(f"kernel name {name!r} is not an identifier")
    return name
