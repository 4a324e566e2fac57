# SPDX-License-Identifier: Apache-2.0
"""Typed values of loop annotations that a later layer acts on.

A loop's ``annotations`` are ``(key, value)`` pairs carried from the loop tree through isl's
AST into the loop AST. Most values are only shown (as a comment above the loop); the ones
lowering acts on are these frozen dataclasses, read back by type and field, never by parsing
their text. ``str()`` of each is the text printed by ``sch.show()`` and in generated code.
The keys a later layer acts on are the members of :class:`NoteKey`.

>>> from polyloop.ir.loop_notes import PrefetchHint, TensorizePart
>>> str(PrefetchHint("A", "B", 2, write=False, locality=3))
'A for B, 2 iterations ahead, read, locality 3'
>>> TensorizePart(loop=4, position=1).position
1
>>> NoteKey.of("nontemporal") is NoteKey.NONTEMPORAL, NoteKey.of("my_note")
(True, 'my_note')
"""
from __future__ import annotations

import enum
from dataclasses import dataclass


class NoteKey(enum.StrEnum):
    """The annotation keys that one layer writes and another acts on. A member is a ``str``
    equal to its text, so a key a user typed (``sch.annotate(loop, "nontemporal", "Y")``)
    compares equal, prints as typed and keeps its place in a trace."""

    NONTEMPORAL = "nontemporal"                  # codegen: streaming stores of these buffers
    ISOLATE = "isolate"                          # poly: full-tile isolation "on" / "off"
    TENSORIZE = "tensorize"                      # lower: a TensorizeMark on a nest's top loop
    TENSORIZE_LOOP = "tensorize_loop"            # lower: a TensorizePart on each of its loops
    TENSORIZE_FALLBACK = "tensorize_fallback"    # shown: why a nest kept its loops
    PREFETCH_LOOP = "prefetch loop"              # lower: a PrefetchPath to a hinted loop
    PREFETCH = "prefetch"                        # lower: a PrefetchHint on a hinted loop
    GRID = "grid"                                # codegen: "exact" on a hardware-id loop that
                                                 # covers its whole grid (its id needs no guard)
    BALANCED = "balanced"                        # codegen: a parallel loop of unequal
                                                 # iterations, handed out in chunks

    @classmethod
    def of(cls, key: str) -> NoteKey | str:
        """The member spelled ``key``, or ``key`` itself (a note that is only shown)."""
        return cls._value2member_map_.get(key, key)  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class AlongLoop:
    """The enclosing loop a prefetch looks along: its name (for messages) and tree id."""
    name: str
    id: int


@dataclass(frozen=True, slots=True)
class PrefetchHint:
    """One prefetch request of ``Schedule.prefetch`` (annotation key ``prefetch``)."""
    buffer: str
    block: str
    distance: int
    write: bool
    locality: int
    along: AlongLoop | None = None

    def text(self) -> str:
        """``B for C, 1 iteration ahead, read, locality 3``."""
        plural = "" if self.distance == 1 else "s"
        along = "" if self.along is None else \
            f" along loop {self.along.name} (#{self.along.id})"
        return (f"{self.buffer} for {self.block}, {self.distance} iteration{plural} ahead"
                f"{along}, {'write' if self.write else 'read'}, locality {self.locality}")

    def __str__(self) -> str:
        return self.text()


@dataclass(frozen=True, slots=True)
class SkippedPrefetch:
    """A hint lowering could not emit, kept as a comment that says why."""
    hint: PrefetchHint
    why: str

    def __str__(self) -> str:
        return f"{self.hint.text()} (not emitted: {self.why})"


@dataclass(frozen=True, slots=True)
class PrefetchPath:
    """Marks a loop on the way to a hinted loop, so that lowering finds the tree loop ``id``
    in isl's AST."""
    id: int

    def __str__(self) -> str:
        return str(self.id)


@dataclass(frozen=True, slots=True)
class TensorizeMark:
    """The top loop of a nest ``Schedule.tensorize`` replaces by ``intrin``."""
    intrin: str
    loop: int

    def __str__(self) -> str:
        return f"{self.intrin} #{self.loop}"


@dataclass(frozen=True, slots=True)
class TensorizePart:
    """A loop of a tensorized nest: the id of the nest's top loop and its position in it
    (isl writes no loop for an axis of extent 1, so each loop says where it belongs)."""
    loop: int
    position: int

    def __str__(self) -> str:
        return f"#{self.loop}.{self.position}"
