# SPDX-License-Identifier: Apache-2.0
"""A name not yet in use: the first of ``base``, ``base_1``, ``base_2``, ..."""
from __future__ import annotations

from collections.abc import Collection, Sequence


def unique_name(base: str, taken: Collection[str], suffixes: Sequence[str] = ("",)) -> str:
    """``base`` (or ``base_1``, ...) such that no name in ``taken`` is it followed by any of
    ``suffixes``.

    >>> unique_name("B_rf", {"B_rf", "B_rf_1_init"}, ("", "_init"))
    'B_rf_2'
    """
    name, k = base, 1
    while any(name + x in taken for x in suffixes):
        name, k = f"{base}_{k}", k + 1
    return name
