# SPDX-License-Identifier: Apache-2.0
"""Block primitives as pure functions ``State -> State``: moving computations (compute_at,
reverse_compute_at, decompose_reduction) and inlining them (compute_inline,
reverse_compute_inline). Placement comes from exact footprints computed by isl."""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir.expr import Expr, Load, Var, rewrite, substitute
from ..ir.program import BufferRole, Statement
from ..poly import affine, legality
from ..poly.access import accesses
from ..poly.isl_text import instance_map
from ..poly.tree import LoopNode, Node, StmtNode, statements_under
from .state import State, identity_expr, loop_label, rebase
from ..poly.tree_edits import add_exprs, insert_children, remove_statements


def block_statements(state: State, block: str) -> list[Statement]:
    """The statements of a block. A reduction's initialization is also a block of its own,
    named after its statement (``C_init``), so that its loops can be scheduled after
    decompose_reduction."""
    stmts = [s for s in state.program.statements if s.block_name == block]
    if not stmts:
        stmts = [s for s in state.program.statements if s.name == block and s.is_init]
    if not stmts:
        names = sorted({s.block_name for s in state.program.statements})
        raise ScheduleError(f"no block named '{block}'; blocks: {', '.join(names)}")
    return stmts


def main_statement(state: State, block: str) -> Statement:
    stmts = block_statements(state, block)
    return next((s for s in stmts if not s.is_init), stmts[-1])


def is_copy(state: State, block: str) -> bool:
    """Is the block one statement copying another buffer element for element into a
    temporary (a cache stage: ``X_shared[ax0, ax1] = X[ax0, ax1]``)?"""
    stmts = block_statements(state, block)
    return len(stmts) == 1 and is_copy_statement(state, stmts[0].name)


def is_copy_statement(state: State, name: str) -> bool:
    """Is statement ``name`` alone in its block and a copy (see ``is_copy``)?"""
    s = next((x for x in state.program.statements if x.name == name), None)
    if s is None or s.reduction is not None or s.is_init or \
            sum(x.block_name == s.block_name for x in state.program.statements) != 1:
        return False

    def own(indices: tuple[Expr, ...]) -> bool:
        return [i.name if isinstance(i, Var) else None for i in indices] == list(s.iters)
    return (isinstance(s.value, Load) and s.value.buffer != s.buffer and own(s.value.indices)
            and own(s.indices) and state.program.buffer(s.buffer).role is BufferRole.TEMP)


def readers(state: State, buffer: str, exclude: set[str]) -> list[str]:
    seen: dict[str, None] = {}
    for a in accesses(state.program):
        if a.buffer == buffer and not a.is_write and a.statement not in exclude:
            seen.setdefault(a.statement)
    return list(seen)


def writers(state: State, buffer: str, exclude: set[str]) -> list[str]:
    seen: dict[str, None] = {}
    for a in accesses(state.program):
        if a.buffer == buffer and a.is_write and a.statement not in exclude:
            seen.setdefault(a.statement)
    return list(seen)


def fresh_nest(state: State, stmt: Statement, nid: int) -> tuple[Node, int]:
    """Identity loops over a statement's iterators (isl drops those that are fixed by outer
    loops, so only the loops still needed appear in the code)."""
    child: Node = StmtNode(stmt.name)
    ids = list(range(nid, nid + len(stmt.iters)))
    for it, lid in reversed(list(zip(stmt.iters, ids))):
        child = LoopNode(lid, it, ((stmt.name, identity_expr(state.program, stmt.name, it)),),
                         (child,))
    return child, nid + len(stmt.iters)


