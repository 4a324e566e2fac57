# SPDX-License-Identifier: Apache-2.0
"""Primitives that rewrite the program itself: cache_read, cache_write, rfactor,
transform_layout. Each rewrite keeps the program's meaning under the current (legal) order, so
the state is rebased: later primitives are checked against the rewritten program's dependences.
"""
from __future__ import annotations

from dataclasses import replace

from typing import Callable, Sequence

from ..errors import PolyloopError, ScheduleError
from ..ir.expr import Const, Expr, Load, Var, as_expr, reduce_identity, rewrite, substitute
from ..ir.program import Buffer, BufferRole, MemScope, Program, Statement
from ..poly import affine, regions
from ..poly.isl_text import box_domain
from ..poly.isl_util import expr_to_isl
from ..poly.tree import LoopNode, Node, Root, StmtNode, statements_under
from .blocks import block_statements, fresh_nest, readers, writers
from .naming import fresh_name
from .state import State, loop_label, rebase
from ..poly.tree_edits import insert_children


def _root_index(root: Root, stmts: set[str], *, last: bool = False) -> int:
    """The position of the first (or last) top-level nest holding any of ``stmts``."""
    hits = [k for k, c in enumerate(root.children) if set(statements_under(c)) & stmts]
    if not hits:
        raise ScheduleError("statement not found in the schedule")
    return hits[-1] if last else hits[0]


def _redirect(s: Statement, old: str, new: str, *, reads: bool, writes: bool) -> Statement:
    def fn(e: Expr) -> Expr | None:
        if isinstance(e, Load) and e.buffer == old:
            return Load(new, e.indices, e.dtype)
        return None
    value = rewrite(s.value, fn) if reads else s.value
    buffer = new if (writes and s.buffer == old) else s.buffer
    return Statement(s.name, s.iters, s.domain, buffer, s.indices, value, s.reduction, s.block,
                     s.is_init)


def _copy_statement(name: str, domain_text: str, dst: str, src: str, dtype, iters) -> Statement:
    idx = tuple(Var(i) for i in iters)
    return Statement(name, tuple(iters), domain_text, dst, idx, Load(src, idx, dtype), block=name)


def _insert_root(state: State, program: Program, stmt: Statement, index: int) -> State:
    nest, nid = fresh_nest(_with(state, program), stmt, state.next_id)
    root = insert_children(state.root, None, (nest,), index=index)
    return rebase(state.with_root(root, nid), program, root)


def _with(state: State, program: Program) -> State:
    return State(program, state.root, state.deps, state.next_id)


def _scope(primitive: str, scope: str) -> MemScope:
    try:
        return MemScope.parse(scope)
    except PolyloopError as e:
        raise ScheduleError(f"{primitive}: {e}") from None


def cache_read(state: State, block: str, buffer: str, scope: str) -> tuple[State, str]:
    sc = _scope("cache_read", scope)
    stmts = block_statements(state, block)
    names = {s.name for s in stmts}
    program = state.program
    buf = program.buffer(buffer)
    if any(s.buffer == buffer for s in stmts):
        raise ScheduleError(f"cache_read: block '{block}' writes '{buffer}'; use cache_write")
    # the copy goes before the block's first nest; nothing from there to the last nest that
    # reads may write what it copies (a reduction's initialization, a statement of the block
    # too, may have a nest of its own before the reading one)
    reading = {s.name for s in stmts if any(ld.buffer == buffer for ld in s.reads())}
    if not reading:
        raise ScheduleError(f"cache_read: block '{block}' does not read '{buffer}'; name a "
                            "buffer the block reads")
    at = _root_index(state.root, names)
    last = _root_index(state.root, reading, last=True)
    nest_stmts = {x for c in state.root.children[at:last + 1] for x in statements_under(c)}
    if set(writers(state, buffer, set())) & nest_stmts:
        raise ScheduleError(f"cache_read: '{buffer}' is written inside the loop nest of block "
                            f"'{block}'; the copy would read values that are not ready")
    cname = fresh_name(program, f"{buffer}_{sc.value}")
    iters = [f"ax{k}" for k in range(buf.ndim)]
    dom = regions.read_region(program, sorted(names), buffer, cname, iters)
    cache = Buffer(cname, buf.shape, buf.dtype, BufferRole.TEMP, sc)
    copy = _copy_statement(cname, dom, cname, buffer, buf.dtype, iters)
    new_stmts = []
    for s in program.statements:
        if s.name == stmts[0].name:
            new_stmts.append(copy)
        new_stmts.append(_redirect(s, buffer, cname, reads=True, writes=False)
                         if s.name in names else s)
    prog = program.with_statements(tuple(new_stmts), program.buffers + (cache,))
    return _insert_root(state, prog, copy, at), cname


