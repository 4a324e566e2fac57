# SPDX-License-Identifier: Apache-2.0
"""The options of ``pl.graph.quantize``, parsed once where the user typed them."""
from __future__ import annotations

import enum
from dataclasses import dataclass

from ...errors import ArgumentError


class Method(enum.Enum):
    """How an activation's range comes from its calibration values."""

    MINMAX = "minmax"            # the smallest and the largest value seen
    PERCENTILE = "percentile"    # the range holding ``percentile`` % of the values

    @classmethod
    def parse(cls, text: object) -> Method:
        for m in cls:
            if text == m or text == m.value:
                return m
        raise ArgumentError(f"quantize: method={text!r} is not one of "
                            f"{', '.join(repr(m.value) for m in cls)}")


ACTIVATION_DTYPES = ("uint8", "int8")


@dataclass(frozen=True, slots=True)
class Options:
    """What ``pl.graph.quantize`` was asked for (see its docstring)."""

    per_channel: bool = True
    method: Method = Method.MINMAX
    percentile: float = 99.99
    activation_dtype: str = "uint8"
    symmetric_activations: bool = False
    bins: int = 2048

    @staticmethod
    def parse(*, per_channel: object, method: object, percentile: object,
              activation_dtype: object, symmetric_activations: object) -> Options:
        if activation_dtype not in ACTIVATION_DTYPES:
            raise ArgumentError(f"quantize: activation_dtype={activation_dtype!r} is not one of "
                                f"{', '.join(repr(d) for d in ACTIVATION_DTYPES)}")
        if isinstance(percentile, bool) or not isinstance(percentile, (int, float)) or \
                not 50.0 < float(percentile) <= 100.0:
            raise ArgumentError(f"quantize: percentile={percentile!r} must be a number in "
                                "(50, 100], the share of values the range keeps (99.99: "
                                "0.005 % cut at each end)")
        return Options(bool(per_channel), Method.parse(method), float(percentile),
                       str(activation_dtype), bool(symmetric_activations))
