# SPDX-License-Identifier: Apache-2.0
"""A GPU schedule of seed 000's depthwise convolution: ``out[n, c, y, x] = sum over 3 x 3 of
data[n, c, y + r - 1, x + s - 1] * weight[c, 0, r, s]`` (stride 1, SAME zero padding, NCHW,
float32), the reads outside the image guarded (``where``) so that none leaves ``data``.

Blocks are (channel, 16-row tile, 16-column tile) on blockIdx.z, y, x; each of the 16 x 16
threads computes one output pixel of every image of the batch. Sizes left ``None`` are
symbolic (``N``, ``C``, ``H``, ``W``); given sizes are fixed in the kernel (the batch then
keeps its sums in registers).

``depthwise_conv2d_gpu_shared`` is seed 000's shared-memory tile: each block copies the
18 x 18 pixels its 16 x 16 outputs read (the tile and a one-pixel halo, clipped to the image:
the padding is never read) into shared memory with all its threads, then reads its 3 x 3
neighbourhoods from there. A block there is one (image, channel) pair and one tile, so no
block loops over images and its one barrier is not inside a loop.

>>> from polyloop import ops
>>> "blockIdx.z" in str(ops.depthwise_conv2d_gpu())
True
"""
from __future__ import annotations

from ..frontend.kernel import ArrayArg, make_kernel
from ..errors import ScheduleError
from ..schedule.kernel import add_prefetch, fix_parameters, join_inames, prioritize_loops
from ..schedule.kernel import schedule_of, split_iname, tag_inames
from ..schedule.schedule import Schedule

BLOCK = 16


def depthwise_conv2d_gpu_kernel(n: int | None = None, c: int | None = None,
                                h: int | None = None, w: int | None = None):
    """The depthwise 3 x 3 convolution as a kernel, sizes fixed where given.

    >>> depthwise_conv2d_gpu_kernel(1, 256, 21, 21).program.params
    ()
    """
    domain = ("{ [n, c, y, x, r, s] : 0 <= n < N and 0 <= c < C and 0 <= y < H and 0 <= x < W "
              "and 0 <= r < 3 and 0 <= s < 3 }")
    inside = "y + r >= 1 and y + r <= H and x + s >= 1 and x + s <= W"
    knl = make_kernel(domain, f"out[n, c, y, x] = sum((r, s), where({inside}, "
                              "data[n, c, y + r - 1, x + s - 1], 0) * weight[c, 0, r, s])",
                      args=[ArrayArg("data", "float32", shape=("N", "C", "H", "W")),
                            ArrayArg("weight", "float32", shape=("C", 1, 3, 3)),
                            ArrayArg("out", "float32", shape=("N", "C", "H", "W"))],
                      name="depthwise_conv2d")
    fixed = {p: v for p, v in (("N", n), ("C", c), ("H", h), ("W", w)) if v is not None}
    return fix_parameters(knl, **fixed) if fixed else knl


def depthwise_conv2d_gpu(n: int | None = None, c: int | None = None, h: int | None = None,
                         w: int | None = None) -> Schedule:
    """The GPU schedule: a block per (channel, 16 x 16 pixel tile), a thread per pixel.

    >>> sch = depthwise_conv2d_gpu(1, 256, 32, 32)
    """
    knl = depthwise_conv2d_gpu_kernel(n, c, h, w)
    knl = tag_inames(knl, {"c": "g.2", "r": "unr", "s": "unr"})
    knl = split_iname(knl, "y", BLOCK, outer_tag="g.1", inner_tag="l.1")
    knl = split_iname(knl, "x", BLOCK, outer_tag="g.0", inner_tag="l.0")
    return schedule_of(knl)


def depthwise_conv2d_gpu_shared(n: int = 1, c: int | None = None, h: int | None = None,
                                w: int | None = None) -> Schedule:
    """The GPU schedule with seed 000's shared-memory tile: a block per (channel, image,
    16 x 16 pixel tile) copies the tile's 18 x 18 input pixels inside the image into shared
    memory, then each thread computes one output pixel from there. The batch ``n`` is a
    constant (it shares blockIdx.z with the channels); ``c``, ``h``, ``w`` may be symbolic.

    >>> sch = depthwise_conv2d_gpu_shared(1, 256, 21, 21)
    >>> sch.program.buffer("data_fetch").scope.value
    'shared'
    """
    if not isinstance(n, int) or n < 1:
        raise ScheduleError(f"depthwise_conv2d_gpu_shared: the batch n must be a positive int "
                            f"(it is fused with the channels on blockIdx.z), got {n!r}; "
                            "depthwise_conv2d_gpu takes a symbolic batch")
    knl = depthwise_conv2d_gpu_kernel(n, c, h, w)
    knl = prioritize_loops(knl, "c,n")
    knl = join_inames(knl, ["c", "n"], "cn", tag="g.2")
    knl = tag_inames(knl, {"r": "unr", "s": "unr"})
    knl = split_iname(knl, "y", BLOCK, outer_tag="g.1", inner_tag="l.1")
    knl = split_iname(knl, "x", BLOCK, outer_tag="g.0", inner_tag="l.0")
    # the copy covers the pixels the guarded reads use, clipped to the image; its 18 x 18
    # box is spread over the 16 x 16 threads
    knl = add_prefetch(knl, "data", ["y_inner", "x_inner", "r", "s"], default_tag="l.auto")
    return schedule_of(knl)


__all__ = ["depthwise_conv2d_gpu", "depthwise_conv2d_gpu_kernel", "depthwise_conv2d_gpu_shared"]
