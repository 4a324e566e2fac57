# SPDX-License-Identifier: Apache-2.0
"""The low-bit dot-product tiles (int8 VNNI / AMX, bfloat16) through a user's own schedule:
``tensorize`` of a plain matmul with k split into groups and B packed into panels, against
NumPy at edge sizes, for every body the host runs; the AMX bodies compile everywhere."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import polyloop as pl
from polyloop import config
from polyloop.errors import ArgumentError, ScheduleError
from polyloop.intrin import lowbit
from polyloop.util.isa import host_isa, lowbit_body

FAMILIES = {"u8s8": ("uint8", "int8", "int32"), "bf16": ("bfloat16", "bfloat16", "float32")}


def isas():
    """Both families on one body per test (one build): AMX and AVX-512 where the host runs
    them, the portable bodies everywhere."""
    for isa in ("amx", "avx512", "portable"):
        runs = all(lowbit.host_runs(family, isa) for family in FAMILIES)
        marks = [] if runs else [pytest.mark.skip(reason=f"the host does not run {isa} bodies")]
        yield pytest.param(isa, marks=marks, id=isa)


def matmul(family: str, k_len: int) -> pl.Tensor:
    """``C = A @ B`` with symbolic m, n, the buffers named after the family."""
    a_type, b_type, acc = FAMILIES[family]
    m, n = pl.var("m"), pl.var("n")
    A = pl.placeholder((m, k_len), a_type, name=f"A_{family}")
    B = pl.placeholder((k_len, n), b_type, name=f"B_{family}")
    k = pl.reduce_axis((0, k_len), name="k")
    return pl.compute((m, n), lambda i, j: pl.sum(A[i, k].astype(acc) * B[k, j].astype(acc),
                                                  axis=k), name=f"C_{family}")


def tensorize_matmul(sch: pl.Schedule, family: str, intrin: pl.TensorIntrin) -> None:
    """The matmul of ``family`` in the intrinsic's tiles: k in groups, B in panels."""
    rows, cols = lowbit.tile_of(intrin)
    group = lowbit.group_size(family)
    block = f"C_{family}"
    sch.transform_layout(block, f"B_{family}", lambda k, j: (j // cols, k // group, j % cols,
                                                             k % group))
    i, j, kk = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, rows])
    j0, j1 = sch.split(j, [None, cols])
    g, t = sch.split(kk, [None, group])
    sch.reorder(j0, i0, g, i1, j1, t)
    sch.decompose_reduction(sch.get_block(block), g)
    sch.tensorize(g, intrin)


def operands(family: str, m: int, n: int, k: int, rng):
    if family == "u8s8":
        return (rng.integers(0, 256, (m, k)).astype(np.uint8),
                rng.integers(-128, 128, (k, n)).astype(np.int8))
    import ml_dtypes
    return (rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16),
            rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16))


@pytest.mark.parametrize("isa", list(isas()))
def test_tensorized_matmuls_match_numpy(isa, rng):
    pytest.importorskip("ml_dtypes")
    k_len = 76   # AMX: 16 groups per step and a remainder, for both families
    sch = pl.Schedule(matmul("u8s8", k_len), matmul("bf16", k_len))
    intrins = {family: lowbit.lowbit_intrin(family, isa) for family in FAMILIES}
    for family, intrin in intrins.items():
        tensorize_matmul(sch, family, intrin)
    mod = pl.build(sch)
    for family, intrin in intrins.items():
        assert f"{intrin.name}(&C_{family}[" in mod.source
    rows, cols = lowbit.tile_of(intrins["u8s8"])
    for m, n in [(1, 1), (rows - 1, cols + 1), (2 * rows + 1, 3 * cols - 5), (rows, cols), (0, 3)]:
        a8, b8 = operands("u8s8", m, n, k_len, rng)
        ah, bh = operands("bf16", m, n, k_len, rng)
        c8 = np.full((m, n), -7, np.int32)
        ch = np.full((m, n), np.nan, np.float32)
        mod(a8, b8, ah, bh, c8, ch)
        np.testing.assert_array_equal(c8, a8.astype(np.int32) @ b8.astype(np.int32),
                                      err_msg=f"{m}x{n}")
        np.testing.assert_allclose(ch, ah.astype(np.float32) @ bh.astype(np.float32),
                                   rtol=1e-5, atol=1e-5, err_msg=f"{m}x{n}")


@pytest.mark.skipif(shutil.which("gcc") is None or host_isa("gcc").name not in
                    ("avx512", "avx2", "avx", "sse"), reason="needs gcc for x86")
def test_amx_and_avx512_bodies_compile_for_any_x86(tmp_path):
    """The AMX bodies (with their AVX-512 remainder) carry target attributes: gcc compiles them
    for plain x86-64, whatever the host has; calls make sure nothing is left out."""
    calls = []
    text = []
    for family in FAMILIES:
        rows, cols = lowbit.TILES["amx"][0]
        for window in (False, True):
            intrin = lowbit.lowbit_intrin(family, "amx", rows=rows, cols=cols, window=window)
            text.append(intrin.source)
            sizes = ", ".join(f"s[{q}]" for q in range(14 if window else 8))
            calls.append(f"    {intrin.name}((void *)p, (void *)(p + 65536), (void *)(p + 131072),"
                         f" {sizes});")
    c_file = tmp_path / "amx.c"
    c_file.write_text("\n".join(text) + "\nvoid use(char *p, const int64_t *s) {\n"
                      + "\n".join(calls) + "\n}\n")
    done = subprocess.run(["gcc", "-O2", "-march=x86-64", "-Wall", "-Werror",
                           "-Wno-unused-function", "-c", str(c_file), "-o",
                           str(tmp_path / "amx.o")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    dump = subprocess.run(["objdump", "-d", str(tmp_path / "amx.o")], capture_output=True,
                          text=True).stdout if shutil.which("objdump") else "tdpbusd tdpbf16ps"
    assert "tdpbusd" in dump and "tdpbf16ps" in dump


def test_choice_by_cpu_flags_names_and_replay():
    isa = host_isa(config.CONFIG.cc)
    assert lowbit.host_kind("u8s8") == lowbit_body(isa, "u8s8")
    assert lowbit.vnni_intrin().name.startswith(f"pl_lowbit_u8s8_{lowbit_body(isa, 'u8s8')}_")
    # a trace names the intrinsic; its JSON replayed rebuilds it by that name
    sch = pl.Schedule(matmul("bf16", 8))
    tensorize_matmul(sch, "bf16", lowbit.bf16_intrin("portable", rows=8, cols=32))
    assert "pl_lowbit_bf16_portable_8x32" in sch.trace.to_json()
    again = pl.Schedule.from_trace(sch.original, sch.trace.to_json())
    assert str(again) == str(sch)
    with pytest.raises(ArgumentError, match="no avx512 u8s8 tile of 5 x 32"):
        lowbit.vnni_intrin("avx512", rows=5)
    with pytest.raises(ArgumentError, match="unknown low-bit intrinsic family 'fp8'"):
        lowbit.lowbit_intrin("fp8")
    with pytest.raises(ScheduleError, match="low-bit intrinsics are named"):
        lowbit.builtin_lowbit("pl_lowbit_u4_avx512_6x32")
