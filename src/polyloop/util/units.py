# SPDX-License-Identifier: Apache-2.0
"""How polyloop prints a duration, in every table it writes (demo, bench, profiles).

>>> from polyloop.util.units import format_time
>>> format_time(2.5), format_time(0.0123), format_time(4.5e-5), format_time(None)
('2.500 s', '12.30 ms', '45.0 us', '-')
"""
from __future__ import annotations


def format_time(seconds: float | None) -> str:
    """Seconds as ``s``, ``ms`` or ``us`` with three or four significant digits; ``-`` for None."""
    if seconds is None:
        return "-"
    if seconds >= 1.0:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} us"