def cache_write(state: State, block: str, scope: str) -> tuple[State, str]:
    sc = _scope("cache_write", scope)
    stmts = block_statements(state, block)
    names = {s.name for s in stmts}
    program = state.program
    buffer = stmts[0].buffer
    buf = program.buffer(buffer)
    first, at = _root_index(state.root, names), _root_index(state.root, names, last=True)
    nest_stmts = {x for c in state.root.children[first:at + 1] for x in statements_under(c)}
    others = (set(readers(state, buffer, names)) | set(writers(state, buffer, names))) & nest_stmts
    if others:
        raise ScheduleError(f"cache_write: {', '.join(sorted(others))} also use '{buffer}' inside "
                            f"the loop nest of block '{block}'; cache_write before moving them "
                            "there")
    cname = fresh_name(program, f"{buffer}_{sc.value}", ("", "_in", "_out"))
    iters = [f"ax{k}" for k in range(buf.ndim)]
    dom = regions.read_region(program, sorted(names), buffer, cname + "_out", iters, writes=True)
    cache = Buffer(cname, buf.shape, buf.dtype, BufferRole.TEMP, sc)
    out = _copy_statement(cname + "_out", dom, buffer, cname, buf.dtype, iters)
    # an in-place update reads values it did not write itself: the cache starts with them
    exposed = regions.exposed_region(program, sorted(names), buffer, state.schedule_map(),
                                     cname + "_in", iters)
    copy_in = None if exposed is None else _copy_statement(cname + "_in", exposed, cname, buffer,
                                                           buf.dtype, iters)
    new_stmts = []
    first_stmt = next(s.name for s in program.statements if s.name in names)
    last = [s.name for s in program.statements if s.name in names][-1]
    for s in program.statements:
        if s.name == first_stmt and copy_in is not None:
            new_stmts.append(copy_in)
        new_stmts.append(_redirect(s, buffer, cname, reads=True, writes=True)
                         if s.name in names else s)
        if s.name == last:
            new_stmts.append(out)
    prog = program.with_statements(tuple(new_stmts), program.buffers + (cache,))
    nid = state.next_id
    root = state.root
    nest, nid = fresh_nest(_with(state, prog), out, nid)
    root = insert_children(root, None, (nest,), index=at + 1)
    if copy_in is not None:
        nest, nid = fresh_nest(_with(state, prog), copy_in, nid)
        root = insert_children(root, None, (nest,), index=first)
    return rebase(state.with_root(root, nid), prog, root), cname + "_out"


def rfactor(state: State, loop: LoopNode, factor_axis: int) -> tuple[State, str]:
    """Split a reduction along ``loop`` into partial results ``C_rf[r, ...]`` (parallel in r)
    and a final reduction over r."""
    program = state.program
    s, init, text = _reduction_along(state, loop)
    block, spatial = s.block_name, init.iters
    rng = regions.constant_extent(program, s.name, text)
    if rng is None:
        raise ScheduleError(f"rfactor: loop {loop_label(state, loop)} needs a constant extent; "
                            "split the reduction axis by a constant first")
    buf = program.buffer(s.buffer)
    if not 0 <= factor_axis <= buf.ndim:
        raise ScheduleError(f"rfactor: factor_axis must be in 0..{buf.ndim}, got {factor_axis}")
    rf_buf, rf_init, rf_update, final = _partial_statements(program, s, init, text, rng,
                                                            factor_axis)
    rf = rf_buf.name
    if any(not (isinstance(a, Var) and a.name == b) for a, b in zip(init.indices, spatial)):
        raise ScheduleError(f"rfactor: block '{block}' must write at its spatial iterators")
    stmts = []
    for x in program.statements:
        if x.name == s.name:
            stmts.extend([rf_init, rf_update, final])
        else:
            stmts.append(x)
    prog = program.with_statements(tuple(stmts), program.buffers + (rf_buf,))
    at = _root_index(state.root, {s.name})
    nest_stmts = set(statements_under(state.root.children[at]))
    inside = (set(readers(state, buf.name, {s.name, init.name})) & nest_stmts)
    if inside:
        raise ScheduleError(f"rfactor: {', '.join(sorted(inside))} read '{buf.name}' inside the "
                            f"loop nest of '{block}'; rfactor before moving consumers there")
    root = _rename_statement(state.root, s.name, rf)
    tmp = State(prog, root, state.deps, state.next_id)
    nest_init, nid = fresh_nest(tmp, rf_init, state.next_id)
    nest_final, nid = fresh_nest(tmp, final, nid)
    root = insert_children(root, None, (nest_init,), index=at)
    root = insert_children(root, None, (nest_final,), index=at + 2)
    return rebase(state.with_root(root, nid), prog, root), rf


