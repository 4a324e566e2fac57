# SPDX-License-Identifier: Apache-2.0
"""The tensor-core intrinsic: a 16 x 16 tile of float32 ``c`` updated with ``kc`` steps of
``a @ b`` on float16 or bfloat16 inputs (``c[i, j] += float32(a[i, k]) * float32(b[k, j])``).

It has three bodies with the same meaning, each element summed in float32:

* CUDA: ``nvcuda::wmma`` 16 x 16 x 16 fragments (``mma.sync`` on sm_80 and later), called by
  the 32 lanes of a warp together: the tile of ``c`` is loaded into an accumulator fragment
  once, each 16-deep step of k loads an ``a`` and a ``b`` fragment and multiplies, and the
  result is stored once. Operands that fragments cannot load (not 32-byte aligned, a leading
  dimension that is not a multiple of 16 bytes) and the last ``kc mod 16`` steps are summed by
  the lanes, eight elements each.
* OpenCL: the same sum as plain loops run by one work-item, so that a schedule's index
  mapping, tiling and shared-memory staging are proven on any OpenCL device (PoCL in CI).
* C: the same loops, for tensorizing on the CPU.

>>> t = wmma_intrin("float16")
>>> t.name, t.extents, sorted(t.devices)
('pl_wmma_f16_16x16x16', (16, 16, None), ['cuda', 'opencl'])
"""
from __future__ import annotations

import functools
import re

from ..errors import ArgumentError, ScheduleError
from ..frontend import te
from ..schedule.intrin_registry import DeviceBody, TensorIntrin

TILE = 16
DTYPES = {"float16": "f16", "bfloat16": "bf16"}
PREFIX = "pl_wmma_"
_NAME = re.compile(r"pl_wmma_(?P<d>f16|bf16)_16x16x16\Z")


def wmma_name(dtype: str) -> str:
    """``pl_wmma_f16_16x16x16`` or ``pl_wmma_bf16_16x16x16``."""
    return f"{PREFIX}{DTYPES[dtype]}_{TILE}x{TILE}x{TILE}"


def wmma_description(dtype: str) -> te.Tensor:
    """``c[i, j] += sum_k float32(a[i, k]) * float32(b[k, j])`` on a 16 x 16 tile, kc steps."""
    kc = te.var("kc")
    a = te.placeholder((TILE, kc), dtype, name="a")
    b = te.placeholder((kc, TILE), dtype, name="b")
    k = te.reduce_axis((0, kc), name="k")
    return te.compute((TILE, TILE), lambda i, j: te.sum(
        a[i, k].astype("float32") * b[k, j].astype("float32"), axis=k), name="c")


# C: float16 is _Float16; bfloat16 is its bits (uint16_t), widened by a shift
_C_TYPES = {"float16": ("_Float16", "(float)({x})"),
            "bfloat16": ("uint16_t", "pl_wmma_bf16_f32({x})")}
_C_BF16 = """static inline float pl_wmma_bf16_f32(uint16_t h) {
    union { uint32_t u; float f; } v = { (uint32_t)h << 16 };
    return v.f;
}
"""
_LOOPS = """    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {{
            float s = c[i * ldc + j];
            for ({index} k = 0; k < kc; k++)
                s += {a} * {b};
            c[i * ldc + j] = s;
        }}"""


def _loops(index: str, widen: str) -> str:
    return _LOOPS.format(index=index, a=widen.format(x="a[i * lda + k]"),
                         b=widen.format(x="b[k * ldb + j]"))


def c_source(dtype: str) -> str:
    """The C body: the tile's sums as plain loops."""
    t, widen = _C_TYPES[dtype]
    head = (f"static inline void {wmma_name(dtype)}(float *restrict c, const {t} *restrict a, "
            f"const {t} *restrict b, int64_t ldc, int64_t lda, int64_t ldb, int64_t kc) {{")
    return (_C_BF16 if dtype == "bfloat16" else "") + "\n".join(
        [head, _loops("int64_t", widen), "}"])


def opencl_source(dtype: str, name: str, spaces: tuple[str, ...]) -> str:
    """The OpenCL body for operands in ``spaces``: 16-bit floats are ushort bits, widened with
    ``vload_half`` (float16, no cl_khr_fp16 needed) or a shift (bfloat16)."""
    sc, sa, sb = spaces

    def widen(space: str, x: str) -> str:
        if dtype == "float16":
            return f"vload_half(0, (const {space}half *)&{x})"
        return f"as_float((uint){x} << 16)"
    head = (f"static inline void {name}({sc}float *c, {sa}const ushort *a, {sb}const ushort *b, "
            "long ldc, long lda, long ldb, long kc) {")
    body = _LOOPS.format(index="long", a=widen(sa, "a[i * lda + k]"),
                         b=widen(sb, "b[k * ldb + j]"))
    return "\n".join([head, body, "}"])


