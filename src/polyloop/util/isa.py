# SPDX-License-Identifier: Apache-2.0
"""The host's vector unit as the C compiler sees it with ``-march=native``.

Code generation (vector types, micro-kernels) and the benchmark harness ask this module, so the
answer comes from one place: the predefined macros of ``cc -march=native``, which is exactly what
the generated code is compiled with. (``util`` sits beside ``config``, so the compiler
is a parameter.)

>>> from polyloop.util.isa import host_isa
>>> isa = host_isa()
>>> isa.vector_bytes in (16, 32, 64)
True
>>> isa.lanes("float32") * 4 == isa.vector_bytes
True
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from .process import ProcessTimeout, run_limited

_BYTES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8, "int8": 1, "int16": 2,
          "uint8": 1, "float16": 2}


@dataclass(frozen=True, slots=True)
class ISA:
    """``name`` is one of ``avx512``, ``avx2``, ``avx``, ``sse``, ``neon``, ``generic``."""

    name: str
    vector_bytes: int
    fma: bool
    macros: frozenset[str]
    # the GNU C library the code links against, (major, minor); None: another C library or
    # unknown. Its libmvec has vector sin, cos, log, pow (2.22) and tan, erf, tanh (2.35).
    glibc: tuple[int, int] | None = None

    def lanes(self, dtype: str) -> int:
        """Elements of ``dtype`` in one vector register."""
        return max(1, self.vector_bytes // _BYTES[str(dtype)])

    def has(self, macro: str) -> bool:
        """Whether the compiler predefines ``macro`` (e.g. ``"__AVX512F__"``)."""
        return macro in self.macros


GENERIC = ISA("generic", 16, False, frozenset())


def classify(macros: frozenset[str]) -> ISA:
    """The ISA implied by a set of predefined macro names."""
    fma = "__FMA__" in macros or "__ARM_FEATURE_FMA" in macros
    if "__AVX512F__" in macros:
        return ISA("avx512", 64, True, macros)
    if "__AVX2__" in macros:
        return ISA("avx2", 32, fma, macros)
    if "__AVX__" in macros:
        return ISA("avx", 32, fma, macros)
    if "__SSE2__" in macros:
        return ISA("sse", 16, fma, macros)
    if "__ARM_NEON" in macros:
        return ISA("neon", 16, fma, macros)
    return ISA("generic", 16, False, macros)


def host_isa(cc: str = "gcc") -> ISA:
    """The vector ISA ``cc -march=native`` targets (``GENERIC`` if the compiler cannot say).

    Callers pass ``config.CONFIG.cc`` so that ``POLYLOOP_CC`` is honoured."""
    return compiler_isa(cc, ("-march=native",))


@functools.cache
def compiler_isa(cc: str, flags: tuple[str, ...]) -> ISA:
    """The vector ISA ``cc`` targets with the architecture ``flags`` (``-march=native`` for
    this machine, ``-mcpu=cortex-a76`` for a device; ``GENERIC`` if the compiler cannot say).

    >>> compiler_isa("gcc", ("-march=x86-64",)).name in ("sse", "generic", "neon")
    True
    """
    command = [cc, *flags, "-dM", "-E", "-x", "c", "/dev/null"]
    try:
        done = run_limited(command, timeout=30)
    except (OSError, ProcessTimeout):
        return GENERIC
    if done.returncode != 0:
        return GENERIC
    out = done.stdout
    names = frozenset(line.split()[1] for line in out.splitlines()
                      if line.startswith("#define ") and len(line.split()) >= 2)
    return replace(classify(names), glibc=_glibc(cc))


def _glibc(cc: str) -> tuple[int, int] | None:
    """The glibc version ``<features.h>`` declares, or None (no glibc, or no answer)."""
    command = [cc, "-dM", "-E", "-x", "c", "-include", "features.h", "/dev/null"]
    try:
        done = run_limited(command, timeout=30)
    except (OSError, ProcessTimeout):
        return None
    if done.returncode != 0:
        return None
    found = {}
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in ("__GLIBC__", "__GLIBC_MINOR__") and parts[2].isdigit():
            found[parts[1]] = int(parts[2])
    if len(found) != 2:
        return None
    return found["__GLIBC__"], found["__GLIBC_MINOR__"]
