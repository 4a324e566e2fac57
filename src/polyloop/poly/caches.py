# SPDX-License-Identifier: Apache-2.0
"""Forget every result the polyhedral layer remembers: parsed and printed isl objects,
access relations, regions, loop images and schedule maps (for timing code generation from
scratch, as ``benchmarks/bench_codegen.py`` does).

>>> clear_all()
"""
from __future__ import annotations

from . import access, affine, isl_util, launch, regions, tree


def clear_all() -> None:
    """Empty every cache of ``poly``; later calls recompute what they need."""
    access.clear_caches()
    regions.clear_caches()
    launch.clear_caches()
    affine.clear_caches()
    tree.clear_caches()
    isl_util.clear_caches()


__all__ = ["clear_all"]
