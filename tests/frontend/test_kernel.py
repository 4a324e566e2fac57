# SPDX-License-Identifier: Apache-2.0
"""``pl.make_kernel`` and the Loo.py-style transformations, on the C target.

The OpenCL runs of the same kernels are in ``tests/test_opencl.py``. Results are compared with
NumPy on random data at awkward sizes; refusals name what is wrong and where.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import polyloop as pl
from polyloop.testing import interpret

CHOLESKY_DOMAINS = ["{ [i] : 0 <= i < n }", "{ [j] : 0 <= j < i }",
                    "{ [jj] : i + 1 <= jj < n }", "{ [k] : 0 <= k < i }"]
# Seed 000's Fortran nest S1-S6, one instruction per statement; x is a private scalar.
CHOLESKY = """
    x = a[i, i]                     {id=s1}
    x = x - a[i, j]**2              {id=s2, dep=s1}
    p[i] = 1.0 / sqrt(x)            {id=s3, dep=s2}
    x = a[i, jj]                    {id=s4, dep=s3}
    x = x - a[jj, k] * a[i, k]      {id=s5, dep=s4}
    a[jj, i] = x * p[i]             {id=s6, dep=s5}
"""


def spd(rng: np.random.Generator, n: int) -> np.ndarray:
    m = rng.standard_normal((n, n))
    return (m @ m.T + n * np.eye(n)).astype("float32")


def check_cholesky(a_in: np.ndarray, a_out: np.ndarray, p: np.ndarray) -> None:
    """a's strict lower triangle becomes L's, p holds 1 / diag(L); the rest of a is kept."""
    lower = np.linalg.cholesky(a_in.astype("float64"))
    np.testing.assert_allclose(np.tril(a_out, -1), np.tril(lower, -1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(p, 1 / np.diag(lower), rtol=1e-4)
    np.testing.assert_array_equal(np.triu(a_out), np.triu(a_in))


# the kernel as written --------------------------------------------------------------------------

def test_seed_double_kernel_infers_shapes_dtypes_and_roles():
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")
    p = knl.program
    assert p.params == ("n",)
    assert p.args == ("a", "out")
    assert [(b.name, b.role.value, str(b.dtype), [str(d) for d in b.shape])
            for b in p.arg_buffers()] == [("a", "input", "float32", ["n"]),
                                          ("out", "output", "float32", ["n"])]


def test_transpose_then_scale_runs_as_two_nests_and_out_is_an_output(rng):
    knl = pl.make_kernel("{ [i, j, ii, jj] : 0 <= i, j, ii, jj < n }", """
        out[j, i] = a[i, j]             {id=transpose}
        out[ii, jj] = 2*out[ii, jj]     {dep=transpose}
    """)
    assert knl.program.buffer("out").role is pl.BufferRole.OUTPUT
    assert knl.loops().count("for i in range(n)") == 1 and "for ii in range(n)" in knl.loops()
    a = rng.standard_normal((13, 13), dtype="float32")
    np.testing.assert_array_equal(pl.build(knl)(a), 2 * a.T)


def test_cholesky_like_seed_nest_matches_numpy(rng):
    knl = pl.make_kernel(CHOLESKY_DOMAINS, CHOLESKY, name="cholesky")
    p = knl.program
    assert p.buffer("a").role is pl.BufferRole.INOUT and p.buffer("p").role is pl.BufferRole.OUTPUT
    # x is private to an iteration of i: one element per i (lowering keeps just one)
    assert p.buffer("x").role is pl.BufferRole.TEMP and [str(d) for d in p.buffer("x").shape] \
        == ["n"]
    loops = knl.loops()
    assert loops.index("for j in range(i)") < loops.index("for jj in range(i + 1, n)")
    mod = pl.build(knl)
    assert "float x[1];" in mod.source   # declared inside loop i
    for n in (1, 5, 17):
        a_in = spd(rng, n)
        a = a_in.copy()
        check_cholesky(a_in, a, mod(a))
        a_ref = a_in.copy()     # the reference interpreter follows the nest as written too
        check_cholesky(a_in, a_ref, interpret(p, a_ref))


def test_reduction_if_blocks_and_temporaries(rng):
    knl = pl.make_kernel("{ [i, k] : 0 <= i < n and 0 <= k < m }", """
        <> t = sum(k, a[i, k] * w[k])
        if i > 0
            out[i] = t + out[i - 1] * 0
        else
            out[i] = t
        end
        best[i] = max(k, a[i, k])
    """)
    a = rng.standard_normal((6, 9), dtype="float32")
    w = rng.standard_normal(9, dtype="float32")
    out, best = pl.build(knl)(a, w)
    np.testing.assert_allclose(out, a @ w, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(best, a.max(axis=1))


def test_declared_arguments_keep_their_order_dtype_and_shape(rng):
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "y[i] = alpha * x[i] + y[i]",
                         args=[pl.ArrayArg("x", "float64", shape=("n + 2",)),
                               pl.ArrayArg("y", "float64"), pl.ValueArg("alpha", "float64"),
                               pl.ValueArg("n", "int32")])
    p = knl.program
    assert p.args[:2] == ("x", "y") and [str(d) for d in p.buffer("x").shape] == ["n + 2"]
    x, y = rng.standard_normal(7), rng.standard_normal(5)
    expected = 0.5 * x[:5] + y
    pl.build(knl)(x, y, np.array(0.5))
    np.testing.assert_allclose(y, expected)


# transformations ---------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 127, 1000])
def test_split_and_unroll_match_numpy(rng, n):
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")
    knl2 = pl.split_iname(knl, "i", 128, inner_tag="unr")
    assert "i_outer" in knl2.loops() and "i_outer" not in knl.loops()
    a = rng.standard_normal(n, dtype="float32")
    np.testing.assert_array_equal(pl.build(knl2)(a), 2 * a)


def test_fix_parameters_assume_rename_and_join_replay_earlier_steps(rng):
    knl = pl.make_kernel("{ [i, j] : 0 <= i < n and 0 <= j < 8 }", "out[i, j] = a[i, j] + 1")
    knl = pl.split_iname(knl, "i", 4)
    fixed = pl.fix_parameters(knl, n=12)
    assert fixed.program.params == () and "i_outer in range(3)" in fixed.loops()
    assumed = pl.assume(knl, "n mod 4 = 0")
    assert "min(" not in assumed.loops() and "min(" in knl.loops()
    renamed = pl.rename_iname(knl, "i_inner", "ii")
    assert "for ii in range(" in renamed.loops()
    joined = pl.join_inames(knl, ["i_inner", "j"], "ij")
    assert "for ij in range(" in joined.loops()
    a = rng.standard_normal((12, 8), dtype="float32")
    for k in (fixed, assumed, renamed, joined):
        np.testing.assert_array_equal(pl.build(k)(a), a + 1)


def test_parallel_tag_on_a_loop_carrying_a_dependence_is_refused():
    knl = pl.make_kernel("{ [i] : 1 <= i < n }", "a[i] = a[i - 1] + b[i]")
    with pytest.raises(pl.ScheduleError, match=r"RAW dependence insn -> insn on buffer a"):
        pl.tag_inames(knl, {"i": "g.0"})
    with pytest.raises(pl.ScheduleError, match="RAW"):
        pl.split_iname(knl, "i", 16, inner_tag="l.0")
    pl.tag_inames(knl, {"i": "unr"})   # sequential tags are fine


def test_tag_spelling_axis_clash_and_unknown_loops_are_refused():
    knl = pl.make_kernel("{ [i, j] : 0 <= i, j < n }", "out[i, j] = a[j, i]")
    with pytest.raises(pl.ScheduleError, match=r"unknown tag 'g\.3' for iname 'i'; valid tags"):
        pl.tag_inames(knl, {"i": "g.3"})
    with pytest.raises(pl.ScheduleError, match="both use g.0"):
        pl.tag_inames(knl, {"i": "g.0", "j": "g.0"})
    with pytest.raises(pl.ScheduleError, match="no loop 'q'; its loops are i, j"):
        pl.tag_inames(knl, "q:l.0")


# malformed text ---------------------------------------------------------------------------------

@pytest.mark.parametrize("domain, message", [
    ("{ [i] : 0 <= i < n", r"unclosed '\{'"),
    ("[i] : 0 <= i < n", "a loop domain is an ISL set in braces"),
    ("{ [2i] : 0 <= i < n }", "'2i' is not an iname"),
    ("{ [i] : 0 <= i < n and }", "invalid loop domain"),
])
def test_malformed_domains_raise_parse_errors_quoting_the_text(domain, message):
    with pytest.raises(pl.ParseError, match=message) as info:
        pl.make_kernel(domain, "out[i] = a[i]")
    assert domain in str(info.value)


@pytest.mark.parametrize("instruction, message, column", [
    ("out[i] = 2*a[i))", "expected ']', found ')'", 14),
    ("out[i] = 2*a[i] +", "expected an expression, found the end of the line", 17),
    ("out[i] = foo(a[i])", "unknown function 'foo'", 9),
    ("out[i] = 2*b", "unknown name 'b'", 11),
    ("out[i] = a[i, i] + a[i]", "'a' is used with 1 and with 2 indices", 19),
    ("out[i] = a[i] {id=x, colour=red}", "unknown option 'colour'", 21),
    ("out[i] = a[i] {dep=nothing}", "dep='nothing' names no instruction", 19),
    ("out[i] = a[i] $", "unexpected character '$'", 14),
])
def test_malformed_instructions_point_at_the_offending_text(instruction, message, column):
    with pytest.raises(pl.ParseError, match=re.escape(message)) as info:
        pl.make_kernel("{ [i] : 0 <= i < n }", instruction)
    text = str(info.value)
    lines = text.splitlines()
    assert instruction.strip() in lines[1]
    assert lines[2].index("^") - lines[1].index(instruction.strip()[0]) == column


def test_unclosed_if_block_and_reduction_inside_expression_are_refused():
    with pytest.raises(pl.ParseError, match="'if' block is not closed"):
        pl.make_kernel("{ [i] : 0 <= i < n }", "if i > 0\n out[i] = a[i]")
    with pytest.raises(pl.ParseError, match="must be the whole right-hand side"):
        pl.make_kernel("{ [i, k] : 0 <= i, k < n }", "out[i] = 1 + sum(k, a[i, k])")


@pytest.mark.parametrize("domain, suspect", [("{ [i] : 0 <= i < < n }", "< n"),
                                             ("{ [i] : 0 <= i < n and }", "}"),
                                             ("{ [i] : 0 <= i ? n }", "? n")])
def test_isl_syntax_errors_point_at_the_suspect_token(domain, suspect):
    with pytest.raises(pl.ParseError, match="invalid loop domain") as info:
        pl.make_kernel(domain, "out[i] = a[i]")
    lines = str(info.value).splitlines()
    assert lines[2].index("^") == lines[1].index(suspect)


MATMUL_DOMAIN = "{ [i, j, k] : 0 <= i, j, k < n }"
MATMUL = "c[i, j] = sum(k, a[i, k]*b[k, j])"


def test_a_reduction_into_an_array_runs_on_a_private_accumulator():
    knl = pl.make_kernel(MATMUL_DOMAIN, MATMUL)
    p = knl.program
    assert [s.name for s in p.statements] == ["insn_init", "insn", "insn_store"]
    acc = p.buffer("acc_k")
    assert (acc.role.value, acc.scope.value) == ("temp", "local")
    # one nest: the accumulator is initialised, updated and stored inside loops i and j
    assert knl.loops().splitlines()[2:] == [
        "        acc_k[i, j] = 0.0",
        "        for k in range(n):",
        "            acc_k[i, j] += a[i, k] * b[k, j]",
        "        c[i, j] = acc_k[i, j]"]


@pytest.mark.parametrize("n", [1, 15, 17])
def test_tiled_matmul_with_private_accumulator_matches_numpy(rng, n):
    knl = pl.make_kernel(MATMUL_DOMAIN, MATMUL)
    knl = pl.split_iname(knl, "i", 16)
    knl = pl.split_iname(knl, "k", 4)
    mod = pl.build(knl)
    assert "c[" in mod.source and "+= a[" not in mod.source.replace("acc_k[0] +=", "")
    a = rng.standard_normal((n, n), dtype="float32")
    b = rng.standard_normal((n, n), dtype="float32")
    c = np.full((n, n), np.nan, "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_a_reduction_result_read_whole_by_a_later_instruction(rng):
    knl = pl.make_kernel(["{ [i, k] : 0 <= i, k < n }", "{ [i2] : 0 <= i2 < n }"], """
        s[i] = max(k, a[i, k])
        out[i2] = s[n - 1 - i2] * 2
    """)
    s, out = pl.build(knl)(a := rng.standard_normal((7, 7), dtype="float32"))
    np.testing.assert_array_equal(s, a.max(axis=1))
    np.testing.assert_array_equal(out, 2 * a.max(axis=1)[::-1])


def test_a_parallel_tag_on_the_reduction_loop_is_still_refused():
    knl = pl.make_kernel(MATMUL_DOMAIN, MATMUL)
    with pytest.raises(pl.ScheduleError, match=r"cannot bind loop 'k' \(l.0\): it carries the "
                       r"RAW dependence insn -> insn on buffer acc_k"):
        pl.tag_inames(knl, {"i": "g.0", "k": "l.0"})
    knl = pl.split_iname(knl, "i", 16, outer_tag="g.0", inner_tag="l.0")   # i, j stay legal
    knl = pl.tag_inames(knl, {"j": "g.1"})
    with pytest.raises(pl.ScheduleError, match="k_outer.*acc_k"):
        pl.split_iname(knl, "k", 16, outer_tag="g.2")


@pytest.mark.parametrize("domain, insns", [
    ("{ [i, j, k] : 0 <= i, j, k < n }", "c[i, j] = sum(k, a[i, k]*b[k, j])"),
    ("{ [i, k] : 0 <= i < n and 0 <= k <= i }", "y[i] = max(k, a[i, k])"),
    ("{ [i, j, k] : 0 <= i < n and 0 <= j < m and 0 <= k < j }",
     "t[i] = 2*a[i, 0] {id=s1}\nc[i, j] = sum(k, t[i]*b[k, j]) {id=s2, dep=s1}"),
])
def test_accumulator_privatized_as_dataflow_says(monkeypatch, domain, insns):
    """make_kernel privatizes its reduction accumulators without dataflow; the program is the
    one the dataflow test (``private_loops``) gives."""
    from polyloop.frontend import kernel_program
    fast = pl.make_kernel(domain, insns).program
    plain = kernel_program.privatized
    monkeypatch.setattr(kernel_program, "privatized", lambda p, accumulators=None: plain(p))
    from polyloop.frontend import kernel_builder as kernel_mod
    monkeypatch.setattr(kernel_mod, "privatized", lambda p, accumulators=None: plain(p))
    slow = pl.make_kernel(domain, insns).program
    assert [str(b) for b in fast.buffers] == [str(b) for b in slow.buffers]
    assert [str(s) for s in fast.statements] == [str(s) for s in slow.statements]
    assert any(b.name.startswith("acc_") and b.shape for b in fast.buffers)


def test_an_index_that_may_be_negative_is_refused_naming_the_dimension():
    with pytest.raises(pl.ParseError, match=r"index of 'a' in dimension 1 may be negative"):
        pl.make_kernel("{ [i, j] : 0 <= i < n and 0 <= j < n }", "out[i, j] = a[i, j - 1]")
    # the same index is fine where the domain keeps it in range
    knl = pl.make_kernel("{ [i, j] : 0 <= i < n and 1 <= j < n }", "out[i, j] = a[i, j - 1]")
    assert [str(d) for d in knl.program.buffer("a").shape] == ["n", "n - 1"]
