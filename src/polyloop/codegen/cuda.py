# SPDX-License-Identifier: Apache-2.0
"""The CUDA target: CUDA C++ kernels, one per launch of a ``DeviceProgram``.

Over the GPU printer (``gpu.py``) this is a table and a few hooks: work-group and work-item
loops read ``blockIdx``/``threadIdx``; 'shared' temporaries are ``__shared__`` arrays of the
block; 'local' ones are registers; a barrier is ``__syncthreads()`` (which also orders the
block's global memory accesses), placed only where the exact dependence analysis put one;
unrolled loops get ``#pragma unroll``; pointers are ``__restrict__``; each kernel carries
``__launch_bounds__`` of its block size and is ``extern "C"`` so that its name is the one the
host launches. A vectorized loop of 4 lanes reads its contiguous, provably 16-byte-aligned
float32 elements as ``float4`` (``cuda_vector.py``); any other vectorized loop stays a scalar
loop under ``#pragma unroll``, with a comment saying why. float16 and bfloat16 are ``__half`` and
``__nv_bfloat16``, computed in float32 (``half.py``); a tensor intrinsic whose CUDA body is
warp-collective (tensor cores) is called by the 32 lanes of the warp.
"""
from __future__ import annotations

from ..errors import BuildError
from ..ir.dtypes import DType
from ..ir.loops import Barrier, Call, For, LoopKind, Prefetch
from ..ir.program import Buffer, BufferRole, MemScope
from ..ir.thread_axis import AxisLevel
from ..lower.launches import WARP_LANES, DeviceProgram, Launch
from ..schedule.intrin_registry import DeviceBody
from .cuda_vector import Float4Loop
from .gpu import GpuPrinter, emit_program_header
from .tables import C_KEYWORDS, C_LIBM_SUFFIX, C_MATH_FUNCTIONS
from .writer import CodeWriter

CUDA_TYPES = {DType.BOOL: "bool", DType.INT32: "int", DType.INT64: "long long",
              DType.FLOAT32: "float", DType.FLOAT64: "double", DType.FLOAT16: "__half",
              DType.BFLOAT16: "__nv_bfloat16"}
# 16-bit floats are loaded and stored as themselves and computed in float32 (``half.py``)
# with CUDA's own conversions (round to nearest even); the headers define them
HALF_CONVERSIONS = {DType.FLOAT16: ("__half2float", "__float2half_rn", "cuda_fp16.h"),
                    DType.BFLOAT16: ("__bfloat162float", "__float2bfloat16_rn", "cuda_bf16.h")}
CUDA_UNSIGNED_TYPES = {DType.INT32: "unsigned int", DType.INT64: "unsigned long long"}
# no header defines INT_MIN under NVRTC: the lowest value is written as an expression
CUDA_INT_LIMITS = {DType.INT32: (-2**31, 2**31 - 1, "(-2147483647 - 1)"),
                   DType.INT64: (-2**63, 2**63 - 1, "(-9223372036854775807LL - 1)")}
CUDA_KEYWORDS = C_KEYWORDS | frozenset("""
    __global__ __device__ __shared__ __constant__ __restrict__ __launch_bounds__ __syncthreads
    __forceinline__ blockIdx threadIdx blockDim gridDim warpSize float2 float4 int4 double2
    make_float4 class namespace template typename new delete this public private protected
    operator virtual friend using try catch throw nullptr fmod fmodf copysign copysignf llabs
    """.split()) | frozenset(C_MATH_FUNCTIONS.values())
INDEX_VARIABLES = {AxisLevel.GROUP: "blockIdx", AxisLevel.ITEM: "threadIdx"}
SCOPE_QUALIFIERS = {MemScope.GLOBAL: "", MemScope.SHARED: "__shared__ ", MemScope.LOCAL: ""}
MAX_BLOCK = 1024            # threads per block on every CUDA GPU
WARP_SIZE = 32
# bytes; __shared__ arrays are declared with __align__(32): float4 accesses need 16, tensor-core
# fragment loads and stores (wmma::load_matrix_sync) 32
VECTOR_ALIGNMENT = 32