def _place(state: State, stmts: list[Statement], path: list[LoopNode],
           placements: dict[str, list[str]], parent: LoopNode | None, index: int | None,
           parts: dict[int, dict[str, tuple[str, ...]]] | None = None) -> State:
    names = {s.name for s in stmts}
    root = remove_statements(state.root, names)
    additions: dict[int, tuple[tuple[str, str], ...]] = {}
    for k, loop in enumerate(path):
        additions[loop.id] = tuple((s.name, placements[s.name][k]) for s in stmts)
    root = add_exprs(root, additions, parts, params=state.program.params)
    nid = state.next_id
    nests = []
    for s in stmts:
        nest, nid = fresh_nest(state, s, nid)
        nests.append(nest)
    root = insert_children(root, parent.id if parent else None, tuple(nests), index=index)
    return state.with_root(root, nid)


def compute_at(state: State, block: str, loop: LoopNode) -> State:
    producers = block_statements(state, block)
    path = state.path(loop.id)
    under = set(statements_under(loop))
    names = {s.name for s in producers}
    if names & under:
        raise ScheduleError(f"compute_at: block '{block}' is already inside loop "
                            f"{loop_label(state, loop)}")
    buffer = producers[0].buffer
    if state.program.buffer(buffer).role is not BufferRole.TEMP:
        raise ScheduleError(f"compute_at: block '{block}' writes '{buffer}', an argument of the "
                            "program; only blocks writing temporaries can be moved into a loop")
    consumers = readers(state, buffer, names)
    outside = [c for c in consumers if c not in under]
    if outside:
        raise ScheduleError(f"compute_at: '{buffer}' (written by block '{block}') is also read by "
                            f"{', '.join(outside)} outside loop {loop_label(state, loop)}; move "
                            "the block to a loop that contains all its consumers")
    if not consumers:
        raise ScheduleError(f"compute_at: nothing under loop {loop_label(state, loop)} reads "
                            f"'{buffer}'")
    placements = {}
    for s in producers:
        others = {c: [p.expr(c) for p in path] for c in consumers}
        exprs, covered = affine.footprint_placement(state.program, s.name, buffer, others,
                                                    stmt_writes=True, first=True)
        if not covered:
            raise ScheduleError(f"compute_at: some instances of '{s.name}' write elements of "
                                f"'{buffer}' that nothing under loop {loop_label(state, loop)} "
                                "reads")
        placements[s.name] = exprs
    return _place(state, producers, path, placements, loop, 0)


def compute_root(state: State, block: str, *, after: bool = False) -> State:
    """The block's statements in a nest of their own at the top level, before (``after``:
    after) the top-level nest that holds them now; unchanged when they are alone there."""
    stmts = block_statements(state, block)
    names = {s.name for s in stmts}
    kids = state.root.children
    holders = [k for k, n in enumerate(kids) if names & set(_under(n))]
    if all(set(_under(kids[k])) <= names for k in holders):
        return state            # already computed at the root
    index = holders[-1] + 1 if after else holders[0]
    return _place(state, stmts, [], {}, None, index)


def _under(node: Node) -> list[str]:
    return [node.statement] if isinstance(node, StmtNode) else list(statements_under(node))


def reverse_compute_at(state: State, block: str, loop: LoopNode) -> State:
    consumers = block_statements(state, block)
    path = state.path(loop.id)
    under = set(statements_under(loop))
    names = {s.name for s in consumers}
    if names & under:
        raise ScheduleError(f"reverse_compute_at: block '{block}' is already inside loop "
                            f"'{loop.name}'")
    placements = {}
    for s in consumers:
        rel_exprs = None
        for ld in s.reads():
            prods = [w for w in writers(state, ld.buffer, names) if w in under]
            if not prods:
                continue
            others = {w: [p.expr(w) for p in path] for w in prods}
            exprs, covered = affine.footprint_placement(state.program, s.name, ld.buffer, others,
                                                        stmt_writes=False, first=False)
            if not covered:
                raise ScheduleError(f"reverse_compute_at: some instances of '{s.name}' read "
                                    f"'{ld.buffer}' elements not produced under loop "
                                    f"'{loop.name}'")
            rel_exprs = exprs
            break
        if rel_exprs is None:
            raise ScheduleError(f"reverse_compute_at: block '{block}' reads nothing produced "
                                f"under loop {loop_label(state, loop)}")
        placements[s.name] = rel_exprs
    return _place(state, consumers, path, placements, loop, None)