def _reduction_along(state: State, loop: LoopNode) -> tuple[Statement, Statement, str]:
    """The one reduction update under ``loop``, its block's initialization and the loop's
    expression for the update, refused unless ``loop`` runs a reduction axis of it."""
    program = state.program
    upd = [program.statement(s) for s in statements_under(loop)
           if program.statement(s).reduction is not None]
    if len(upd) != 1:
        raise ScheduleError(f"rfactor: loop {loop_label(state, loop)} must be inside exactly one "
                            "reduction by sum, product, max or min")
    s = upd[0]
    block = s.block_name
    init = next((x for x in block_statements(state, block) if x.is_init), None)
    if init is None:
        raise ScheduleError(f"rfactor: block '{block}' has no initialization")
    spatial = init.iters
    text = loop.expr(s.name)
    if affine.depends_only_on(program, s.name, text, list(spatial)) or \
            _uses_spatial(program, s, text, spatial):
        raise ScheduleError(f"rfactor: loop {loop_label(state, loop)} is not a reduction loop "
                            f"of '{block}'")
    return s, init, text


def _partial_statements(program: Program, s: Statement, init: Statement, text: str,
                        rng: tuple[int, int], factor_axis: int
                        ) -> tuple[Buffer, Statement, Statement, Statement]:
    """The partial-result buffer (the loop's values ``rng`` as a new axis at ``factor_axis``),
    its initialization, the update into it and the final reduction over the new axis."""
    spatial = init.iters
    lo, hi = rng
    ext = hi - lo + 1
    buf = program.buffer(s.buffer)
    rf = fresh_name(program, f"{buf.name}_rf", ("", "_init"))
    r_val = regions.loop_value_expr(program, s.name, text)
    if lo:
        r_val = r_val - lo
    rf_shape = list(buf.shape)
    rf_shape.insert(factor_axis, Const(ext, r_val.dtype, True))
    rf_buf = Buffer(rf, tuple(rf_shape), buf.dtype, BufferRole.TEMP)
    rf_idx = list(s.indices)
    rf_idx.insert(factor_axis, r_val)
    rf_update = Statement(rf, s.iters, s.domain.replace(f"{s.name}[", f"{rf}[", 1), rf,
                          tuple(rf_idx), s.value, s.reduction, block=rf)
    rname = fresh_name(program, "r" if "r" not in spatial else "rr")
    init_idx = [Var(i) for i in spatial]
    ri = list(init_idx)
    ri.insert(factor_axis, Var(rname))
    rf_init = Statement(f"{rf}_init", tuple(spatial) + (rname,),
                        _extend_domain(init.domain, init.name, f"{rf}_init", rname, ext), rf,
                        tuple(ri), reduce_identity(s.reduction, buf.dtype), block=rf, is_init=True)
    final = Statement(s.name, tuple(spatial) + (rname,),
                      _extend_domain(init.domain, init.name, s.name, rname, ext), s.buffer,
                      tuple(init_idx),
                      Load(rf, tuple(ri), buf.dtype), s.reduction, block=s.block_name)
    return rf_buf, rf_init, rf_update, final


def _uses_spatial(program: Program, s: Statement, text: str, spatial: Sequence[str]) -> bool:
    reduction_iters = [i for i in s.iters if i not in spatial]
    return not affine.depends_only_on(program, s.name, text, reduction_iters)


def _extend_domain(domain: str, old: str, new: str, rname: str, ext: int) -> str:
    head, sep, rest = domain.partition(f"{old}[")
    inside, _, tail = rest.partition("]")
    cond = f"0 <= {rname} < {ext}"
    tail = tail.replace(":", f": {cond} and", 1) if ":" in tail else f" : {cond} " + tail.lstrip()
    iters = f"{inside}, {rname}" if inside.strip() else rname
    return f"{head}{new}[{iters}]{tail}"


def _rename_statement(root: Root, old: str, new: str) -> Root:
    def go(n: Node) -> Node:
        if isinstance(n, StmtNode):
            return StmtNode(new) if n.statement == old else n
        exprs = tuple((new, e.renamed(old, new)) if s == old else (s, e) for s, e in n.exprs)
        return replace(n, exprs=exprs, children=tuple(go(c) for c in n.children))
    return Root(tuple(go(c) for c in root.children))


