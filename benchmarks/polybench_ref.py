# SPDX-License-Identifier: Apache-2.0
"""PolyBench/C as distributed, as a reference the benchmark can call: each kernel's ``.c`` file
and the suite's ``utilities/polybench.c`` compiled by gcc into a shared library (``static``
defined away, so ``init_array`` and ``kernel_*`` are visible), loaded with ctypes.

``init_array`` fills NumPy arrays exactly as the C program does; ``kernel_*`` runs the C
kernel on them. The dataset sizes and the data type are read from the kernel's header and
``main``, so nothing here is specific to one kernel.
"""
from __future__ import annotations

import ctypes
import hashlib
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

O3 = ("-O3", "-march=native")
_DTYPES = {"DOUBLE": np.float64, "FLOAT": np.float32, "INT": np.int32}
_CTYPES = {np.float64: ctypes.c_double, np.float32: ctypes.c_float, np.int32: ctypes.c_int}


def graphite_flags(threads: int) -> tuple[str, ...]:
    """gcc's polyhedral optimizer, parallelizing loops over ``threads`` when more than one."""
    flags = O3 + ("-floop-nest-optimize",)
    if threads > 1:
        flags += ("-floop-parallelize-all", f"-ftree-parallelize-loops={threads}", "-fopenmp")
    return flags


@dataclass(frozen=True)
class Param:
    """One parameter of a C function: ``kind`` is "int", "scalar", "pointer" (a scalar the
    function sets) or "array"; ``dims`` the macros of an array's extents; ``ctype`` its C
    element type name."""
    name: str
    kind: str
    ctype: str
    dims: tuple[str, ...] = ()


@dataclass(frozen=True)
class Source:
    """One PolyBench kernel: where it is, its functions' parameters, sizes and data type."""
    path: Path
    entry: str
    kernel: tuple[Param, ...]
    init: tuple[Param, ...]
    macros: dict[str, int]         # the dataset's sizes, by macro name
    sizes: dict[str, int]          # main's size variables (n = N ...) with their values
    dtype: type

    def array_dtype(self, p: Param):
        return np.int8 if p.ctype == "base" else (np.int32 if p.ctype == "int" else self.dtype)

    def shape(self, p: Param) -> tuple[int, ...]:
        return tuple(self.macros[d] for d in p.dims)


def find(root: Path, name: str) -> Path:
    """The ``.c`` file of kernel ``name`` (``k2mm``, ``fdtd_2d``, ...) under ``root``."""
    stem = name[1:] if name in ("k2mm", "k3mm") else name.replace("_", "-")
    found = [p for p in root.glob(f"*/**/{stem}.c")]
    if len(found) != 1:
        raise FileNotFoundError(f"no unique {stem}.c under {root}: {found}")
    return found[0]


def read(root: Path, name: str, dataset: str) -> Source:
    """Parse kernel ``name``'s source for the dataset ``"MEDIUM"``, ``"LARGE"``..."""
    path = find(root, name)
    text = path.read_text()
    header = path.with_suffix(".h").read_text()
    entry = re.search(r"void\s+(kernel_\w+)\s*\(", text).group(1)
    block = re.search(rf"#\s*ifdef {dataset}_DATASET(.*?)#\s*endif", header, re.S).group(1)
    macros = {k: int(v) for k, v in re.findall(r"#\s*define\s+(\w+)\s+(\d+)", block)}
    default = re.search(r"#\s*define DATA_TYPE_IS_(\w+)", header).group(1)
    main = text[text.index("int main"):]
    sizes = {k: macros[v] for k, v in re.findall(r"int\s+(\w+)\s*=\s*(\w+)\s*;", main)
             if v in macros}
    return Source(path, entry, _params(text, entry), _params(text, "init_array"), macros, sizes,
                  _DTYPES[default])


def _params(text: str, function: str) -> tuple[Param, ...]:
    start = re.search(rf"void\s+{function}\s*\(", text).end()
    depth, k = 1, start
    while depth:
        depth += {"(": 1, ")": -1}.get(text[k], 0)
        k += 1
    parts, depth, word = [], 0, ""
    for ch in text[start:k - 1]:
        if ch == "," and depth == 0:
            parts.append(word)
            word = ""
            continue
        depth += {"(": 1, ")": -1}.get(ch, 0)
        word += ch
    parts.append(word)
    out = []
    for part in (" ".join(p.split()) for p in parts):
        array = re.match(r"(\w+) POLYBENCH_\dD\((\w+),(.*)\)", part.replace(", ", ","))
        if array:
            args = array.group(3).split(",")
            out.append(Param(array.group(2), "array", array.group(1), tuple(args[:len(args) // 2])))
        elif part.startswith("int "):
            out.append(Param(part.split()[1], "int", "int"))
        elif "*" in part:
            out.append(Param(part.split("*")[1].strip(), "pointer", part.split()[0]))
        else:
            out.append(Param(part.split()[1], "scalar", part.split()[0]))
    return tuple(out)


class Library:
    """The kernel's source compiled with ``flags`` for ``dataset``, loaded."""

    def __init__(self, root: Path, src: Source, dataset: str, flags: tuple[str, ...],
                 build_dir: Path) -> None:
        self.src = src
        utilities = root / "utilities"
        command = ["gcc", *flags, "-fPIC", "-shared", "-Dstatic=", f"-D{dataset}_DATASET",
                   f"-I{utilities}", f"-I{src.path.parent}", str(src.path),
                   str(utilities / "polybench.c"), "-lm"]
        key = hashlib.sha256(" ".join(command).encode()).hexdigest()[:16]
        so = build_dir / f"{src.path.stem}-{key}.so"
        if not so.exists():
            subprocess.run(command + ["-o", str(so)], check=True, capture_output=True, text=True)
        self.cdll = ctypes.CDLL(str(so))
        self.kernel = getattr(self.cdll, src.entry)
        self.kernel.restype = None

    def inputs(self) -> dict[str, np.ndarray | float | int]:
        """Every kernel parameter's value as ``init_array`` leaves it (zeros where it does
        not set one), sizes included."""
        values: dict[str, np.ndarray | float | int] = dict(self.src.sizes)
        for p in self.src.kernel:
            if p.kind == "array":
                values[p.name] = np.zeros(self.src.shape(p), self.src.array_dtype(p))
        scalars, args = {}, []
        for p in self.src.init:
            if p.kind == "int":
                args.append(ctypes.c_int(self.src.sizes[p.name]))
            elif p.kind == "pointer":
                scalars[p.name] = _CTYPES[self.src.dtype](0)
                args.append(ctypes.byref(scalars[p.name]))
            else:
                args.append(values[p.name].ctypes.data_as(ctypes.c_void_p))
        self.cdll.init_array(*args)
        values.update({k: v.value for k, v in scalars.items()})
        return values

    def call(self, values: dict) -> None:
        """Run the C kernel on ``values`` (arrays updated in place)."""
        args = []
        for p in self.src.kernel:
            if p.kind == "int":
                args.append(ctypes.c_int(values[p.name]))
            elif p.kind == "scalar":
                args.append(_CTYPES[self.src.dtype](values[p.name]))
            else:
                args.append(values[p.name].ctypes.data_as(ctypes.c_void_p))
        self.kernel(*args)
