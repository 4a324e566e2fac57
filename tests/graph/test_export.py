# SPDX-License-Identifier: Apache-2.0
"""A model exported as a shared library + header, run by a C program without Python."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the model comes from PyTorch (extra 'graph')")


DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include "model.h"

int main(int argc, char **argv) {
    int64_t params[1] = {atoll(argv[1])};
    size_t n_in = (size_t)params[0] * 28 * 28, n_out = (size_t)params[0] * 10;
    float *x = malloc(n_in * sizeof(float)), *y = malloc(n_out * sizeof(float));
    FILE *f = fopen(argv[2], "rb");
    if (fread(x, sizeof(float), n_in, f) != n_in) return 2;
    fclose(f);
    void *ws = aligned_alloc(64, (size_t)model_workspace_bytes(params) + 64);
    void *args[3] = {x, y, ws};
    int32_t status = model(args, params);
    if (status) return 3;
    f = fopen(argv[3], "wb");
    fwrite(y, sizeof(float), n_out, f);
    fclose(f);
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to compile the C driver")
def test_exported_library_runs_from_c(tmp_path, seed_cnn):
    model, ex = seed_cnn
    so, header = ex.export_library(tmp_path / "libmodel.so")
    assert header.name == "libmodel.h" and "model_workspace_bytes" in header.read_text()
    shutil.copyfile(header, tmp_path / "model.h")
    (tmp_path / "driver.c").write_text(DRIVER)
    subprocess.run(["gcc", "-O1", "-o", str(tmp_path / "driver"), str(tmp_path / "driver.c"),
                    f"-L{tmp_path}", "-lmodel", f"-Wl,-rpath,{tmp_path}"], check=True)
    x = torch.randn(3, 1, 28, 28)
    x.numpy().tofile(tmp_path / "x.bin")
    subprocess.run([str(tmp_path / "driver"), "3", str(tmp_path / "x.bin"),
                    str(tmp_path / "y.bin")], check=True)
    got = np.fromfile(tmp_path / "y.bin", dtype="float32").reshape(3, 10)
    with torch.no_grad():
        np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-5, atol=1e-5)
