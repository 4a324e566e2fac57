# SPDX-License-Identifier: Apache-2.0
"""C identifiers for IR names: valid, unique, and distinct per namespace.

A name of the user's that the language, an included header or the target predefines (a
keyword, ``int64_t``, ``INT64_MAX``, ``M_PI``, ``linux``) gets a trailing ``_``; one that is not
an ASCII identifier (``ä``) is spelled with ``_`` for each other character.
"""
from __future__ import annotations

import enum
import re

from ..lower.names import is_reserved
from .tables import C_KEYWORDS

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_c_identifier(name: str) -> bool:
    """True for a name usable as a C identifier: ``is_c_identifier("matmul") is True``."""
    return bool(_IDENTIFIER.fullmatch(name)) and name not in C_KEYWORDS


class NameKind(enum.Enum):
    """Namespaces of the IR: a size parameter and a loop may both be called ``k``."""
    PARAM = "param"
    ITERATOR = "iterator"
    BUFFER = "buffer"


class Names:
    """IR names to unique valid C identifiers; valid names stay as they are when free.

    >>> names = Names({"args"})
    >>> names.ident(NameKind.ITERATOR, "i.outer"), names.ident(NameKind.BUFFER, "args")
    ('i_outer', 'args_')
    >>> names.ident(NameKind.PARAM, "k"), names.ident(NameKind.ITERATOR, "k")
    ('k', 'k_1')
    >>> names.ident(NameKind.BUFFER, "INT64_MAX"), names.ident(NameKind.BUFFER, "linux")
    ('INT64_MAX_', 'linux_')
    """

    def __init__(self, reserved: frozenset[str] | set[str]) -> None:
        self._reserved = set(reserved)
        self._map: dict[tuple[NameKind, str], str] = {}
        self._taken: set[str] = set()

    def ident(self, kind: NameKind, name: str) -> str:
        key = (kind, name)
        if key not in self._map:
            base = re.sub(r"[^A-Za-z0-9_]", "_", name) or "v"
            if base[0].isdigit() or base.startswith("_"):
                base = "v" + base
            # pl_ is the helpers' prefix; is_reserved: the headers' macros and types
            if base in self._reserved or is_reserved(base):
                base += "_"
            ident, n = base, 1
            while ident in self._taken:
                ident, n = f"{base}_{n}", n + 1
            self._map[key] = ident
            self._taken.add(ident)
        return self._map[key]
