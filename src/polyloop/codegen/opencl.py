# SPDX-License-Identifier: Apache-2.0
"""The OpenCL target: OpenCL C 1.2 kernels, one per launch of a ``DeviceProgram``.

Over the GPU printer (``gpu.py``): global buffers are flat ``__global`` pointers; 'shared'
temporaries are ``__local`` arrays of the work-group; 'local' ones are private. Work-group
and work-item loops read ``get_group_id``/``get_local_id``; barriers are
``barrier(CLK_LOCAL_MEM_FENCE)`` (with ``CLK_GLOBAL_MEM_FENCE`` when a global buffer carries
the dependence).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import BuildError
from ..ir.dtypes import DType
from ..ir.expr import BinOp, BinOpKind, Expr, Load, Unary, UnaryKind, walk
from ..ir.loops import Barrier, For, LoopKind, Prefetch
from ..ir.program import Buffer, BufferRole, MemScope
from ..ir.thread_axis import AxisLevel
from ..lower.launches import DeviceProgram, Launch
from .gpu import GpuPrinter, emit_program_header, trip_count
from .item_guards import sink_item_guards
from .index_checks import OPENCL_CHECK_HELPER, IndexSite
from .tables import C_KEYWORDS, POSTFIX, UNARY
from .writer import CodeWriter

# half arithmetic needs the cl_khr_fp16 extension, which is not assumed (PoCL lacks it): float16
# and bfloat16 are stored as their bits and computed in float32 (``half.py``)
OPENCL_TYPES = {DType.BOOL: "bool", DType.INT32: "int", DType.INT64: "long",
                DType.FLOAT32: "float", DType.FLOAT64: "double", DType.INT8: "char",
                DType.UINT8: "uchar", DType.INT16: "short", DType.FLOAT16: "ushort",
                DType.BFLOAT16: "ushort"}
OPENCL_UNSIGNED_TYPES = {DType.INT32: "uint", DType.INT64: "ulong", DType.INT8: "uchar",
                         DType.UINT8: "uchar", DType.INT16: "ushort"}
# OpenCL's math built-ins are overloaded on float and double.
OPENCL_MATH_FUNCTIONS = {
    (op, d): name
    for op, name in ((UnaryKind.EXP, "exp"), (UnaryKind.LOG, "log"), (UnaryKind.SQRT, "sqrt"),
                     (UnaryKind.TANH, "tanh"), (UnaryKind.FLOOR, "floor"),
                     (UnaryKind.ABS, "fabs"), (UnaryKind.CEIL, "ceil"),
                     (UnaryKind.ROUND, "rint"), (UnaryKind.SIN, "sin"), (UnaryKind.COS, "cos"),
                     (UnaryKind.TAN, "tan"), (UnaryKind.ERF, "erf"), (UnaryKind.ISNAN, "isnan"))
    for d in (DType.FLOAT32, DType.FLOAT64)
} | {(UnaryKind.ABS, DType.INT32): "abs", (UnaryKind.ABS, DType.INT64): "abs"}
OPENCL_BINARY_FUNCTIONS = {(op, d): op.value for op in (BinOpKind.POW, BinOpKind.FMOD)
                           for d in (DType.FLOAT32, DType.FLOAT64)}
OPENCL_INT_LIMITS = {DType.INT8: (-2**7, 2**7 - 1, "CHAR_MIN"), DType.UINT8: (0, 2**8 - 1, "0"),
                     DType.INT16: (-2**15, 2**15 - 1, "SHRT_MIN"),
                     DType.INT32: (-2**31, 2**31 - 1, "INT_MIN"),
                     DType.INT64: (-2**63, 2**63 - 1, "LONG_MIN")}
OPENCL_KEYWORDS = C_KEYWORDS | frozenset("""
    kernel __kernel global __global local __local constant __constant private __private
    read_only write_only half uchar ushort uint ulong size_t barrier get_group_id get_local_id
    get_global_id get_num_groups get_local_size CLK_LOCAL_MEM_FENCE CLK_GLOBAL_MEM_FENCE
    INT_MIN LONG_MIN CHAR_MIN SHRT_MIN fmod copysign fabs exp log sqrt tanh floor abs pow ceil rint
    sin cos tan erf isnan as_int as_long as_char as_uchar as_short""".split())
INDEX_FUNCTIONS = {AxisLevel.GROUP: "get_group_id", AxisLevel.ITEM: "get_local_id"}
# Signed overflow is undefined in OpenCL C (and clang folds ``a + 1 > a`` to true); NumPy wraps.
# These operations on signed data values are computed in the unsigned type and reinterpreted.
WRAPPING_OPS = frozenset({BinOpKind.ADD, BinOpKind.SUB, BinOpKind.MUL})
WRAPPING_TYPES = frozenset({DType.INT32, DType.INT64})
ADDRESS_SPACES = {MemScope.GLOBAL: "__global ", MemScope.SHARED: "__local ", MemScope.LOCAL: ""}
SPACE_LETTERS = {"__global ": "g", "__local ": "l", "": "p"}


class OpenCLPrinter(GpuPrinter):
    """One OpenCL kernel (a launch); tables and hooks over the C-family printer."""

    target = "opencl"
    types = OPENCL_TYPES
    unsigned_types = OPENCL_UNSIGNED_TYPES
    math_functions = OPENCL_MATH_FUNCTIONS
    binary_functions = OPENCL_BINARY_FUNCTIONS
    libm_suffix = {DType.FLOAT32: "", DType.FLOAT64: ""}
    int_limits = OPENCL_INT_LIMITS
    reserved = OPENCL_KEYWORDS | {"args", "params", "pl_fault", "pl_index_ok"}
    kernel_prefix = "__kernel void "
    index_check_helper = OPENCL_CHECK_HELPER
    stored_halves = frozenset({DType.FLOAT16, DType.BFLOAT16})

    def address_space(self, buffer: Buffer) -> str:
        return ADDRESS_SPACES[buffer.scope]

    def device_function_name(self, function: str, spaces: tuple[str, ...]) -> str:
        """OpenCL C pointers carry their address space: one function per combination
        (``_glp``: global, local, private operands)."""
        return f"{function}_{''.join(SPACE_LETTERS[s] for s in spaces)}"

    def _binary(self, e: BinOp) -> tuple[str, int]:
        """``as_int((uint)a + (uint)b)`` for signed arithmetic on values read from memory:
        it wraps as NumPy does. Index arithmetic on iterators and sizes stays plain: sizes are
        range-checked before a call, and plain arithmetic keeps addressing fast."""
        if e.op not in WRAPPING_OPS or not self._wraps(e):
            return super()._binary(e)
        u, t = self.unsigned_types[e.dtype], self.type_name(e.dtype)
        symbol, _ = self.operators[e.op]
        lhs, rhs = (f"({u}){self._operand(x, UNARY)}" for x in (e.lhs, e.rhs))
        return f"as_{t}({lhs} {symbol} {rhs})", POSTFIX

    def _unary(self, e: Unary) -> tuple[str, int]:
        if e.op is not UnaryKind.NEG or not self._wraps(e):
            return super()._unary(e)
        u, t = self.unsigned_types[e.dtype], self.type_name(e.dtype)
        return f"as_{t}(({u})0 - ({u}){self._operand(e.operand, UNARY)})", POSTFIX

    def _wraps(self, e: Expr) -> bool:
        # narrower integers are promoted to int before the operation: they cannot overflow
        return e.dtype in WRAPPING_TYPES and any(isinstance(x, Load) for x in walk(e))

    def thread_index(self, loop: For) -> str:
        if loop.thread is None:
            raise BuildError(f"loop '{loop.var}' of kernel '{self.kernel.name}' is a thread loop "
                             "without an axis; bind it to blockIdx.x/y/z or threadIdx.x/y/z")
        return f"(long){INDEX_FUNCTIONS[loop.thread.level]}({loop.thread.dim})"

    def loop_pragmas(self, loop: For) -> list[str]:
        # PoCL corrupted the heap running a fully unrolled loop whose trip count is not a
        # constant (the edge tiles of a register-tiled matmul); such a loop is left to the
        # compiler, which still unrolls what it can.
        if loop.kind is LoopKind.UNROLLED and not loop.unroll_factor \
                and trip_count(loop) is None:
            return []
        return super().loop_pragmas(loop)

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

    def parameter(self, buffer: Buffer) -> str:
        const = "const " if buffer.role is BufferRole.INPUT else ""
        # OpenCL leaves the size of bool to the device and forbids it in kernel arguments;
        # NumPy's bool is one byte holding 0 or 1, which uchar reads and writes as such
        element = "uchar" if buffer.dtype is DType.BOOL else self.type_name(buffer.dtype)
        return f"__global {const}{element} *restrict {self.buffer_name(buffer.name)}"


    def fault_parameter(self) -> str:
        return f"__global long *{self.fault_words}"

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
    printers = [_printer(launch) for launch in program.launches]
    sites: list[IndexSite] = []
    numbers: dict[tuple, int] = {}
    for p in printers:      # one numbering of checked accesses across the program's kernels
        p.index_sites, p.index_site_numbers = sites, numbers
    kernels = CodeWriter()
    for p in printers:
        p.emit_kernel(kernels)
        kernels.line()
    w = CodeWriter()
    emit_program_header(w, program, target="OpenCL", verb="enqueued", launch_text=_launch_text)
    prelude = CodeWriter()
    if printers:
        helpers = OpenCLPrinter(program.launches[0].kernel)
        for p in printers:
            helpers.helpers |= p.helpers
            helpers.conversions |= p.conversions
            helpers.intrinsics |= p.intrinsics
        helpers.index_sites = sites
        helpers.emit_prelude(prelude)
    if "double" in kernels.text() or "double" in prelude.text():
        w.line("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        w.line()
    w.lines(prelude.text().splitlines())
    w.lines(kernels.text().splitlines())
    faulting = frozenset(p.kernel.name for p in printers if p.checks_indices)
    return OpenCLUnit(w.text(), tuple(sites), faulting)


def _printer(launch: Launch) -> OpenCLPrinter:
    """The printer of one launch's kernel, which declares the work-group size it is always
    enqueued with (``reqd_work_group_size``): PoCL then compiles the loop over a group's
    work-items for that size (as Loo.py's kernels declare it; measured 2.6x faster on an
    element-wise kernel of 128-item groups)."""
    p = OpenCLPrinter(sink_item_guards(launch.kernel))
    x, y, z = launch.items
    p.kernel_prefix = f"__kernel __attribute__((reqd_work_group_size({x}, {y}, {z}))) void "
    return p


def _launch_text(launch: Launch) -> str:
    groups = ", ".join(str(g) for g in launch.groups)
    items = ", ".join(str(i) for i in launch.items)
    return f"work-groups ({groups}) of ({items}) work-items"


__all__ = ["OpenCLPrinter", "OpenCLUnit", "generate_opencl", "generate_opencl_unit"]
