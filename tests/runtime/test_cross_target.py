# SPDX-License-Identifier: Apache-2.0
"""Cross targets: ``pl.build(..., target="c -mtriple=...")`` compiles with the target's cross
compiler, writes vector code for its ISA (never an x86 intrinsic for ARM or RISC-V), caches by
target, and gives a module that refuses to run here but exports."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import polyloop as pl
from polyloop import config, intrin, ops
from polyloop.runtime.compiler import target_flags
from polyloop.runtime.target import Target, canonical_triple

from fuzz.corpus import PROGRAMS
from rpc.devices import require_cross_compiler

# ELF e_machine of each architecture
MACHINES = {"aarch64-linux-gnu": 183, "arm-linux-gnueabihf": 40, "riscv64-linux-gnu": 243}
X86_SPELLINGS = ("immintrin", "_mm_", "_mm256", "_mm512", "__m128", "__m256", "__m512")


def _matmul_relu():
    sch = PROGRAMS["matmul_relu"].schedule()
    i, j, kk = sch.get_loops(sch.get_block("C"))
    j0, j1 = sch.split(j, factors=[None, 16])
    sch.reorder(i, j0, kk, j1)
    sch.parallel(i)
    sch.vectorize(j1)
    return sch


def _elf_machine(path) -> int:
    head = path.read_bytes()[:20]
    assert head[:4] == b"\x7fELF"
    return int.from_bytes(head[18:20], "little")


def test_target_strings_parse_print_and_refuse():
    t = Target.parse("c -mtriple=aarch64-linux-gnu -mcpu=cortex-a76 -mattr=+dotprod")
    assert (t.triple, t.mcpu, t.mattr) == ("aarch64-linux-gnu", "cortex-a76", ("+dotprod",))
    assert Target.parse(str(t)) == t
    assert t.arch_flags == ("-mcpu=cortex-a76+dotprod",)
    assert canonical_triple("armv7l-none-linux-gnueabihf") == "arm-linux-gnueabihf"
    assert Target("arm-linux-gnueabihf", mattr="-neon").arch_flags[-1] == "-mfpu=vfpv3-d16"
    assert not t.runs_here and Target.parse("c").runs_here
    for text, words in [("c -mtriple=mips-linux-gnu", "cannot build for triple"),
                        ("c -mtriple=aarch64-linux-gnu -mcpu=a;b", "not a CPU name"),
                        ("c -mcpu=cortex-a76", "need -mtriple"),
                        ("c -mtriple=aarch64-linux-gnu -O3", "unknown option"),
                        ("llvm -mtriple=aarch64-linux-gnu", "starts with 'c'"),
                        ("c -mtriple=aarch64-linux-gnu -mattr=dotprod", r"\+name or -name")]:
        with pytest.raises(pl.PolyloopError, match=words):
            Target.parse(text)
    assert target_flags(Target("riscv64-linux-gnu"))[1:3] == ("-march=rv64gc", "-mabi=lp64d")


@pytest.mark.parametrize("triple", list(MACHINES))
def test_cross_build_has_no_x86_code_and_refuses_to_run_here(triple, tmp_path):
    require_cross_compiler(triple)
    mod = pl.build(_matmul_relu(), target=f"c -mtriple={triple}")
    assert isinstance(mod, pl.runtime.cross.CrossModule)
    assert mod.target == f"c -mtriple={triple}"
    assert not any(s in mod.source for s in X86_SPELLINGS)
    assert _elf_machine(mod.library.path) == MACHINES[triple]
    a = np.ones((4, 4), "float32")
    with pytest.raises(pl.PolyloopError, match="cannot be called on this machine.*RPC"):
        mod(a, a)
    with pytest.raises(pl.ArgumentError, match="inconsistent size 'n'"):
        mod.bind((a, a[:2]), {})           # checks still happen on this machine
    so, header = mod.export_library(tmp_path / "libmm.so")
    assert _elf_machine(so) == MACHINES[triple]
    assert "int32_t D_kernel(void **args, const int64_t *params);" in header.read_text()


def test_vector_code_is_written_for_the_targets_isa():
    require_cross_compiler("aarch64-linux-gnu")
    mod = pl.build(_matmul_relu(), target="c -mtriple=aarch64-linux-gnu", explain=False)
    assert "explicit vectors of 4 lanes (neon)" in mod.explain()
    assert "typedef float v4f" in mod.source


def test_cache_is_keyed_by_target():
    require_cross_compiler("aarch64-linux-gnu")
    sch = _matmul_relu()
    first = pl.build(sch, target="c -mtriple=aarch64-linux-gnu")
    again = pl.build(sch, target=Target("aarch64-linux-gnu"))
    other = pl.build(sch, target="c -mtriple=aarch64-linux-gnu -mcpu=cortex-a53")
    host = pl.build(sch)
    assert again.library.cache_hit and again.library.path == first.library.path
    assert len({first.library.path, other.library.path, host.library.path}) == 3


@pytest.mark.parametrize("kind", ["avx512", "avx2"])
def test_x86_micro_kernels_fall_back_to_portable_code(kind, rng):
    require_cross_compiler("aarch64-linux-gnu")
    A = pl.placeholder((30, 40), "float32", name="A")
    B = pl.placeholder((40, 37), "float32", name="B")
    sch = ops.schedule_matmul(ops.matmul(A, B), intrin=intrin.gemm_intrin(kind), kc=16)
    mod = pl.build(sch, target="c -mtriple=aarch64-linux-gnu")
    assert "pl_ukr_gemm_portable_" in mod.source and f"pl_ukr_gemm_{kind}" not in mod.source
    assert not any(s in mod.source for s in X86_SPELLINGS)


def test_intrinsic_without_fallback_is_refused_for_a_target_that_lacks_it():
    require_cross_compiler("aarch64-linux-gnu")
    kc = pl.var("kc")
    x = pl.placeholder((kc,), "float32", name="x")
    y = pl.placeholder((kc,), "float32", name="y")
    k = pl.reduce_axis((0, kc), name="k")
    d = pl.compute((), lambda: pl.sum(x[k] * y[k], axis=k), name="d")
    src = ("#include <immintrin.h>\nstatic inline void x86_dot(float *d, const float *x, "
           "const float *y, int64_t kc) { for (int64_t k = 0; k < kc; k++) d[0] += x[k] * y[k]; }")
    dot = pl.TensorIntrin(d, src, requires=("__AVX2__",))
    X = pl.placeholder((8, 32), "float32", name="X")
    Y = pl.placeholder((32,), "float32", name="Y")
    kk = pl.reduce_axis((0, 32), name="kk")
    Z = pl.compute((8,), lambda i: pl.sum(X[i, kk] * Y[kk], axis=kk), name="Z")
    sch = pl.Schedule(Z)
    sch.tensorize(sch.get_loops("Z")[1], dot)
    with pytest.raises(pl.BuildError, match="needs __AVX2__.*no portable fallback"):
        pl.build(sch, target="c -mtriple=aarch64-linux-gnu")


def test_a_missing_cross_compiler_says_what_to_install(monkeypatch):
    monkeypatch.setattr(config, "CONFIG", dataclasses.replace(
        config.CONFIG, cross_cc=(("RISCV64_LINUX_GNU", "no-such-riscv-gcc"),)))
    B = pl.compute((4,), lambda i: pl.placeholder((4,), name="A")[i] + 1.0, name="B")
    with pytest.raises(pl.BuildError, match="cannot run the C compiler 'no-such-riscv-gcc'"):
        pl.build(B, target="c -mtriple=riscv64-linux-gnu")


def test_options_that_run_here_are_refused_for_another_machine():
    require_cross_compiler("aarch64-linux-gnu")
    B = pl.compute((4,), lambda i: pl.placeholder((4,), name="A")[i] + 1.0, name="B")
    with pytest.raises(pl.PolyloopError, match="check=True runs the module on this machine"):
        pl.build(B, target="c -mtriple=aarch64-linux-gnu", check=True)
    with pytest.raises(pl.PolyloopError, match="profile="):
        pl.build(B, target="c -mtriple=aarch64-linux-gnu", profile=True)


def test_size_checks_build_for_a_32_bit_target_without_128_bit_integers():
    require_cross_compiler("arm-linux-gnueabihf")
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")
    knl = pl.assume(knl, "n mod 4 = 0 and n >= 4")
    mod = pl.build(knl, target="c -mtriple=arm-linux-gnueabihf")
    assert "pl_size_mod" in mod.source and _elf_machine(mod.library.path) == 40


def test_a_model_builds_for_another_machine(tmp_path, rng):
    require_cross_compiler("aarch64-linux-gnu")
    b = pl.graph.GraphBuilder("mlp")
    x = b.input("x", ("batch", 6))
    w = b.constant(rng.standard_normal((5, 6)).astype("float32"), "w")
    g = b.build(b.emit(pl.graph.Op.RELU, b.emit(pl.graph.Op.LINEAR, x, w)))
    model = pl.graph.build(g, target="c -mtriple=aarch64-linux-gnu")
    assert isinstance(model, pl.graph.cross.CrossModel)
    xs = np.ones((2, 6), "float32")
    with pytest.raises(pl.PolyloopError, match="cannot be run on this machine.*RPC"):
        model(xs)
    with pytest.raises(pl.ArgumentError, match="expected dtype float32"):
        model.bind((xs.astype("float64"),))
    so, header = model.export_library(tmp_path / "mlp.so")
    assert _elf_machine(so) == MACHINES["aarch64-linux-gnu"]
    assert "mlp_workspace_bytes" in header.read_text()