def transform_layout(state: State, buffer: str, index_map: Callable[..., object]
                     ) -> tuple[State, str]:
    """Store ``buffer`` at ``index_map(old indices)``; arguments keep their layout outside
    (a packed copy is made on entry and/or copied back on exit)."""
    program = state.program
    buf = program.buffer(buffer)
    old = [f"ax{k}" for k in range(buf.ndim)]
    new_idx = _call_map(index_map, old, buffer)
    shape = regions.layout_extents(program, buffer, new_idx, old)
    target = buffer
    if buf.role is not BufferRole.TEMP:
        target = fresh_name(program, f"{buffer}_packed")
    new_buf = Buffer(target, tuple(shape), buf.dtype, BufferRole.TEMP, buf.scope)

    def remap(e: Expr) -> Expr | None:
        if isinstance(e, Load) and e.buffer == buffer:
            return Load(target, tuple(substitute(x, dict(zip(old, e.indices))) for x in new_idx),
                        e.dtype)
        return None
    stmts = []
    for s in program.statements:
        idx = s.indices
        if s.buffer == buffer:
            idx = tuple(substitute(x, dict(zip(old, s.indices))) for x in new_idx)
        stmts.append(Statement(s.name, s.iters, s.domain, target if s.buffer == buffer else s.buffer,
                               tuple(rewrite(i, remap) for i in idx), rewrite(s.value, remap),
                               s.reduction, s.block, s.is_init))
    buffers = tuple(new_buf if (b.name == buffer and buf.role is BufferRole.TEMP) else b
                    for b in program.buffers)
    if buf.role is not BufferRole.TEMP:
        buffers += (new_buf,)
    copy_in, copy_out = _layout_copies(program, buf, target, old, tuple(new_idx))
    if copy_in is not None:
        stmts.insert(0, copy_in)
    if copy_out is not None:
        stmts.append(copy_out)
    prog = program.with_statements(tuple(stmts), buffers)
    root = state.root
    nid = state.next_id
    tmp = State(prog, root, state.deps, nid)
    if copy_in is not None:
        nest, nid = fresh_nest(tmp, copy_in, nid)
        root = insert_children(root, None, (nest,), index=0)
    if copy_out is not None:
        nest, nid = fresh_nest(tmp, copy_out, nid)
        root = insert_children(root, None, (nest,))
    return rebase(state.with_root(root, nid), prog, root), target


def _layout_copies(program: Program, buf: Buffer, target: str, old: list[str],
                   idx_new: tuple[Expr, ...]) -> tuple[Statement | None, Statement | None]:
    """The statements that pack an argument into ``target`` on entry (an input) and copy it
    back on exit (an output); ``None`` where the buffer's role needs none."""
    buffer = buf.name
    extents = [expr_to_isl(d) for d in buf.shape]
    copy_in = copy_out = None
    if buf.role in (BufferRole.INPUT, BufferRole.INOUT):
        name = fresh_name(program, f"{target}_in")
        copy_in = Statement(name, tuple(old), box_domain(program.params, name, old, extents),
                            target, idx_new,
                            Load(buffer, tuple(Var(a) for a in old), buf.dtype), block=name)
    if buf.role in (BufferRole.OUTPUT, BufferRole.INOUT):
        name = fresh_name(program, f"{target}_out")
        domain = box_domain(program.params, name, old, extents)
        writers = sorted({s.name for s in program.statements if s.buffer == buffer})
        if buf.role is BufferRole.OUTPUT and writers:
            # only what the program writes: the packed copy holds nothing else
            domain = regions.read_region(program, writers, buffer, name, old, writes=True)
        copy_out = Statement(name, tuple(old), domain, buffer,
                             tuple(Var(a) for a in old), Load(target, idx_new, buf.dtype),
                             block=name)
    return copy_in, copy_out


def _call_map(index_map: Callable[..., object], names: Sequence[str], buffer: str) -> list[Expr]:
    try:
        out = index_map(*[Var(n) for n in names])
    except TypeError as e:
        raise ScheduleError(f"transform_layout: the index map must take {len(names)} indices of "
                            f"'{buffer}': {e}") from None
    except Exception as e:  # noqa: BLE001 - the user's function failed on index expressions
        raise ScheduleError(f"transform_layout: the index map of '{buffer}' raised "
                            f"{type(e).__name__}: {e}; it is called once on symbolic indices "
                            "and may only compute with them (+, -, * and // or % by constants)"
                            ) from None
    out = out if isinstance(out, (tuple, list)) else (out,)
    try:
        return [as_expr(x) for x in out]  # type: ignore[arg-type]
    except Exception as e:  # noqa: BLE001 - a result that is no index expression
        raise ScheduleError(f"transform_layout: the index map of '{buffer}' must return index "
                            f"expressions, got {out!r:.80} ({type(e).__name__})") from None

