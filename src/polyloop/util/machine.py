# SPDX-License-Identifier: Apache-2.0
"""The machine automatic scheduling models: cores, cache sizes, the vector unit.

Read once from the operating system (Linux's ``/sys/devices/system/cpu``, the CPUs this process
may run on) and from the C compiler (``util.isa``: the vector width ``-march=native`` gives),
then cached. Where the system does not say, conservative defaults stand in (32 KiB L1, 1 MiB
L2, 8 MiB L3, 16-byte vectors).

>>> m = host_machine()
>>> m.cores >= 1 and m.l1 > 0 and m.l2 >= m.l1 and m.lanes("float64") >= 1
True
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from .isa import host_isa

_KIB = 1024
DEFAULT_CACHES = {1: 32 * _KIB, 2: 1024 * _KIB, 3: 8192 * _KIB}


@dataclass(frozen=True, slots=True)
class Machine:
    """``l1``/``l2``: bytes of data cache per core; ``l3``: the last level, shared;
    ``vector_bytes``: one vector register; ``registers``: vector registers the ISA has."""

    cores: int
    l1: int
    l2: int
    l3: int
    vector_bytes: int
    registers: int

    def lanes(self, dtype: str) -> int:
        """Elements of ``dtype`` in one vector register."""
        size = {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2,
                "int16": 2, "int8": 1, "uint8": 1}.get(str(dtype), 8)
        return max(1, self.vector_bytes // size)


@functools.cache
def host_machine(cc: str = "gcc") -> Machine:
    """This machine, as ``cc -march=native`` compiles for it (callers pass
    ``config.CONFIG.cc``)."""
    isa = host_isa(cc)
    caches = _caches(Path("/sys/devices/system/cpu/cpu0/cache"))
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    registers = 32 if isa.name == "avx512" or isa.name == "neon" else 16
    return Machine(cores, caches[1], caches[2], caches[3], isa.vector_bytes, registers)


def _caches(base: Path) -> dict[int, int]:
    """Bytes of the data (or unified) cache per level under ``base`` (sysfs)."""
    found = dict(DEFAULT_CACHES)
    for index in sorted(base.glob("index*")) if base.is_dir() else ():
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            text = (index / "size").read_text().strip().upper()
        except (OSError, ValueError):
            continue
        scale = {"K": _KIB, "M": _KIB * _KIB}.get(text[-1:], 1)
        digits = text.rstrip("KM")
        if level in found and kind in ("Data", "Unified") and digits.isdigit():
            found[level] = int(digits) * scale
    return found
