# SPDX-License-Identifier: Apache-2.0
"""The OpenCL target: OpenCL C 1.2 kernels, one per launch of a ``DeviceProgram``.

Global buffers are flat ``__global`` pointers indexed row-major (OpenCL C has no variable-length
array types); 'shared' temporaries are ``__local`` arrays of the work-group, declared at kernel
scope; 'local' temporaries are private arrays declared in the loop that owns them. Work-group
and work-item loops read ``get_group_id``/``get_local_id``; barriers are
``barrier(CLK_LOCAL_MEM_FENCE)`` (with ``CLK_GLOBAL_MEM_FENCE`` when a global buffer carries
the dependence).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import BuildError
from ..ir.dtypes import INDEX, DType
from ..ir.expr import BinOpKind, Const, Expr, UnaryKind, binop
from ..ir.loops import Barrier, For, LoopKind, Prefetch
from ..ir.program import Buffer, BufferRole, MemScope
from ..lower.launches import EXACT_GRID, DeviceProgram, Launch
from .cfamily import CFamilyPrinter
from .index_checks import OPENCL_CHECK_HELPER, IndexSite
from .names import NameKind
from .tables import C_KEYWORDS
from .writer import CodeWriter

OPENCL_TYPES = {DType.BOOL: "bool", DType.INT32: "int", DType.INT64: "long",
                DType.FLOAT32: "float", DType.FLOAT64: "double"}
OPENCL_UNSIGNED_TYPES = {DType.INT32: "uint", DType.INT64: "ulong"}
# OpenCL's math built-ins are overloaded on float and double.
OPENCL_MATH_FUNCTIONS = {
    (op, d): name
    for op, name in ((UnaryKind.EXP, "exp"), (UnaryKind.LOG, "log"), (UnaryKind.SQRT, "sqrt"),
                     (UnaryKind.TANH, "tanh"), (UnaryKind.FLOOR, "floor"),
                     (UnaryKind.ABS, "fabs"))
    for d in (DType.FLOAT32, DType.FLOAT64)
} | {(UnaryKind.ABS, DType.INT32): "abs", (UnaryKind.ABS, DType.INT64): "abs"}
OPENCL_INT_LIMITS = {DType.INT32: (-2**31, 2**31 - 1, "INT_MIN"),
                     DType.INT64: (-2**63, 2**63 - 1, "LONG_MIN")}
OPENCL_KEYWORDS = C_KEYWORDS | frozenset("""
    kernel __kernel global __global local __local constant __constant private __private
    read_only write_only half uchar ushort uint ulong size_t barrier get_group_id get_local_id
    get_global_id get_num_groups get_local_size CLK_LOCAL_MEM_FENCE CLK_GLOBAL_MEM_FENCE
    INT_MIN LONG_MIN fmod copysign fabs exp log sqrt tanh floor abs""".split())
INDEX_FUNCTIONS = {"blockIdx": "get_group_id", "threadIdx": "get_local_id"}
ADDRESS_SPACES = {MemScope.GLOBAL: "__global ", MemScope.SHARED: "__local ", MemScope.LOCAL: ""}


class OpenCLPrinter(CFamilyPrinter):
    """One OpenCL kernel (a launch); tables and hooks over the C-family printer."""

    target = "opencl"
    types = OPENCL_TYPES
    unsigned_types = OPENCL_UNSIGNED_TYPES
    math_functions = OPENCL_MATH_FUNCTIONS
    libm_suffix = {DType.FLOAT32: "", DType.FLOAT64: ""}
    int_limits = OPENCL_INT_LIMITS
    reserved = OPENCL_KEYWORDS | {"args", "params", "pl_fault", "pl_index_ok"}
    kernel_prefix = "__kernel void "
    index_check_helper = OPENCL_CHECK_HELPER

    def address_space(self, buffer: Buffer) -> str:
        return ADDRESS_SPACES[buffer.scope]

    def thread_index(self, loop: For) -> str:
        kind, _, axis = (loop.thread or "").partition(".")
        if kind not in INDEX_FUNCTIONS or axis not in "xyz" or not axis:
            raise BuildError(f"loop '{loop.var}' is bound to {loop.thread!r}, which OpenCL cannot "
                             "run; bind to blockIdx.x/y/z or threadIdx.x/y/z (tags g.N, l.N)")
        return f"(long){INDEX_FUNCTIONS[kind]}({'xyz'.index(axis)})"

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

    def annotation_lines(self, loop: For) -> list[str]:
        return [f"{k}: {v}" for k, v in loop.annotations if (k, v) != EXACT_GRID]

    def loop_pragmas(self, loop: For) -> list[str]:
        if loop.kind is LoopKind.UNROLLED:
            count = f" {loop.unroll_factor}" if loop.unroll_factor else ""
            return [f"#pragma unroll{count}"]
        return []

    def barrier(self, node: Barrier) -> str:
        if node.scope == "global":
            return "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)"
        return "barrier(CLK_LOCAL_MEM_FENCE)"

    def emit_prefetch(self, w: CodeWriter, node: Prefetch) -> None:
        """OpenCL C's ``prefetch(const __global T *p, size_t n)`` for a global buffer; local
        and private memory need none."""
        b = self.buffers.get(node.buffer)
        if b is None or b.scope is not MemScope.GLOBAL:
            w.comment(f"prefetch of {node.buffer}: not in global memory, nothing to prefetch")
            return
        w.statement(f"prefetch(&{self.element(node.buffer, node.indices)}, "
                    f"{self.expr(node.count)})")

    def _wide_int64(self, v: int) -> str:
        return f"{v}L"

    def element(self, buffer: str, indices: tuple[Expr, ...]) -> str:
        """Global buffers are flat: ``A[i * n + j]``; local and private arrays keep [i][j];
        a private temporary of one element is a scalar (``acc``)."""
        b = self.buffers.get(buffer)
        if b is not None and _private_scalar(b) and not indices:
            return self.buffer_name(buffer)
        if b is None or b.scope is not MemScope.GLOBAL or len(indices) < 2:
            return super().element(buffer, indices)
        if len(indices) != b.ndim:
            raise BuildError(f"buffer '{buffer}' has {b.ndim} dimensions, accessed with "
                             f"{len(indices)} indices in kernel '{self.kernel.name}'")
        flat = indices[0]
        for extent, index in zip(b.shape[1:], indices[1:]):
            flat = binop(BinOpKind.ADD, binop(BinOpKind.MUL, flat, extent), index)
        return f"{self.buffer_name(buffer)}[{self.expr(flat)}]"

    def array_declaration(self, buffer: Buffer, *, align: int = 64) -> str:
        dims = "".join(f"[{self.expr(s)}]" for s in buffer.shape)
        if not dims and not _private_scalar(buffer):
            dims = "[1]"
        return f"{self.address_space(buffer)}{self.type_name(buffer.dtype)} " \
               f"{self.buffer_name(buffer.name)}{dims}"

    def declare_local_temp(self, w: CodeWriter, buffer: Buffer) -> None:
        _check_constant_shape(buffer, "private")
        super().declare_local_temp(w, buffer)

    def parameter(self, buffer: Buffer) -> str:
        if buffer.dtype is DType.BOOL:
            raise BuildError(f"argument '{buffer.name}' is a bool array, which OpenCL kernels "
                             "cannot take; use int32 (0/1) instead")
        const = "const " if buffer.role is BufferRole.INPUT else ""
        return f"__global {const}{self.type_name(buffer.dtype)} *restrict " \
               f"{self.buffer_name(buffer.name)}"

    def emit_kernel(self, w: CodeWriter) -> None:
        k = self.kernel
        body = CodeWriter()     # printed first: it tells whether indices are checked
        self.emit(body, k.body)
        params = [self.parameter(b) for b in k.args]
        if self.checks_indices:     # the last buffer argument, before the sizes
            params.append(f"__global long *{self.fault_words}")
        params += [f"const long {self.param(p)}" for p in k.params]
        with w.block(f"{self.kernel_prefix}{k.name}({', '.join(params) or 'void'})"):
            for b in self.function_temps:
                if b.scope is MemScope.GLOBAL:
                    raise BuildError(f"temporary '{b.name}' of kernel '{k.name}' is global; "
                                     "it should have been passed as a scratch argument")
                _check_constant_shape(b, "local" if b.scope is MemScope.SHARED else "private")
                w.statement(self.array_declaration(b))
            if self.function_temps:
                w.blank()
            w.lines(body.text().splitlines())


def _private_scalar(buffer: Buffer) -> bool:
    """A private temporary of one element (a reduction's accumulator): declared and used as a
    plain variable, which every OpenCL compiler keeps in a register."""
    return (buffer.role is BufferRole.TEMP and buffer.scope is MemScope.LOCAL
            and not buffer.shape)


def _check_constant_shape(buffer: Buffer, memory: str) -> None:
    if not all(isinstance(s, Const) for s in buffer.shape):
        raise BuildError(f"temporary '{buffer.name}' needs {memory} memory of constant size, "
                         f"but its shape is {tuple(str(s) for s in buffer.shape)}; its footprint "
                         "per iteration of the loop that holds it must be a box of constant "
                         "size (split the loops by constants), or use scope 'global'")


def generate_opencl(program: DeviceProgram) -> str:
    """The OpenCL C source of all launches of a device program: notes, helpers, kernels."""
    return generate_opencl_unit(program).source


@dataclass(frozen=True, slots=True)
class OpenCLUnit:
    """An OpenCL program's source, the accesses it checks at run time (by site number), and
    the kernels that take the fault words (``index_checks``) as their last buffer."""
    source: str
    index_sites: tuple[IndexSite, ...]
    faulting: frozenset[str]


def generate_opencl_unit(program: DeviceProgram) -> OpenCLUnit:
    """``generate_opencl`` with what the runtime needs to report out-of-range indices."""
    printers = [OpenCLPrinter(launch.kernel) for launch in program.launches]
    sites: list[IndexSite] = []
    numbers: dict[tuple, int] = {}
    for p in printers:      # one numbering of checked accesses across the program's kernels
        p.index_sites, p.index_site_numbers = sites, numbers
    kernels = CodeWriter()
    for p in printers:
        p.emit_kernel(kernels)
        kernels.line()
    w = CodeWriter()
    w.comment(f"Program '{program.name}', generated by polyloop for the OpenCL target: "
              f"{len(program.launches)} kernel(s), enqueued in order.")
    for launch in program.launches:
        w.comment(f"  {launch.kernel.name}: {_launch_text(launch)}")
    for note in program.notes:
        w.comment(note)
    w.line()
    prelude = CodeWriter()
    if printers:
        helpers = OpenCLPrinter(program.launches[0].kernel)
        for p in printers:
            helpers.helpers |= p.helpers
        helpers.index_sites = sites
        helpers.emit_prelude(prelude)
    if "double" in kernels.text() or "double" in prelude.text():
        w.line("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        w.line()
    w.lines(prelude.text().splitlines())
    w.lines(kernels.text().splitlines())
    faulting = frozenset(p.kernel.name for p in printers if p.checks_indices)
    return OpenCLUnit(w.text(), tuple(sites), faulting)


def _launch_text(launch: Launch) -> str:
    groups = ", ".join(str(g) for g in launch.groups)
    items = ", ".join(str(i) for i in launch.items)
    return f"work-groups ({groups}) of ({items}) work-items"


__all__ = ["OpenCLPrinter", "OpenCLUnit", "generate_opencl", "generate_opencl_unit"]