def decompose_reduction(state: State, block: str, loop: LoopNode) -> State:
    stmts = block_statements(state, block)
    init = next((s for s in stmts if s.is_init), None)
    update = next((s for s in stmts if s.reduction is not None), None)
    if init is None or update is None:
        raise ScheduleError(f"decompose_reduction: block '{block}' is not a reduction with an "
                            "initialization")
    path = state.path(loop.id)
    if update.name not in statements_under(loop):
        raise ScheduleError(f"decompose_reduction: loop {loop_label(state, loop)} is not a loop "
                            "of block "
                            f"'{block}'")
    spatial = list(init.iters)
    arg_map = instance_map(init.name, init.iters, update.name, update.iters)
    exprs = []
    parts: dict[int, dict[str, tuple[str, ...]]] = {}
    for anc in path[:-1]:
        e = anc.expr(update.name)
        if not affine.depends_only_on(state.program, update.name, e, spatial):
            raise ScheduleError(f"decompose_reduction: loop {loop_label(state, anc)} encloses "
                                f"loop {loop_label(state, loop)} and runs over a reduction axis; "
                                "choose a loop "
                                "above every reduction loop")
        exprs.append(affine.retarget(state.program, e, update.name, init.name, arg_map))
        if anc.collapse is not None and anc.collapse.applies(anc.exprs):
            parts[anc.id] = {init.name: tuple(
                affine.retarget(state.program, p, update.name, init.name, arg_map)
                for p in anc.collapse.part_exprs(update.name))}
    parent = path[-2] if len(path) > 1 else None
    moved = state.with_root(remove_statements(state.root, {init.name}))
    parent_now = moved.loop(parent.id) if parent is not None else None
    siblings = parent_now.children if parent_now is not None else moved.root.children
    index = next(k for k, c in enumerate(siblings) if isinstance(c, LoopNode) and c.id == loop.id)
    return _place(moved, [init], path[:-1], {init.name: exprs}, parent, index, parts)


# inlining ----------------------------------------------------------------------------------------

def _single(state: State, block: str, primitive: str) -> Statement:
    stmts = block_statements(state, block)
    if len(stmts) != 1 or stmts[0].reduction is not None:
        raise ScheduleError(f"{primitive}: block '{block}' is a reduction; only a plain "
                            "elementwise block can be inlined")
    return stmts[0]


def compute_inline(state: State, block: str) -> State:
    p = _single(state, block, "compute_inline")
    buf = state.program.buffer(p.buffer)
    if buf.role is not BufferRole.TEMP:
        raise ScheduleError(f"compute_inline: block '{block}' writes '{buf.name}', an argument of "
                            "the program; only temporaries can be inlined")
    if len(writers(state, buf.name, {p.name})):
        raise ScheduleError(f"compute_inline: '{buf.name}' is written by other statements too")
    if any(ld.buffer == buf.name for ld in p.reads()):
        raise ScheduleError(f"compute_inline: block '{block}' reads '{buf.name}', the buffer it "
                            "writes (a recurrence); only a block computed from other buffers can "
                            "be inlined")
    if not _is_identity(p.target, p.iters):
        raise ScheduleError(f"compute_inline: block '{block}' must write '{buf.name}' at its own "
                            f"iterators ({', '.join(p.iters)}), it writes {p.target}")
    users = readers(state, buf.name, {p.name})
    for u in users:
        if not affine.is_subset_image(state.program, p.name, buf.name, u):
            raise ScheduleError(f"compute_inline: '{u}' reads elements of '{buf.name}' that "
                                f"block '{block}' never computes")
    fs = state.schedule_map()
    for u in users:
        v = legality.move_hazard(state.program, state.deps, fs, p.name, u, buf.name, later=True)
        if v is not None:
            raise ScheduleError(f"compute_inline of '{block}' into '{u}' would break "
                                f"{v.summary()}: its inputs change before '{u}' runs; for instance "
                                f"{v.describe()}", dependence=v.evidence())

    def inline(e: Expr) -> Expr | None:
        if isinstance(e, Load) and e.buffer == buf.name:
            return substitute(p.value, dict(zip(p.iters, e.indices)))
        return None
    new_stmts = []
    for s in state.program.statements:
        if s.name == p.name:
            continue
        if s.name in users:
            s = Statement(s.name, s.iters, s.domain, s.buffer,
                          tuple(rewrite(i, inline) for i in s.indices), rewrite(s.value, inline),
                          s.reduction, s.block, s.is_init)
        new_stmts.append(s)
    buffers = tuple(b for b in state.program.buffers if b.name != buf.name)
    program = state.program.with_statements(tuple(new_stmts), buffers)
    root = remove_statements(state.root, {p.name})
    return rebase(state, program, root)


