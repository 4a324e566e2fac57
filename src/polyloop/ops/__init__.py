# SPDX-License-Identifier: Apache-2.0
"""Operator library: for each operator a te builder and a CPU schedule function.

``pl.build(schedule_X(X(*placeholders)))`` builds a module that takes the placeholders in the
order they were passed to the builder and returns the result. Schedules use public primitives
only; their constants are keyword arguments.

>>> import numpy as np, polyloop as pl
>>> from polyloop import ops
>>> A, B = pl.placeholder((8, 5), name="A"), pl.placeholder((5, 3), name="B")
>>> mod = pl.build(ops.schedule_matmul(ops.matmul(A, B)))
>>> mod(np.ones((8, 5), "float32"), np.ones((5, 3), "float32")).sum().item()
120.0
"""
from .attention import attention, schedule_attention
from .conv import conv2d_nchw, schedule_conv2d_nchw
from .conv_depthwise import depthwise_conv2d_nchw, schedule_depthwise_conv2d_nchw
from .conv_pool import conv2d_bias_relu_maxpool_nchw, schedule_conv2d_bias_relu_maxpool_nchw
from .conv_pool_overlap import (conv2d_bias_relu_maxpool_overlap_nchw,
                                schedule_conv2d_bias_relu_maxpool_overlap_nchw)
from .conv_pool_dense import conv_pool_dense_nchw, schedule_conv_pool_dense_nchw
from .dense_split import dense_split_k, schedule_dense_split_k
from .conv_packed import conv2d_channel_block, conv2d_nchw_packed, pack_conv2d_weight
from .conv_pixels import conv2d_pixels, schedule_conv2d_pixels
from .conv_epilogue import schedule_conv2d_epilogue, schedule_depthwise_conv2d_epilogue
from .conv_winograd import conv2d_winograd, schedule_conv2d_winograd, winograd_weight
from .matmul import (batch_matmul_relu, matmul, matmul_relu, schedule_batch_matmul_relu,
                     schedule_matmul, schedule_matmul_relu)
from .matmul_packed import matmul_packed, matmul_panel_width, pack_matmul_weight
from .matmul_int8 import matmul_int8, matmul_int8_packed, pack_int8_weight, schedule_matmul_int8
from .matmul_bf16 import matmul_bf16, matmul_bf16_packed, pack_bf16_weight, schedule_matmul_bf16
from .conv_lowbit import conv2d_bf16, conv2d_int8, schedule_conv2d_bf16, schedule_conv2d_int8
from .conv_bf16_packed import conv2d_bf16_packed, pack_bf16_conv_weight
from .conv_bf16_rows import conv2d_bf16_rows, pack_bf16_conv_rows_weight, schedule_conv2d_bf16_rows
from .conv_lowbit_packed import conv2d_int8_packed, pack_conv_int8_weight
from .depthwise_int8 import depthwise_conv2d_int8, schedule_depthwise_conv2d_int8
from .gpu_conv import (depthwise_conv2d_gpu, depthwise_conv2d_gpu_kernel,
                       depthwise_conv2d_gpu_shared)
from .gpu_matmul import (MATMUL_GPU_LADDER, matmul_gpu_float4, matmul_gpu_kernel,
                         matmul_gpu_naive, matmul_gpu_pipelined, matmul_gpu_shared,
                         matmul_gpu_thread_tile)
from .gpu_tensorcore import matmul_tensorcore, matmul_tensorcore_kernel
from .softmax import schedule_softmax, softmax

__all__ = ["batch_matmul_relu", "matmul", "matmul_relu", "schedule_batch_matmul_relu",
           "schedule_matmul", "schedule_matmul_relu"]
__all__ += ["conv2d_nchw", "depthwise_conv2d_nchw", "schedule_conv2d_nchw",
            "schedule_depthwise_conv2d_nchw", "schedule_softmax", "softmax"]
__all__ += ["conv2d_bias_relu_maxpool_nchw", "schedule_conv2d_bias_relu_maxpool_nchw"]
__all__ += ["dense_split_k", "schedule_dense_split_k"]
__all__ += ["conv2d_channel_block", "conv2d_nchw_packed", "pack_conv2d_weight"]
__all__ += ["conv2d_pixels", "schedule_conv2d_pixels"]
__all__ += ["schedule_conv2d_epilogue", "schedule_depthwise_conv2d_epilogue"]
__all__ += ["conv2d_winograd", "schedule_conv2d_winograd", "winograd_weight"]
__all__ += ["MATMUL_GPU_LADDER", "depthwise_conv2d_gpu", "depthwise_conv2d_gpu_kernel",
            "depthwise_conv2d_gpu_shared",
            "matmul_gpu_float4", "matmul_gpu_kernel", "matmul_gpu_naive", "matmul_gpu_pipelined",
            "matmul_gpu_shared", "matmul_gpu_thread_tile"]
__all__ += ["matmul_tensorcore", "matmul_tensorcore_kernel"]
__all__ += ["attention", "schedule_attention"]
__all__ += ["matmul_packed", "matmul_panel_width", "pack_matmul_weight"]
__all__ += ["conv2d_bias_relu_maxpool_overlap_nchw", "schedule_conv2d_bias_relu_maxpool_overlap_nchw"]
__all__ += ["conv_pool_dense_nchw", "schedule_conv_pool_dense_nchw"]
__all__ += ["conv2d_bf16_packed", "matmul_bf16_packed", "pack_bf16_conv_weight",
            "pack_bf16_weight"]
__all__ += ["matmul_bf16", "matmul_int8", "matmul_int8_packed", "pack_int8_weight",
            "schedule_matmul_bf16", "schedule_matmul_int8"]
__all__ += ["conv2d_bf16", "conv2d_int8", "schedule_conv2d_bf16", "schedule_conv2d_int8"]
__all__ += ["conv2d_bf16_rows", "pack_bf16_conv_rows_weight", "schedule_conv2d_bf16_rows"]
__all__ += ["conv2d_int8_packed", "pack_conv_int8_weight"]
__all__ += ["depthwise_conv2d_int8", "schedule_depthwise_conv2d_int8"]
