# SPDX-License-Identifier: Apache-2.0
"""Where generated C runs: this machine, or a device of another architecture.

A target is written as TVM writes it, ``"c -mtriple=aarch64-linux-gnu -mcpu=cortex-a76
-mattr=+dotprod"``, or built as ``Target("aarch64-linux-gnu", mcpu="cortex-a76")``. The
triple chooses the cross compiler (Debian's ``aarch64-linux-gnu-gcc``, or the one named by
``POLYLOOP_CC_AARCH64_LINUX_GNU``) and the architecture flags; the vector ISA code generation
writes for is read from that compiler's predefined macros with those flags, so an x86
intrinsic never reaches an ARM or RISC-V device. Plain ``"c"`` is this machine
(``-march=native``). A library built for another machine cannot be loaded here: run it over
RPC (``polyloop.rpc``).

>>> t = Target.parse("c -mtriple=aarch64-linux-gnu -mcpu=cortex-a76")
>>> str(t), t.arch_flags, t.runs_here
('c -mtriple=aarch64-linux-gnu -mcpu=cortex-a76', ('-mcpu=cortex-a76',), False)
>>> Target.parse("c").runs_here
True
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from .. import config
from ..errors import PolyloopError
from ..util.isa import ISA, compiler_isa
from ..util.process import ProcessTimeout, run_limited

# architecture (first part of the triple, with its aliases) -> Debian's compiler prefix part
_ARCHES = {"aarch64": "aarch64", "arm64": "aarch64", "arm": "arm", "armv7": "arm",
           "armv7l": "arm", "armv7a": "arm", "armhf": "arm", "riscv64": "riscv64",
           "x86_64": "x86_64", "amd64": "x86_64"}
# the canonical triple of each architecture (what Debian's cross compilers are called)
TRIPLES = {"aarch64": "aarch64-linux-gnu", "arm": "arm-linux-gnueabihf",
           "riscv64": "riscv64-linux-gnu", "x86_64": "x86_64-linux-gnu"}
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
_OPTIONS = ("-mtriple", "-mcpu", "-mattr")


@dataclass(frozen=True, slots=True)
class Target:
    """A C target: ``triple`` (None: this machine), ``mcpu`` (a CPU name the compiler knows,
    e.g. ``cortex-a76``) and ``mattr`` (features to add, ``"+dotprod"``, or remove,
    ``"-neon"``). Build with it: ``pl.build(sch, target=Target("aarch64-linux-gnu"))``.

    >>> Target("armv7l-none-linux-gnueabihf").triple
    'arm-linux-gnueabihf'
    >>> Target("riscv64-linux-gnu", mattr=("+v",)).arch_flags
    ('-march=rv64gcv', '-mabi=lp64d')
    """

    triple: str | None = None
    mcpu: str | None = None
    mattr: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.triple is not None:
            object.__setattr__(self, "triple", canonical_triple(self.triple))
        if isinstance(self.mattr, str):
            object.__setattr__(self, "mattr", tuple(a for a in self.mattr.split(",") if a))
        object.__setattr__(self, "mattr", tuple(self.mattr))
        if self.mcpu is not None and not _WORD.match(self.mcpu):
            raise PolyloopError(f"target: -mcpu={self.mcpu!r} is not a CPU name (letters, "
                                "digits, '.', '_' and '-'), e.g. -mcpu=cortex-a76")
        for a in self.mattr:
            if not (a[:1] in "+-" and _WORD.match(a[1:])):
                raise PolyloopError(f"target: feature {a!r} of -mattr must be +name or -name, "
                                    "e.g. -mattr=+dotprod,-neon")
        if self.triple is None and (self.mcpu or self.mattr):
            raise PolyloopError("target: -mcpu and -mattr need -mtriple (the machine they "
                                "describe), e.g. 'c -mtriple=aarch64-linux-gnu -mcpu=cortex-a76'")

    @classmethod
    def parse(cls, text: "str | Target") -> "Target":
        """``"c"`` or ``"c -mtriple=T [-mcpu=C] [-mattr=+a,-b]"`` as a Target.

        >>> Target.parse("c -mtriple=arm-linux-gnueabihf -mattr=-neon").mattr
        ('-neon',)
        """
        if isinstance(text, Target):
            return text
        if not isinstance(text, str):
            raise PolyloopError(f"target must be a string such as 'c -mtriple=aarch64-linux-gnu'"
                                f" or a pl.Target, got {type(text).__name__}")
        words = text.split()
        if not words or words[0] != "c":
            raise PolyloopError(f"target {text!r}: a C target starts with 'c', e.g. "
                                "'c -mtriple=aarch64-linux-gnu'")
        options: dict[str, str] = {}
        for word in words[1:]:
            name, eq, value = word.partition("=")
            if name not in _OPTIONS or not eq or not value:
                raise PolyloopError(f"target {text!r}: unknown option {word!r}; options are "
                                    "-mtriple=..., -mcpu=... and -mattr=+a,-b")
            if name in options:
                raise PolyloopError(f"target {text!r}: {name} is given twice")
            options[name] = value
        mattr = tuple(a for a in options.get("-mattr", "").split(",") if a)
        return cls(options.get("-mtriple"), options.get("-mcpu"), mattr)

    def __str__(self) -> str:
        parts = ["c"]
        if self.triple is not None:
            parts.append(f"-mtriple={self.triple}")
        if self.mcpu is not None:
            parts.append(f"-mcpu={self.mcpu}")
        if self.mattr:
            parts.append(f"-mattr={','.join(self.mattr)}")
        return " ".join(parts)

    @property
    def arch(self) -> str:
        """``aarch64``, ``arm``, ``riscv64`` or ``x86_64`` (this machine's for the host)."""
        return _ARCHES[(self.triple or host_triple()).split("-")[0]]

    @property
    def runs_here(self) -> bool:
        """Whether code built for this target can be loaded and run on this machine: the host
        target, or the host's triple with no CPU or feature choice (which could need
        instructions this machine lacks)."""
        return self.triple is None or (self.triple == host_triple() and self.mcpu is None
                                       and not self.mattr)

    @property
    def cc(self) -> str:
        """The C compiler: ``POLYLOOP_CC`` here, else ``POLYLOOP_CC_<TRIPLE>`` or
        ``<triple>-gcc``."""
        if self.runs_here:
            return config.CONFIG.cc
        return config.CONFIG.cc_for(self.triple or host_triple())

    @property
    def arch_flags(self) -> tuple[str, ...]:
        """The compiler flags that choose the instruction set."""
        if self.runs_here:
            return ("-march=native",)
        return _ARCH_FLAGS[self.arch](self.mcpu, self.mattr)

    def isa(self) -> ISA:
        """The vector ISA the compiler targets with these flags (NEON, AVX-512, ...)."""
        return compiler_isa(self.cc, self.arch_flags)


HOST = Target()


def _features(mattr: tuple[str, ...]) -> str:
    """GCC's ``+feature`` / ``+nofeature`` suffix of -march/-mcpu."""
    return "".join(f"+{a[1:]}" if a[0] == "+" else f"+no{a[1:]}" for a in mattr)


def _aarch64(mcpu: str | None, mattr: tuple[str, ...]) -> tuple[str, ...]:
    if mcpu is not None:
        return (f"-mcpu={mcpu}{_features(mattr)}",)
    return (f"-march=armv8-a{_features(mattr)}",)


def _arm(mcpu: str | None, mattr: tuple[str, ...]) -> tuple[str, ...]:
    """ARMv7-A, hard float, NEON unless ``-neon`` (``+vfpv4`` adds fused multiply-add)."""
    fpu = "vfpv3-d16" if "-neon" in mattr else "neon-vfpv4" if "+vfpv4" in mattr else "neon"
    unknown = [a for a in mattr if a not in ("+neon", "-neon", "+vfpv4")]
    if unknown:
        raise PolyloopError(f"target arm-linux-gnueabihf: unknown features {unknown}; known: "
                            "+neon (the default), -neon, +vfpv4")
    cpu = (f"-mcpu={mcpu}",) if mcpu is not None else ("-march=armv7-a",)
    return (*cpu, "-mfloat-abi=hard", f"-mfpu={fpu}")


def _riscv64(mcpu: str | None, mattr: tuple[str, ...]) -> tuple[str, ...]:
    """RV64GC; ``+v`` adds the vector extension (GCC 12 still writes scalar code for the
    portable vectors; a newer GCC vectorizes with it)."""
    unknown = [a for a in mattr if a not in ("+v", "-v")]
    if unknown:
        raise PolyloopError(f"target riscv64-linux-gnu: unknown features {unknown}; known: +v")
    base = "rv64gcv" if "+v" in mattr else "rv64gc"
    cpu = (f"-mcpu={mcpu}",) if mcpu is not None else ()
    return (*cpu, f"-march={base}", "-mabi=lp64d")


def _x86_64(mcpu: str | None, mattr: tuple[str, ...]) -> tuple[str, ...]:
    features = tuple(f"-m{a[1:]}" if a[0] == "+" else f"-mno-{a[1:]}" for a in mattr)
    return (f"-march={mcpu or 'x86-64'}", *features)


_ARCH_FLAGS = {"aarch64": _aarch64, "arm": _arm, "riscv64": _riscv64, "x86_64": _x86_64}


def canonical_triple(triple: str) -> str:
    """Debian's name of the triple's compiler prefix: ``armv7l-none-linux-gnueabihf`` ->
    ``arm-linux-gnueabihf``; PolyloopError for an architecture polyloop cannot target.

    >>> canonical_triple("aarch64-unknown-linux-gnu")
    'aarch64-linux-gnu'
    """
    parts = [p for p in str(triple).lower().split("-") if p not in ("none", "unknown", "pc")]
    arch = _ARCHES.get(parts[0]) if parts else None
    if arch is None or "linux" not in parts:
        raise PolyloopError(f"target: cannot build for triple {triple!r}; polyloop targets "
                            f"Linux on {', '.join(TRIPLES.values())}")
    return TRIPLES[arch]


@functools.cache
def host_triple() -> str:
    """This machine's triple, as its C compiler reports it (``gcc -dumpmachine``)."""
    cc = config.CONFIG.cc
    try:
        done = run_limited([cc, "-dumpmachine"], timeout=30)
        text = done.stdout.strip() if done.returncode == 0 else ""
    except (OSError, ProcessTimeout):
        text = ""
    try:
        return canonical_triple(text)
    except PolyloopError:
        return text or "unknown"


def install_hint(cc: str) -> str:
    """What to do when the compiler ``cc`` cannot be run.

    >>> install_hint("riscv64-linux-gnu-gcc")
    'install the cross compiler (Debian, Ubuntu: apt-get install gcc-riscv64-linux-gnu) or point POLYLOOP_CC_RISCV64_LINUX_GNU at one'
    """
    for triple in TRIPLES.values():
        if cc == f"{triple}-gcc":
            variable = "POLYLOOP_CC_" + triple.upper().replace("-", "_")
            return (f"install the cross compiler (Debian, Ubuntu: apt-get install gcc-{triple}) "
                    f"or point {variable} at one")
    return "install gcc or point POLYLOOP_CC at a C compiler"
