# SPDX-License-Identifier: Apache-2.0
"""The kernel's name: the entry point of the generated code, so a valid identifier that no
language keyword, standard-header function, buffer or size parameter already takes.

>>> from polyloop.lower.names import is_reserved
>>> is_reserved("expf"), is_reserved("M_PI"), is_reserved("linux"), is_reserved("matmul")
(True, True, True, False)
"""
from __future__ import annotations

import re

SUFFIX = "_kernel"

# Keywords of C99/C11 and of the C++ that CUDA compiles, and the names the C-family targets'
# code generators reserve for themselves (the ``pl_`` helper prefix is checked separately).
_KEYWORDS = frozenset("""
    auto break case char const continue default do double else enum extern float for goto if
    inline int long register restrict return short signed sizeof static struct switch typedef
    union unsigned void volatile while bool true false NULL main _Alignas _Alignof _Atomic _Bool
    _Complex _Generic _Imaginary _Noreturn _Static_assert _Thread_local asm catch class
    const_cast delete dynamic_cast explicit friend mutable namespace new operator private
    protected public reinterpret_cast static_cast template this throw try typeid typename using
    virtual kernel global local constant private""".split())

# Functions and macros of math.h (each with its ``f`` and ``l`` variants) and of stdlib.h,
# stdint.h and stdbool.h, which every generated C file includes; a kernel named like one of
# them would redeclare it.
_MATH = """acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh drem erf erfc exp
    exp10 exp2 expm1 fabs fdim finite floor fma fmax fmin fmod frexp gamma hypot ilogb isinf
    isnan j0 j1 jn ldexp lgamma llrint llround log log10 log1p log2 logb lrint lround modf nan
    nearbyint nextafter nexttoward pow pow10 remainder remquo rint round scalb scalbln scalbn
    significand sin sincos sinh sqrt tan tanh tgamma trunc y0 y1 yn""".split()
_OTHER = frozenset("""
    abs labs llabs div ldiv lldiv malloc calloc realloc free aligned_alloc posix_memalign
    valloc alloca abort exit _Exit atexit at_quick_exit quick_exit on_exit getenv setenv
    unsetenv putenv clearenv system atof atoi atol atoll strtod strtof strtol strtold strtoll
    strtoul strtoull strtoq strtouq qsort bsearch rand srand rand_r random srandom initstate
    setstate drand48 erand48 lrand48 nrand48 mrand48 jrand48 srand48 seed48 lcong48 mblen
    mbtowc mbstowcs wctomb wcstombs realpath mkstemp mkdtemp mktemp select pselect ecvt fcvt
    gcvt rpmatch getloadavg getsubopt arc4random reallocarray isfinite isnormal signbit
    fpclassify isgreater isless INFINITY NAN HUGE_VAL HUGE_VALF EOF size_t ptrdiff_t int8_t
    int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t intptr_t uintptr_t intmax_t
    uintmax_t div_t ldiv_t lldiv_t float_t double_t""".split())
# Lower-case macros the included headers define (``gcc -dM -E`` in GNU mode: ``linux`` and
# ``unix`` expand to 1), and the BSD type names stdlib.h brings in through sys/types.h.
_MACROS = frozenset("""
    linux unix i386 alloca offsetof math_errhandling isfinite isgreater isgreaterequal isinf
    isless islessequal islessgreater isnan isnormal isunordered signbit fpclassify be16toh
    be32toh be64toh htobe16 htobe32 htobe64 htole16 htole32 htole64 le16toh le32toh le64toh
    errno assert stdin stdout stderr uint ushort ulong u_char u_short u_int u_long fd_set
    timeval timespec""".split())
_RESERVED = (_KEYWORDS | _OTHER | _MACROS
             | frozenset(f + s for f in _MATH for s in ("", "f", "l")))
# Macro-like names (``INT64_MAX``, ``M_PI``, ``RAND_MAX``: headers and OpenCL define many),
# POSIX's reserved type names (``*_t``) and OpenCL's vector types (``float4``, ``int8``).
_PATTERN = re.compile(r"[A-Z][A-Z0-9_]+|.*_t|(u?(char|short|int|long)|float|double|half|bool)"
                      r"(2|3|4|8|16)")

_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def is_reserved(name: str) -> bool:
    """Would ``name`` clash with the language, its standard headers or the code generators?"""
    return (name in _RESERVED or name.startswith(("pl_", "_"))
            or _PATTERN.fullmatch(name) is not None)


def kernel_name(wanted: str, taken: set[str]) -> str:
    """``wanted`` if it is free, else a valid identifier made from it.

    >>> kernel_name("matmul", {"A", "C"}), kernel_name("C", {"A", "C"}), kernel_name("log", set())
    ('matmul', 'C_kernel', 'log_kernel')
    """
    name = re.sub(r"[^A-Za-z0-9_]", "_", wanted)
    if not _IDENTIFIER.fullmatch(name):
        name = "kernel_" + name if name else "kernel"
    if name.startswith("pl_"):   # the helpers' prefix: keep the user's name readable after it
        name = "kernel_" + name
    while is_reserved(name) or name in taken:
        name += SUFFIX
    return name
