# SPDX-License-Identifier: Apache-2.0
"""What every GPU target prints the same way, over the C-family printer.

A kernel is one launch of a ``DeviceProgram``: global buffers are flat pointers indexed
row-major (neither OpenCL C nor CUDA C has variable-length array types), 'shared' temporaries
are arrays of the work-group (block) declared at kernel scope, 'local' temporaries are
private arrays (registers) declared in the loop that owns them, a private temporary of one
element is a plain variable. A work-group or work-item loop that the launch covers exactly
declares its id once instead of testing it. The OpenCL and CUDA printers add their tables
(types, qualifiers, index functions, barrier) and a few hooks.
"""
from __future__ import annotations

from typing import Callable

from ..errors import BuildError
from ..ir.dtypes import INDEX
from ..ir.expr import BinOpKind, Const, Expr, binop
from ..ir.loops import Call, For, LoopKind, Region
from ..ir.program import Buffer, BufferRole, MemScope
from ..lower.launches import EXACT_GRID, WARP_LANES, DeviceProgram, Launch
from ..schedule.intrin_registry import DeviceBody, lookup
from .cfamily import CFamilyPrinter
from .names import NameKind
from .vector_plan import affine
from .writer import CodeWriter


class GpuPrinter(CFamilyPrinter):
    """One GPU kernel (a launch); OpenCL and CUDA subclass it with their spellings."""

    # the qualifier of a shared-memory array (``__local `` in OpenCL, ``__shared__ `` in CUDA)
    shared_qualifier = ""

    def emit_thread_loop(self, w: CodeWriter, loop: For) -> None:
        """A work-group or work-item loop whose values are the launched ids (from its start)
        needs no guard on its id: ``const long i_inner = get_local_id(1);``."""
        if EXACT_GRID not in loop.annotations:
            super().emit_thread_loop(w, loop)
            return
        with w.block(""):
            self._declare_ids(w, loop)

    def _declare_ids(self, w: CodeWriter, loop: For) -> None:
        """The id of an ``EXACT_GRID`` loop, and those of the ones directly inside it, in one
        scope: ``const long i_outer = get_group_id(1); const long i_inner = ...``."""
        var = self.names.ident(NameKind.ITERATOR, loop.var)
        value = self.thread_index(loop)
        if not (isinstance(loop.start, Const) and loop.start.value == 0):
            value = f"{self.expr(loop.start)} + {value}"
        w.statement(f"const {self.type_name(INDEX)} {var} = {value}")
        inner = loop.body
        if not (isinstance(inner, For) and inner.kind is LoopKind.THREAD
                and EXACT_GRID in inner.annotations and not self.annotation_lines(inner)
                and not self.local_temps.get(id(loop))):
            self.emit_loop_body(w, loop, var)
            return
        self.bound.setdefault(loop.var, []).append(var)
        try:
            self._declare_ids(w, inner)
        finally:
            self.bound[loop.var].pop()

    # tensor intrinsics ---------------------------------------------------------------------------
    def emit_call(self, w: CodeWriter, node: Call) -> None:
        """``f(&C[...], &A[...], ..., strides, trip counts)`` with the intrinsic's body for this
        target (``TensorIntrin(devices=...)``), defined once per program in the prelude."""
        intrin = lookup(node.function)
        body = intrin.devices.get(self.target)
        if body is None:
            raise BuildError(f"kernel '{self.kernel.name}' calls tensor intrinsic "
                             f"'{node.function}' (tensorize), which has no {self.target} "
                             "implementation; build with target \"c\", or use an intrinsic "
                             "with device bodies (polyloop.intrin.wmma_intrin)")
        regions = [a for a in node.args if isinstance(a, Region)]
        spaces = tuple(self.address_space(self.buffers[r.buffer]) for r in regions)
        name = self.device_function_name(node.function, spaces)
        source = body.source(name, spaces)
        if self.intrinsics.setdefault(name, source) != source:
            raise BuildError(f"two tensor intrinsics named '{name}' with different bodies in "
                             "one program; give them different names")
        if body.warp:
            self.check_warp_call(node, body)
        args = [f"&{self.element(a.buffer, a.indices)}" if isinstance(a, Region)
                else self.expr(a) for a in node.args]
        w.statement(f"{name}({', '.join(args)})")

    def device_function_name(self, function: str, spaces: tuple[str, ...]) -> str:
        """The name of the intrinsic's function for operands in ``spaces``."""
        return function

    def check_warp_call(self, node: Call, body: DeviceBody) -> None:
        """A target that runs warp-collective bodies checks the launch shape here."""

    def annotation_lines(self, loop: For) -> list[str]:
        return [f"{k}: {v}" for k, v in loop.annotations if (k, v) not in (EXACT_GRID,
                                                                             WARP_LANES)]

    def loop_pragmas(self, loop: For) -> list[str]:
        if loop.kind is LoopKind.UNROLLED:
            count = f" {loop.unroll_factor}" if loop.unroll_factor else ""
            return [f"#pragma unroll{count}"]
        return []

    def element(self, buffer: str, indices: tuple[Expr, ...]) -> str:
        """Global buffers are flat: ``A[i * n + j]``; shared and private arrays keep [i][j];
        a private temporary of one element is a scalar (``acc``)."""
        b = self.buffers.get(buffer)
        if b is not None and private_scalar(b) and not indices:
            return self.buffer_name(buffer)
        if b is None or b.scope is not MemScope.GLOBAL or len(indices) < 2:
            return super().element(buffer, indices)
        if len(indices) != b.ndim:
            raise BuildError(f"buffer '{buffer}' has {b.ndim} dimensions, accessed with "
                             f"{len(indices)} indices in kernel '{self.kernel.name}'")
        return f"{self.buffer_name(buffer)}[{self.expr(flat_index(b, indices))}]"

    def array_declaration(self, buffer: Buffer, *, align: int = 64) -> str:
        dims = "".join(f"[{self.expr(s)}]" for s in buffer.shape)
        if not dims and not private_scalar(buffer):
            dims = "[1]"
        return f"{self.address_space(buffer)}{self.type_name(buffer.dtype)} " \
               f"{self.buffer_name(buffer.name)}{dims}"

    def declare_local_temp(self, w: CodeWriter, buffer: Buffer) -> None:
        check_constant_shape(buffer, "private")
        super().declare_local_temp(w, buffer)

    def kernel_header(self, params: list[str]) -> str:
        """``__kernel void name(params)``: the line that opens the kernel."""
        return f"{self.kernel_prefix}{self.kernel.name}({', '.join(params) or 'void'})"

    def size_parameter(self, name: str) -> str:
        return f"const {self.type_name(INDEX)} {self.param(name)}"

    def emit_kernel(self, w: CodeWriter) -> None:
        k = self.kernel
        body = CodeWriter()     # printed first: it tells whether indices are checked
        self.emit(body, k.body)
        params = [self.parameter(b) for b in k.args]
        if self.checks_indices:     # the last buffer argument, before the sizes
            params.append(self.fault_parameter())
        params += [self.size_parameter(p) for p in k.params]
        with w.block(self.kernel_header(params)):
            for b in self.function_temps:
                if b.scope is MemScope.GLOBAL:
                    raise BuildError(f"temporary '{b.name}' of kernel '{k.name}' is global; "
                                     "it should have been passed as a scratch argument")
                check_constant_shape(b, "local" if b.scope is MemScope.SHARED else "private")
                w.statement(self.array_declaration(b))
            if self.function_temps:
                w.blank()
            w.lines(body.text().splitlines())

    def fault_parameter(self) -> str:
        """The parameter through which a kernel reports an out-of-range index read from data
        (``index_checks``); a target without one refuses such kernels."""
        raise BuildError(f"kernel '{self.kernel.name}' indexes an array with a value read from "
                         f"data (or a non-affine index), which must be checked at run time; the "
                         f"{self.target} target has no such check yet: build for 'c' or 'opencl'")

    def parameter(self, buffer: Buffer) -> str:
        """The kernel parameter of a global buffer argument."""
        raise NotImplementedError


