# SPDX-License-Identifier: Apache-2.0
"""L5 runtime: compile generated C, cache it on disk, load it, check arguments, call and time it.

>>> from polyloop.runtime import compile_c, Module
"""
from .compiler import Library, compile_c
from .module import Module

__all__ = ["Library", "Module", "compile_c"]
