# SPDX-License-Identifier: Apache-2.0
"""Named GCC vector types and the small ``static inline`` vector helpers generated code calls.

``v16f`` is 16 floats in one 64-byte vector (``float __attribute__((vector_size(64)))``),
``v16f_u`` the same with the alignment of a float, for unaligned loads and stores. Masks, the
result of a comparison, are integer vectors of the same element size (``v16i`` for ``v16f``).
Each helper is emitted once, only when used, after the types it needs; gcc inlines them.

>>> from polyloop.util.isa import classify
>>> lib = VectorLibrary(classify(frozenset({"__AVX512F__", "__AVX512VL__"})))
>>> lib.use(VectorOp.LOAD, VecType(DType.FLOAT32, 16))
'pl_load_v16f'
>>> w = CodeWriter()
>>> lib.emit_prelude(w)
>>> print(w.text(), end="")
typedef float v16f __attribute__((vector_size(64)));
typedef float v16f_u __attribute__((vector_size(64), aligned(4), may_alias));
<BLANKLINE>
static inline v16f pl_load_v16f(const float *p) {
    return *(const v16f_u *)p;
}
"""
from __future__ import annotations

from ..ir.dtypes import DType
from ..util.isa import ISA
from .vector_libm import LIBM_FUNCTIONS, libm_helper, rounding_call
from .vector_math import exp_body, exp_body_avx512
from .vector_types import SUFFIX, VecType, VectorOp
from .writer import CodeWriter

__all__ = ["SUFFIX", "VecType", "VectorLibrary", "VectorOp", "helper_name"]

_X86_PREFIX = {64: "_mm512", 32: "_mm256", 16: "_mm"}
_X86_SUFFIX = {DType.FLOAT32: "ps", DType.FLOAT64: "pd", DType.INT32: "epi32",
               DType.INT64: "epi64"}
_X86_TYPE = {(64, DType.FLOAT32): "__m512", (64, DType.FLOAT64): "__m512d",
             (32, DType.FLOAT32): "__m256", (32, DType.FLOAT64): "__m256d",
             (16, DType.FLOAT32): "__m128", (16, DType.FLOAT64): "__m128d"}
_X86_INT_TYPE = {64: "__m512i", 32: "__m256i", 16: "__m128i"}
_SQRT_MACRO = {64: "__AVX512F__", 32: "__AVX__", 16: "__SSE2__"}
_STREAM_MACRO = _SQRT_MACRO    # the streaming stores of each vector size come with the same ISA
_X86_STREAM_INT = {64: "_mm512_stream_si512", 32: "_mm256_stream_si256", 16: "_mm_stream_si128"}


_NEEDS = {VectorOp.MAX: (VectorOp.SELECT,), VectorOp.MIN: (VectorOp.SELECT,),
          VectorOp.EXP: (VectorOp.SELECT, VectorOp.BROADCAST)}


_USES_MASK = frozenset({VectorOp.SELECT, VectorOp.MAX, VectorOp.MIN, VectorOp.ABS, VectorOp.EXP,
                        VectorOp.LOAD_WHERE, VectorOp.LOAD_WHERE_MASKED})
_INTRINSICS = frozenset({VectorOp.LOAD_MASKED, VectorOp.STORE_MASKED, VectorOp.LOAD_WHERE,
                         VectorOp.LOAD_WHERE_MASKED, VectorOp.STORE_STREAM,
                         VectorOp.LOAD_WHERE_BITS, VectorOp.SELECT_BITS})
_UNALIGNED = frozenset({VectorOp.LOAD, VectorOp.STORE})
_AVX512_FLOAT_OPS = frozenset({VectorOp.MAX, VectorOp.MIN, VectorOp.EXP})   # fewer instructions