class CudaPrinter(GpuPrinter):
    """One CUDA kernel (a launch); tables and hooks over the GPU printer.

    >>> from polyloop.ir.loops import Block, Kernel
    >>> CudaPrinter(Kernel("k", (), (), (), Block(()))).kernel_header([])
    'extern "C" __global__ void __launch_bounds__(1) k(void)'
    """

    target = "cuda"
    types = CUDA_TYPES
    unsigned_types = CUDA_UNSIGNED_TYPES
    math_functions = C_MATH_FUNCTIONS
    libm_suffix = C_LIBM_SUFFIX
    int_limits = CUDA_INT_LIMITS
    restrict = "__restrict__"
    helper_qualifier = "static __device__ __forceinline__"
    kernel_prefix = 'extern "C" __global__ void '
    reserved = CUDA_KEYWORDS | {"args", "params"}
    stored_halves = frozenset(HALF_CONVERSIONS)

    def __init__(self, kernel, block_size: int = 1,
                 block_dims: tuple[int, int, int] | None = None) -> None:
        super().__init__(kernel)
        self.block_size = block_size
        self.block_dims = block_dims or (block_size, 1, 1)
        self.warp_depth = 0     # > 0 inside the lanes loop of a warp-collective call
        self.cuda_headers: set[str] = set()     # what the kernel's types and calls need

    def address_space(self, buffer: Buffer) -> str:
        return SCOPE_QUALIFIERS[buffer.scope]

    def type_name(self, d: DType) -> str:
        if d in HALF_CONVERSIONS:
            self.cuda_headers.add(HALF_CONVERSIONS[d][2])
        return super().type_name(d)

    def to_float(self, d: DType) -> str:
        self.cuda_headers.add(HALF_CONVERSIONS[d][2])
        return HALF_CONVERSIONS[d][0]

    def from_float(self, d: DType) -> str:
        self.cuda_headers.add(HALF_CONVERSIONS[d][2])
        return HALF_CONVERSIONS[d][1]

    def thread_index(self, loop: For) -> str:
        if loop.thread is None:
            raise BuildError(f"loop '{loop.var}' of kernel '{self.kernel.name}' is a thread loop "
                             "without an axis; bind it to blockIdx.x/y/z or threadIdx.x/y/z")
        return f"(long long){INDEX_VARIABLES[loop.thread.level]}.{loop.thread.letter}"

    def barrier(self, node: Barrier) -> str:
        return "__syncthreads()"

    # warp-collective tensor intrinsics (tensor cores) ------------------------------------------
    def emit_thread_loop(self, w: CodeWriter, loop: For) -> None:
        """The ``threadIdx.x`` loop of one iteration around a warp-collective call is no guard
        here: all 32 lanes make the call (its body synchronizes the warp)."""
        if WARP_LANES not in loop.annotations:
            super().emit_thread_loop(w, loop)
            return
        w.comment("all 32 lanes of the warp make this call together (tensor cores)")
        self.warp_depth += 1
        try:
            self.emit(w, loop.body)
        finally:
            self.warp_depth -= 1

    def check_warp_call(self, node: Call, body: DeviceBody) -> None:
        if self.block_dims[0] != WARP_SIZE or not self.warp_depth:
            raise BuildError(
                f"tensor intrinsic '{node.function}' in kernel '{self.kernel.name}' is run by "
                f"the {WARP_SIZE} lanes of a warp together: the kernel needs exactly "
                f"{WARP_SIZE} threads on threadIdx.x (it has {self.block_dims[0]}) and the "
                "tensorized loops must not be under a threadIdx.x loop; bind other loops "
                f"(e.g. the shared-memory copies) to threadIdx.x with {WARP_SIZE} threads and "
                "the warps' loops to threadIdx.y/z")
        self.cuda_headers.add("mma.h")

    def emit_prefetch(self, w: CodeWriter, node: Prefetch) -> None:
        w.comment(f"prefetch of {node.buffer}: the GPU's caches need no software prefetch")

    def _wide_int64(self, v: int) -> str:
        return f"{v}LL"

    def headers(self) -> set[str]:
        """The CUDA headers this kernel's code needs (16-bit floats, tensor-core fragments)."""
        return set(self.cuda_headers)

    def kernel_header(self, params: list[str]) -> str:
        return (f"{self.kernel_prefix}__launch_bounds__({self.block_size}) "
                f"{self.kernel.name}({', '.join(params) or 'void'})")

    def parameter(self, buffer: Buffer) -> str:
        const = "const " if buffer.role is BufferRole.INPUT else ""
        return f"{const}{self.type_name(buffer.dtype)} *__restrict__ " \
               f"{self.buffer_name(buffer.name)}"

    def array_declaration(self, buffer: Buffer, *, align: int = 64) -> str:
        text = super().array_declaration(buffer, align=align)
        if buffer.scope is MemScope.SHARED:   # float4 accesses need 16-byte alignment
            return f"__shared__ __align__({VECTOR_ALIGNMENT}) " + text[len("__shared__ "):]
        return text

    # float4 -------------------------------------------------------------------------------------
    def emit_for(self, w: CodeWriter, loop: For) -> None:
        if loop.kind is not LoopKind.VECTORIZED:
            super().emit_for(w, loop)
            return
        vector = Float4Loop(self, loop)
        if vector.why_not is None:
            vector.emit(w)
            return
        w.comment(f"vectorized loop '{loop.var}' is unrolled, not float4: {vector.why_not}")
        super().emit_for(w, loop)

    def loop_pragmas(self, loop: For) -> list[str]:
        if loop.kind is LoopKind.VECTORIZED:
            return ["#pragma unroll"]
        return super().loop_pragmas(loop)