_CUDA = """static __device__ __forceinline__ void {name}(float *c, const {t} *a, const {t} *b,
        long long ldc, long long lda, long long ldb, long long kc) {{
    // called by the 32 lanes of the warp together (threadIdx.x is the lane): the tile is
    // accumulated in a tensor-core fragment, each 16-deep step of k is one mma
    namespace wmma = nvcuda::wmma;
    const int lane = threadIdx.x;
    __syncwarp();   // lane 0's earlier writes (the program's order) are seen by every lane
    long long k = 0;
    const bool fragments = (((unsigned long long)c | (unsigned long long)a
                             | (unsigned long long)b) % 32 == 0)
                           && ldc % 4 == 0 && lda % 8 == 0 && ldb % 8 == 0 && kc >= 16;
    if (fragments) {{
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::load_matrix_sync(acc, c, (unsigned)ldc, wmma::mem_row_major);
        for (; k + 16 <= kc; k += 16) {{
            wmma::fragment<wmma::matrix_a, 16, 16, 16, {t}, wmma::row_major> fa;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, {t}, wmma::row_major> fb;
            wmma::load_matrix_sync(fa, a + k, (unsigned)lda);
            wmma::load_matrix_sync(fb, b + k * ldb, (unsigned)ldb);
            wmma::mma_sync(acc, fa, fb, acc);
        }}
        wmma::store_matrix_sync(c, acc, (unsigned)ldc, wmma::mem_row_major);
        __syncwarp();
    }}
    // the steps of k left (all of them when fragments cannot load the operands): lane l sums
    // the elements l, l + 32, ..., l + 224 of the tile
    for (int e = lane; e < 256; e += 32) {{
        const int i = e / 16, j = e % 16;
        float s = c[i * ldc + j];
        for (long long q = k; q < kc; q++)
            s += {widen}(a[i * lda + q]) * {widen}(b[q * ldb + j]);
        c[i * ldc + j] = s;
    }}
    __syncwarp();   // every lane's part of c is written before lane 0 goes on
}}"""
_CUDA_TYPES = {"float16": ("__half", "__half2float"),
               "bfloat16": ("__nv_bfloat16", "__bfloat162float")}


def cuda_source(dtype: str, name: str, spaces: tuple[str, ...]) -> str:
    """The CUDA body (generic pointers: ``spaces`` do not matter)."""
    t, widen = _CUDA_TYPES[dtype]
    return _CUDA.format(name=name, t=t, widen=widen)


@functools.cache
def wmma_intrin(dtype: str = "float16") -> TensorIntrin:
    """The 16 x 16 tensor-core tile update for ``dtype`` inputs ("float16" or "bfloat16") with
    float32 accumulation; k is any length (``kc``, passed to the call).

    Tensorize a nest ``i (16) > j (16) > k`` whose body is
    ``C[i, j] += float32(A[i, k]) * float32(B[k, j])`` with C float32 and A, B contiguous
    along their last dimension. On CUDA the 32 lanes of a warp make each call: bind the
    kernel's other loops so that threadIdx.x has exactly 32 threads, the warps' loops to
    threadIdx.y/z, and keep the tensorized nest outside any threadIdx.x loop (see
    ``polyloop.ops.matmul_tensorcore``).

    >>> wmma_intrin("bfloat16").operands
    ('c', 'a', 'b')
    """
    if dtype not in DTYPES:
        raise ArgumentError(f"wmma_intrin: tensor cores take float16 or bfloat16 inputs, not "
                            f"{dtype!r}")
    devices = {
        "opencl": DeviceBody(functools.partial(opencl_source, dtype)),
        "cuda": DeviceBody(functools.partial(cuda_source, dtype), warp=True),
    }
    return TensorIntrin(wmma_description(dtype), c_source(dtype), name=wmma_name(dtype),
                        devices=devices)


def builtin_wmma(name: str) -> TensorIntrin:
    """The tensor-core intrinsic called ``name`` (trace replay)."""
    m = _NAME.match(name)
    if m is None:
        raise ScheduleError(f"tensorize: unknown intrinsic {name!r}: tensor-core intrinsics are "
                            "named pl_wmma_f16_16x16x16 or pl_wmma_bf16_16x16x16")
    return wmma_intrin({v: k for k, v in DTYPES.items()}[m["d"]])


__all__ = ["PREFIX", "builtin_wmma", "wmma_description", "wmma_intrin", "wmma_name"]