def trip_count(loop: For) -> int | None:
    """The number of iterations of ``loop`` when it is a constant, else None."""
    start, stop = affine(loop.start), affine(loop.stop)
    if start is None or stop is None:
        return None
    width = {k: v - start.get(k, 0) for k, v in stop.items()}
    width.update({k: -v for k, v in start.items() if k not in stop})
    if any(v for k, v in width.items() if k is not None):
        return None
    return max(0, -(-width.get(None, 0) // loop.step))


def flat_index(buffer: Buffer, indices: tuple[Expr, ...]) -> Expr:
    """The row-major offset of ``buffer[indices]``: ``(i * n1 + j) * n2 + k``."""
    flat = indices[0]
    for extent, index in zip(buffer.shape[1:], indices[1:]):
        flat = binop(BinOpKind.ADD, binop(BinOpKind.MUL, flat, extent), index)
    return flat


def private_scalar(buffer: Buffer) -> bool:
    """A private temporary of one element (a reduction's accumulator): declared and used as a
    plain variable, which every GPU compiler keeps in a register."""
    return (buffer.role is BufferRole.TEMP and buffer.scope is MemScope.LOCAL
            and not buffer.shape)


def check_constant_shape(buffer: Buffer, memory: str) -> None:
    if not all(isinstance(s, Const) for s in buffer.shape):
        raise BuildError(f"temporary '{buffer.name}' needs {memory} memory of constant size, "
                         f"but its shape is {tuple(str(s) for s in buffer.shape)}; its footprint "
                         "per iteration of the loop that holds it must be a box of constant "
                         "size (split the loops by constants), or use scope 'global'")


__all__ = ["GpuPrinter", "check_constant_shape", "flat_index", "private_scalar", "trip_count"]


def emit_program_header(w: CodeWriter, program: DeviceProgram, *, target: str, verb: str,
                        launch_text: Callable[[Launch], str]) -> None:
    """The comment that opens a device program's source: its kernels, in the order they run
    (``verb``: "enqueued", "launched"), each with its grid in the target's words."""
    w.comment(f"Program '{program.name}', generated by polyloop for the {target} target: "
              f"{len(program.launches)} kernel(s), {verb} in order.")
    for launch in program.launches:
        w.comment(f"  {launch.kernel.name}: {launch_text(launch)}")
    for note in program.notes:
        w.comment(note)
    w.line()