def generate_cuda(program: DeviceProgram) -> str:
    """The CUDA C++ source of all launches of a device program: notes, helpers, kernels.

    >>> import polyloop as pl
    >>> from polyloop.lower.launches import lower_device
    >>> from polyloop.schedule.kernel import schedule_of
    >>> knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")
    >>> sch = schedule_of(pl.split_iname(knl, "i", 128, outer_tag="g.0", inner_tag="l.0"))
    >>> source = generate_cuda(lower_device(sch.program, sch.state.root))
    >>> "__launch_bounds__(128)" in source, "blockIdx.x" in source
    (True, True)
    """
    printers = [CudaPrinter(x.kernel, block_size=_block_size(x), block_dims=x.items)
                for x in program.launches]
    kernels = CodeWriter()
    for p in printers:
        p.emit_kernel(kernels)
        kernels.line()
    w = CodeWriter()
    emit_program_header(w, program, target="CUDA", verb="launched", launch_text=launch_text)
    headers = sorted(set().union(*(p.headers() for p in printers)))
    for header in headers:
        w.line(f"#include <{header}>")
    if headers:
        w.line()
    if printers:
        helpers = CudaPrinter(program.launches[0].kernel)
        for p in printers:
            helpers.helpers |= p.helpers
            helpers.intrinsics |= p.intrinsics
        helpers.emit_prelude(w)
    w.lines(kernels.text().splitlines())
    return w.text()


def _block_size(launch: Launch) -> int:
    size = launch.items[0] * launch.items[1] * launch.items[2]
    if size > MAX_BLOCK:
        raise BuildError(f"kernel '{launch.kernel.name}' has blocks of {launch.items} = {size} "
                         f"threads; CUDA allows at most {MAX_BLOCK}: split the work-item "
                         "(threadIdx / l.N) loops by smaller factors")
    return size


def launch_text(launch: Launch) -> str:
    """``grid (g0, g1, g2) of blocks (t0, t1, t2)``, the sizes as expressions."""
    grid = ", ".join(str(g) for g in launch.groups)
    block = ", ".join(str(i) for i in launch.items)
    return f"grid ({grid}) of blocks ({block})"


__all__ = ["CudaPrinter", "generate_cuda", "launch_text"]
