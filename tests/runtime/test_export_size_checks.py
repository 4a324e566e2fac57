# SPDX-License-Identifier: Apache-2.0
"""An exported C library checks the sizes itself: a C program that passes a negative size or
sizes that break an assumption gets status 3 and the broken condition as text from
ENTRY_check_sizes, and no array is touched; sizes that hold run the kernel. The checks are
exact for sizes near 2**63 (no wrap-around in ``n + m``)."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

import polyloop as pl
from polyloop import config

MAIN = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "libk.h"
int main(int argc, char **argv) {
    int64_t params[K_NUM_PARAMS];
    for (int k = 0; k < K_NUM_PARAMS; k++) params[k] = strtoll(argv[1 + k], 0, 10);
    float a[32], out[32];
    for (int k = 0; k < 32; k++) { a[k] = (float)k; out[k] = NAN; }
    void *args[K_NUM_ARGS] = {ARRAYS};
    int32_t status = k(args, params);
    const char *why = k_check_sizes(params);
    int written = 0;
    for (int k = 0; k < 32; k++) written += !isnan(out[k]);
    printf("%d|%s|%d|%g\n", status, why ? why : "ok", written, out[1]);
    return 0;
}
"""


def export(knl, tmp_path, args: str):
    library, header = pl.build(knl, name="k").export_library(tmp_path / "libk.so")
    (tmp_path / "main.c").write_text(MAIN.replace("ARRAYS", args))
    subprocess.run([config.CONFIG.cc, "-std=c99", "main.c", "-o", "main", "-L.", "-lk",
                    "-Wl,-rpath,$ORIGIN", "-lm"], cwd=tmp_path, check=True)
    return header.read_text()


def call(tmp_path, *sizes: int) -> list[str]:
    run = subprocess.run([str(tmp_path / "main"), *map(str, sizes)], capture_output=True,
                         text=True, check=True, timeout=60)
    return run.stdout.strip().split("|")


@pytest.fixture(scope="module")
def scaled(tmp_path_factory):
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2 * a[i]",
                         args=[pl.ArrayArg("out", "float32", shape=("n",)),
                               pl.ArrayArg("a", "float32", shape=("n",))],
                         assumptions="n >= 16 and n mod 4 = 0")
    folder = tmp_path_factory.mktemp("scaled")
    return folder, export(knl, folder, "out, a")


def test_the_header_documents_the_checks(scaled):
    _, header = scaled
    assert "returns 3: the sizes break a condition" in header
    assert "every size parameter >= 0" in header and "n >= 16" in header
    assert "n % 4 == 0" in header
    assert "const char *k_check_sizes(const int64_t *params);" in header


@pytest.mark.parametrize("n, why", [(10, "n >= 16"), (18, "n % 4 == 0"), (-4, "n >= 0"),
                                    (-2**63, "n >= 0")])
def test_sizes_that_break_a_condition_get_status_3_and_the_condition(scaled, n, why):
    folder, _ = scaled
    assert call(folder, n) == ["3", why, "0", "nan"]


def test_sizes_that_hold_run_the_kernel(scaled):
    folder, _ = scaled
    status, why, written, value = call(folder, 20)
    assert (status, why, written, float(value)) == ("0", "ok", "20", 2.0)


def test_a_python_call_is_still_checked_before_the_kernel(scaled):
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2 * a[i]",
                         assumptions="n >= 16 and n mod 4 = 0")
    with pytest.raises(pl.ArgumentError, match="n >= 16"):
        pl.build(knl)(a=np.ones(8, "float32"))


def test_conditions_on_sums_of_huge_sizes_do_not_wrap(tmp_path):
    knl = pl.make_kernel("{ [i, j] : 0 <= i < n and 0 <= j < m }", "out[i] = a[i] + j",
                         args=[pl.ArrayArg("out", "float32", shape=("n",)),
                               pl.ArrayArg("a", "float32", shape=("n",))],
                         assumptions="n + m <= 20 and m >= 1")
    export(knl, tmp_path, "out, a")
    big = 2**63 - 1
    # in int64, n + m would wrap around to a negative number and pass
    assert call(tmp_path, big, big)[:3] == ["3", "n + m <= 20", "0"]
    assert call(tmp_path, 4, 3)[:3] == ["0", "ok", "4"]