class VectorLibrary:
    """The vector types and helpers one translation unit uses, for one ISA."""

    def __init__(self, isa: ISA) -> None:
        self.isa = isa
        self.types: set[VecType] = set()
        self.helpers: set[tuple[VectorOp, VecType]] = set()
        self.needs_immintrin = False

    def type(self, t: VecType) -> str:
        """The name of vector type ``t``, recorded so that the prelude defines it."""
        self.types.add(t)
        return t.name

    def use(self, op: VectorOp, t: VecType) -> str:
        """The name of helper ``op`` on vectors of type ``t``, recorded for the prelude."""
        for dep in _NEEDS.get(op, ()):
            self.use(dep, t)
        if op is VectorOp.ABS and not t.dtype.is_float:
            self.use(VectorOp.SELECT, t)
        self.types.add(t)
        if op in _USES_MASK:
            self.types.add(t.mask)
        if op in _INTRINSICS or op is VectorOp.SQRT and self._sqrt_intrinsic(t) \
                or op in _AVX512_FLOAT_OPS and self._avx512_float(t) \
                or rounding_call(op, t, self.isa) is not None:
            self.needs_immintrin = True
        self.helpers.add((op, t))
        return helper_name(op, t)

    def streams(self, t: VecType) -> bool:
        """Whether vectors of type ``t`` have a streaming (non-temporal) store on this ISA."""
        return t.bytes in _STREAM_MACRO and self.isa.has(_STREAM_MACRO[t.bytes])

    def fence(self) -> str:
        """The statement that orders earlier streaming stores before every later store."""
        self.needs_immintrin = True
        return "_mm_sfence()"

    def emit_prelude(self, w: CodeWriter) -> None:
        """Type definitions, then helper definitions, in a fixed order."""
        for t in sorted(self.types, key=lambda t: (t.lanes, list(SUFFIX).index(t.dtype))):
            w.line(f"typedef {t.element} {t.name} __attribute__((vector_size({t.bytes})));")
            if any(op in _UNALIGNED and u == t for op, u in self.helpers):
                w.line(f"typedef {t.element} {t.unaligned} __attribute__((vector_size({t.bytes}), "
                       f"aligned({t.dtype.itemsize}), may_alias));")
        if self.types:
            w.line()
        order = list(VectorOp)
        for op, t in sorted(self.helpers, key=lambda h: (order.index(h[0]), h[1].lanes,
                                                            list(SUFFIX).index(h[1].dtype))):
            self._emit_helper(w, op, t)
            w.line()

    # helper bodies -----------------------------------------------------------------------------
    def _emit_helper(self, w: CodeWriter, op: VectorOp, t: VecType) -> None:
        v, e, name = t.name, t.element, helper_name(op, t)
        signature, body = {
            VectorOp.BROADCAST: (f"{v} {name}({e} x)",
                                 [f"return ({v}){{{', '.join(['x'] * t.lanes)}}};"]),
            VectorOp.LOAD: (f"{v} {name}(const {e} *p)", [f"return *(const {t.unaligned} *)p;"]),
            VectorOp.LOAD_ALIGNED: (f"{v} {name}(const {e} *p)", [f"return *(const {v} *)p;"]),
            VectorOp.STORE: (f"void {name}({e} *p, {v} x)", [f"*({t.unaligned} *)p = x;"]),
            VectorOp.STORE_ALIGNED: (f"void {name}({e} *p, {v} x)", [f"*({v} *)p = x;"]),
            VectorOp.SELECT: (f"{v} {name}({t.mask.name} m, {v} a, {v} b)",
                              [self._select_body(t)]),
        }.get(op, (None, None))
        if signature is None:
            signature, body = self._math_helper(op, t)
        with w.block(f"static inline {signature}"):
            w.lines(body)

    @staticmethod
    def _select_body(t: VecType) -> str:
        m = t.mask.name
        if t.dtype.is_int:
            return "return (m & a) | (~m & b);"
        return f"return ({t.name})((m & ({m})a) | (~m & ({m})b));"

    def _math_helper(self, op: VectorOp, t: VecType) -> tuple[str, list[str]]:
        """Signature and body of every helper but the one-line ones of ``_emit_helper``."""
        if op in LIBM_FUNCTIONS:
            return libm_helper(op, t, self.isa, helper_name(op, t))
        for family in (self._masked_memory_helper, self._lane_helper, self._arith_helper):
            found = family(op, t)
            if found is not None:
                return found
        raise AssertionError(op)

    def _masked_memory_helper(self, op: VectorOp, t: VecType) -> tuple[str, list[str]] | None:
        """Loads and stores of some lanes (AVX-512 masks), and streaming stores."""
        v, e, m, name = t.name, t.element, t.mask.name, helper_name(op, t)
        if op is VectorOp.LOAD_MASKED:
            return (f"{v} {name}(const {e} *p, int64_t n)",
                    ["// lanes n and above read nothing (no fault) and are 0",
                     f"return ({v}){_x86(t, 'maskz_loadu')}({_mask(t)}, p);"])
        if op in (VectorOp.LOAD_WHERE, VectorOp.LOAD_WHERE_MASKED):
            masked = op is VectorOp.LOAD_WHERE_MASKED
            bits = f"{_X86_PREFIX[t.bytes]}_cmpneq_{_X86_SUFFIX[t.mask.dtype]}_mask(" \
                   f"({_X86_INT_TYPE[t.bytes]})m, ({_X86_INT_TYPE[t.bytes]}){{0}})"
            if masked:
                bits += f" & {_mask(t)}"
            return (f"{v} {name}(const {e} *p, {m} m" + (", int64_t n)" if masked else ")"),
                    ["// lanes where m is 0" + (" or at n and above" if masked else "")
                     + " read nothing (no fault) and are 0",
                     f"return ({v}){_x86(t, 'maskz_loadu')}({bits}, p);"])
        if op is VectorOp.LOAD_WHERE_BITS:
            return (f"{v} {name}(const {e} *p, uint32_t k)",
                    ["// lanes whose bit is clear read nothing (no fault) and are 0",
                     f"return ({v}){_x86(t, 'maskz_loadu')}(({_kmask(t)})k, p);"])
        if op is VectorOp.SELECT_BITS:
            cast = _X86_TYPE.get((t.bytes, t.dtype), _X86_INT_TYPE[t.bytes])
            return (f"{v} {name}(uint32_t k, {v} a, {v} b)",
                    ["// a where the lane's bit is set, else b",
                     f"return ({v}){_x86(t, 'mask_blend')}(({_kmask(t)})k, ({cast})b, ({cast})a);"])
        if op is VectorOp.STORE_STREAM:
            return self._stream_helper(t, name)
        if op is VectorOp.STORE_MASKED:
            cast = _X86_TYPE.get((t.bytes, t.dtype), _X86_INT_TYPE[t.bytes])
            return (f"void {name}({e} *p, {v} x, int64_t n)",
                    [f"{_x86(t, 'mask_storeu')}(p, {_mask(t)}, ({cast})x);"])
        return None

    @staticmethod
    def _stream_helper(t: VecType, name: str) -> tuple[str, list[str]]:
        if t.dtype.is_int:
            cast = _X86_INT_TYPE[t.bytes]
            call = f"{_X86_STREAM_INT[t.bytes]}(({cast} *)p, ({cast})x);"
        else:
            call = f"{_x86(t, 'stream')}(p, ({_X86_TYPE[(t.bytes, t.dtype)]})x);"
        return (f"void {name}({t.element} *p, {t.name} x)",
                [f"// p is {t.bytes}-byte aligned: the line is written without being read", call])

    @staticmethod
    def _lane_helper(op: VectorOp, t: VecType) -> tuple[str, list[str]] | None:
        """Lane numbers, lane masks of a count, and alignment gaps."""
        v, e, name = t.name, t.element, helper_name(op, t)
        if op is VectorOp.IOTA:
            lanes = ", ".join(str(lane) for lane in range(t.lanes))
            return f"{v} {name}(void)", [f"return ({v}){{{lanes}}};"]
        if op is VectorOp.LANE_OFFSET:
            return (f"{e} {name}(int64_t d)",
                    ["// few lanes: d clamped gives the same answers",
                     "const int64_t limit = (int64_t)1 << 30;",
                     f"return ({e})(d < -limit ? -limit : d > limit ? limit : d);"])
        if op is VectorOp.LANES_BELOW:
            return ("uint32_t " + name + "(int64_t n)",
                    [f"// bit l set for the lanes l < n, n clamped to [0, {t.lanes}]",
                     f"const int64_t c = n < 0 ? 0 : n > {t.lanes} ? {t.lanes} : n;",
                     "return (uint32_t)(((uint64_t)1 << c) - 1);"])
        if op is VectorOp.ALIGN_GAP:
            return (f"int64_t {name}(const {e} *p)",
                    [f"// elements from p to the next {t.bytes}-byte boundary; -1 if p is not "
                     "aligned to its element, then it never reaches one",
                     "const uintptr_t a = (uintptr_t)p;",
                     f"if (a % sizeof({e}) != 0) return -1;",
                     f"return (int64_t)(((uintptr_t){t.bytes} - a % {t.bytes}) % {t.bytes} "
                     f"/ sizeof({e}));"])
        return None

    def _arith_helper(self, op: VectorOp, t: VecType) -> tuple[str, list[str]] | None:
        """max, min, abs, sqrt and exp."""
        v, m, name = t.name, t.mask.name, helper_name(op, t)
        select = helper_name(VectorOp.SELECT, t)
        if op in (VectorOp.MAX, VectorOp.MIN, VectorOp.EXP) and self._avx512_float(t):
            return self._avx512_float_helper(op, t)
        if op in (VectorOp.MAX, VectorOp.MIN):
            cmp = ">=" if op is VectorOp.MAX else "<="
            if t.dtype.is_int:
                return f"{v} {name}({v} a, {v} b)", [f"return {select}(({m})(a {cmp} b), a, b);"]
            return (f"{v} {name}({v} a, {v} b)",
                    ["// a != a: NaN propagates, as in np.maximum / np.minimum",
                     f"return {select}(({m})(a {cmp} b) | ({m})(a != a), a, b);"])
        if op is VectorOp.ABS:
            if t.dtype.is_int:
                return f"{v} {name}({v} x)", [f"return {select}(({m})(x < 0), -x, x);"]
            magnitude = "0x7fffffff" if t.dtype is DType.FLOAT32 else "INT64_MAX"
            return (f"{v} {name}({v} x)",
                    [f"return ({v})(({m})x & {magnitude});  // clear the sign bit"])
        if op is VectorOp.SQRT:
            if self._sqrt_intrinsic(t):
                cast = _X86_TYPE[(t.bytes, t.dtype)]
                return f"{v} {name}({v} x)", [f"return ({v}){_x86(t, 'sqrt')}(({cast})x);"]
            libm = "sqrtf" if t.dtype is DType.FLOAT32 else "sqrt"
            return (f"{v} {name}({v} x)",
                    [f"{v} r;", f"for (int l = 0; l < {t.lanes}; l++) r[l] = {libm}(x[l]);",
                     "return r;"])
        if op is VectorOp.EXP:
            return (f"{v} {name}({v} x)",
                    exp_body(t.dtype, v, m, select, helper_name(VectorOp.BROADCAST, t)))
        return None

    def _avx512_float(self, t: VecType) -> bool:
        """AVX-512 instructions (masks, vscalef, vroundscale) for float vectors of type ``t``."""
        return t.dtype.is_float and (t.bytes == 64 and self.isa.has("__AVX512F__")
                                     or t.bytes in (16, 32) and self.isa.has("__AVX512VL__"))

    def _avx512_float_helper(self, op: VectorOp, t: VecType) -> tuple[str, list[str]]:
        v, name, x86 = t.name, helper_name(op, t), _X86_TYPE[(t.bytes, t.dtype)]
        if op is VectorOp.EXP:
            return f"{v} {name}({v} x)", exp_body_avx512(t.dtype, v, x86,
                                                         _X86_PREFIX[t.bytes],
                                                         _X86_SUFFIX[t.dtype])
        # vmax(b, a) is b > a ? b : a, and a where either is NaN (the second operand): the
        # same as a >= b || a != a ? a : b except where b is NaN, which the mask puts back
        which = "max" if op is VectorOp.MAX else "min"
        return (f"{v} {name}({v} a, {v} b)",
                ["// NaN propagates, as in np.maximum / np.minimum",
                 f"const {x86} m = {_x86(t, which)}(({x86})b, ({x86})a);",
                 f"return ({v}){_x86(t, 'mask_mov')}(m, {_x86(t, 'cmp')}_mask(({x86})b, "
                 f"({x86})b, _CMP_UNORD_Q), ({x86})b);"])

    def _sqrt_intrinsic(self, t: VecType) -> bool:
        return t.dtype.is_float and t.bytes in _SQRT_MACRO and self.isa.has(_SQRT_MACRO[t.bytes])


def helper_name(op: VectorOp, t: VecType) -> str:
    return f"pl_{op.value}_{t.name}"


def _x86(t: VecType, what: str) -> str:
    return f"{_X86_PREFIX[t.bytes]}_{what}_{_X86_SUFFIX[t.dtype]}"


def _kmask(t: VecType) -> str:
    return "__mmask16" if t.lanes > 8 else "__mmask8"


def _mask(t: VecType) -> str:
    return f"({_kmask(t)})((1u << n) - 1u)"
