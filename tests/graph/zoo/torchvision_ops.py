# SPDX-License-Identifier: Apache-2.0
"""Import torchvision beside the CPU build of PyTorch.

torchvision's compiled operators (``torchvision/_C.so``: NMS, RoI align and pooling, deformable
convolution) are linked against PyTorch's CUDA libraries; next to the CPU build of the same
PyTorch version the library does not load, torchvision carries on without it, and then its own
``_meta_registrations`` fails on "operator torchvision::nms does not exist". The classification
models never call these operators. ``import_torchvision()`` declares their schemas (no kernel:
a call raises PyTorch's "no kernel registered" error) when the library did not load, then
imports torchvision. ``transformers`` imports torchvision when it is installed: call this first.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

# The operators' schemas, as torchvision's C++ library declares them.
SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor",
    "_roi_align_backward(Tensor grad, Tensor rois, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width, "
    "int sampling_ratio, bool aligned) -> Tensor",
    "qroi_align(Tensor input, Tensor rois, float input_scale, int input_zero_point, "
    "float rois_scale, int rois_zero_point, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor",
    "ps_roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, int sampling_ratio) -> (Tensor, Tensor)",
    "_ps_roi_align_backward(Tensor grad, Tensor rois, Tensor channel_mapping, "
    "float spatial_scale, SymInt pooled_height, SymInt pooled_width, int sampling_ratio, "
    "SymInt batch_size, SymInt channels, SymInt height, SymInt width) -> Tensor",
    "roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width) -> (Tensor, Tensor)",
    "_roi_pool_backward(Tensor grad, Tensor rois, Tensor argmax, float spatial_scale, "
    "SymInt pooled_height, SymInt pooled_width, SymInt batch_size, SymInt channels, "
    "SymInt height, SymInt width) -> Tensor",
    "ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width) -> (Tensor, Tensor)",
    "_ps_roi_pool_backward(Tensor grad, Tensor rois, Tensor channel_mapping, "
    "float spatial_scale, SymInt pooled_height, SymInt pooled_width, SymInt batch_size, "
    "SymInt channels, SymInt height, SymInt width) -> Tensor",
    "deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, "
    "SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, "
    "SymInt dilation_w, SymInt groups, SymInt offset_groups, bool use_mask) -> Tensor",
    "_deform_conv2d_backward(Tensor grad, Tensor input, Tensor weight, Tensor offset, "
    "Tensor mask, Tensor bias, SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, "
    "SymInt dilation_h, SymInt dilation_w, SymInt groups, SymInt offset_groups, "
    "bool use_mask) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
)

_LIBRARY = []     # the Library object must stay alive for its definitions to stay


def _compiled_ops_load() -> bool:
    """Whether torchvision's compiled library loads here (found without importing torchvision,
    whose import is what fails when it does not)."""
    import torch
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        raise ImportError("torchvision is not installed: pip install 'polyloop[test]'")
    for lib in sorted(Path(spec.origin).parent.glob("_C*.so")):
        try:
            torch.ops.load_library(str(lib))
            return True
        except OSError:
            return False
    return False


def import_torchvision():
    """torchvision, imported (its compiled operators declared first when they did not load)."""
    import torch
    if "torchvision" not in sys.modules and not _compiled_ops_load() and not _LIBRARY:
        lib = torch.library.Library("torchvision", "FRAGMENT")
        for schema in SCHEMAS:
            lib.define(schema)
        _LIBRARY.append(lib)
    return importlib.import_module("torchvision")