def reverse_compute_inline(state: State, block: str) -> State:
    c = _single(state, block, "reverse_compute_inline")
    reads = c.reads()
    temps = [ld for ld in reads if state.program.buffer(ld.buffer).role is BufferRole.TEMP]
    if not temps:
        raise ScheduleError(f"reverse_compute_inline: block '{block}' reads no temporary to "
                            "inline into")
    src = temps[0].buffer
    if any(ld.buffer == src and not _is_identity(ld, c.iters) for ld in reads):
        raise ScheduleError(f"reverse_compute_inline: block '{block}' must read '{src}' at its "
                            f"own iterators ({', '.join(c.iters)})")
    prods = writers(state, src, set())
    if len(prods) != 1:
        raise ScheduleError(f"reverse_compute_inline: '{src}' is written by "
                            f"{len(prods)} statements; it needs exactly one producer")
    p = state.program.statement(prods[0])
    if p.reduction is not None:
        raise ScheduleError(f"reverse_compute_inline: '{src}' is produced by reduction "
                            f"'{p.name}'; a consumer cannot be inlined into a reduction")
    if readers(state, src, {c.name}):
        raise ScheduleError(f"reverse_compute_inline: '{src}' has other readers besides "
                            f"'{block}'")
    if not (affine.is_subset_image(state.program, p.name, src, c.name)
            and affine.writes_within_reads(state.program, p.name, c.name, src)):
        raise ScheduleError(f"reverse_compute_inline: block '{block}' does not read exactly the "
                            f"elements of '{src}' that '{p.name}' writes")
    fs = state.schedule_map()
    v = legality.move_hazard(state.program, state.deps, fs, c.name, p.name, src, later=False)
    if v is not None:
        raise ScheduleError(f"reverse_compute_inline of '{block}' would break {v.summary()}; "
                            f"for instance {v.describe()}", dependence=v.evidence())
    at = dict(zip(c.iters, p.indices))

    def inline(e: Expr) -> Expr | None:
        if isinstance(e, Load) and e.buffer == src:
            return p.value
        return None
    value = rewrite(substitute(c.value, at), inline)
    merged = Statement(p.name, p.iters, p.domain, c.buffer,
                       tuple(substitute(i, at) for i in c.indices), value, None, p.block, False)
    stmts = tuple(merged if s.name == p.name else s for s in state.program.statements
                  if s.name != c.name)
    buffers = tuple(b for b in state.program.buffers if b.name != src)
    program = state.program.with_statements(stmts, buffers)
    root = remove_statements(state.root, {c.name})
    return rebase(state, program, root)


def _is_identity(ld: Load, iters: tuple[str, ...]) -> bool:
    return len(ld.indices) == len(iters) and all(
        isinstance(i, Var) and i.name == it for i, it in zip(ld.indices, iters))
