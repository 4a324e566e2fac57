# SPDX-License-Identifier: Apache-2.0
"""Module: a compiled kernel loaded with ctypes and called on NumPy arrays."""
from __future__ import annotations

import ctypes
import math
import statistics
import time
from collections.abc import Callable
from os import PathLike
from pathlib import Path

from .. import config
from ..config import max_threads
from ..errors import BuildError, IndexOutOfBounds, PolyloopError
from ..ir.assumption import Assumption
from ..ir.program import Buffer
from .cache import verified
from .compiler import Library
from .header import INDEX_FAULT_STATUS, STATUS_CODES
from .kernel import CompiledKernel, returned, signature_to_str
from .openmp import load_library
from .profile import Profile, ProfileLayout, make_profile, openmp_threads, read_counters

__all__ = ["Module", "index_fault_error", "kernel_failure", "signature_to_str"]

# Calibration stops growing the number of calls per timing here, even for an empty kernel.
_MAX_CALLS_PER_TIMING = 1_000_000


class Module(CompiledKernel):
    """A compiled kernel, callable on NumPy arrays.

    Arrays are passed positionally in signature order or by buffer name; size parameters are
    inferred from the shapes or passed by name. Outputs that are not passed are allocated and
    returned (one array, a tuple of several, or None). Every call checks its arguments and
    raises ArgumentError before the kernel could run on a wrong one: shapes, dtypes, layout,
    overlap, sizes within int64, the program's ``assumptions``, and byte counts of the outputs
    and ``temps`` (the heap temporaries the kernel allocates).

    >>> mod = Module(lib, entry="add", args=(x, y, z), params=("n",), source=src)  # doctest: +SKIP
    >>> z = mod(np.ones(5, "float32"), np.ones(5, "float32"))                       # doctest: +SKIP
    >>> mod(a, b, z)          # or pass the output; n is bound from the shapes      # doctest: +SKIP
    """

    def __init__(self, library: Library, *, entry: str, args: tuple[Buffer, ...],
                 params: tuple[str, ...], source: str, target: str = "c",
                 profile: ProfileLayout | None = None,
                 assumptions: tuple[Assumption, ...] = (),
                 temps: tuple[Buffer, ...] = (),
                 index_sites: tuple[str, ...] = (),
                 partial_outputs: frozenset[str] = frozenset()) -> None:
        super().__init__(library, entry=entry, args=args, params=params, source=source,
                         target=target, assumptions=assumptions, temps=temps,
                         index_sites=index_sites, partial_outputs=partial_outputs)
        self._args_type = ctypes.c_void_p * len(self.args)
        self._fn = _load(library, entry)
        self._repeat = _repeat_function(library, entry)
        self._profile = profile
        self._last_params: ctypes.Array | None = None   # the sizes of the latest call

    def __call__(self, *positional: object, **named: object) -> object:
        arrays, pointers, plan = self._binder.bind(positional, named)
        self._last_params = plan.params
        status = self._fn(self._args_type(*pointers), plan.params)
        if status:
            raise self._failure(status)
        return returned(arrays, plan)

    def benchmark(self, *positional: object, repeat: int = 10, warmup: int = 3,
                  min_time: float = 1e-3, stat: str = "median", **named: object) -> float:
        """Median seconds of one call, over ``repeat`` timings after ``warmup`` calls
        (``stat="min"``: the fastest timing, what a machine shared with other processes
        lets through: they only add time).

        Arguments are taken as by a call and checked once; the timing loop then calls the C
        function directly, the number of calls of one timing in one C loop (as TVM's
        ``time_evaluator`` does): what is timed is the kernel, not Python's call. Each timing runs enough calls to last at least ``min_time`` seconds,
        so that tiny kernels are measured above the timer's resolution.

        >>> seconds = mod.benchmark(a, b, c, repeat=5)  # doctest: +SKIP
        """
        if repeat < 1 or warmup < 0 or min_time < 0 or stat not in ("median", "min"):
            raise PolyloopError(f"benchmark() needs repeat >= 1, warmup >= 0, min_time >= 0 "
                                f"and stat 'median' or 'min', got repeat={repeat}, "
                                f"warmup={warmup}, min_time={min_time}, stat={stat!r}")
        arrays, pointers, plan = self._binder.bind(positional, named)
        self._last_params = plan.params
        fn, args_c, params_c = self._fn, self._args_type(*pointers), plan.params
        for _ in range(warmup):
            self._check(fn(args_c, params_c))
        number = self._calls_per_timing(args_c, params_c, min_time)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            status = self._calls(args_c, params_c, number)
            times.append((time.perf_counter() - start) / number)
            self._check(status)
        del arrays  # kept alive until here: the C function holds their pointers
        return min(times) if stat == "min" else statistics.median(times)

    def profile(self, *, reset: bool = False) -> Profile:
        """Where the time of the calls so far went, nest by nest (build with ``profile=True``,
        or ``profile=depth`` for the nests inside the top-level ones too). ``print()`` it for a
        table. Flops and bytes are counted for the sizes of the latest call. ``reset=True``
        zeroes the counters after reading them.

        >>> mod = pl.build(sch, profile=True); mod(a, b, c)  # doctest: +SKIP
        >>> print(mod.profile(reset=True))                   # doctest: +SKIP
        """
        if self._profile is None:
            raise PolyloopError(f"module '{self.entry}' was built without profiling; build it "
                                "with pl.build(..., profile=True)")
        cdll = ctypes.CDLL(str(self.library.path))   # the same loaded library and counters
        counters = read_counters(cdll, len(self._profile.labels), reset=reset)
        values = list(self._last_params) if self._last_params is not None else []
        sizes = dict(zip(self.params, (int(v) for v in values)))
        return make_profile(self.entry, self._profile, counters, threads=openmp_threads(cdll),
                            sizes=sizes)

    def export_library(self, path: str | PathLike) -> tuple[Path, Path]:
        """Copy the shared library to ``path`` and write a C header next to it.

        ``path`` names the library file (the header gets the suffix ``.h``) or an existing
        directory (files ``lib<entry>.so`` and ``lib<entry>.h``). Returns both paths.

        >>> so, h = mod.export_library("build/libmatmul.so")  # doctest: +SKIP
        """
        return self._export(path, checks_sizes=_exports(self.library.path,
                                                        f"{self.entry}_check_sizes"))

    # helpers -------------------------------------------------------------------------------------
    def _calls_per_timing(self, args_c: ctypes.Array, params_c: ctypes.Array,
                          min_time: float) -> int:
        number = 1
        while number < _MAX_CALLS_PER_TIMING:
            start = time.perf_counter()
            status = self._calls(args_c, params_c, number)
            elapsed = time.perf_counter() - start
            self._check(status)
            if elapsed >= min_time:
                break
            # Aim 20% above min_time; grow at least 2x so a noisy first timing cannot stall.
            guess = math.ceil(number * 1.2 * min_time / max(elapsed, 1e-9))
            number = min(max(guess, 2 * number), _MAX_CALLS_PER_TIMING)
        return number

    def _calls(self, args_c: ctypes.Array, params_c: ctypes.Array, number: int) -> int:
        """``number`` calls of the kernel, in one call of the C loop the module has for it
        (none from Python in between), or from Python; the first failing status, else 0."""
        if self._repeat is not None:
            return self._repeat(args_c, params_c, number)
        status = 0
        for _ in range(number):
            status = self._fn(args_c, params_c)
            if status:
                break
        return status

    def _check(self, status: int) -> None:
        if status:
            raise self._failure(status)

    def _failure(self, status: int) -> PolyloopError:
        words = None
        if status == INDEX_FAULT_STATUS and self._index_sites:
            # the out-of-range index the kernel recorded (see codegen.index_checks)
            cdll = ctypes.CDLL(str(self.library.path))   # the loaded library: its fault words
            words = tuple(int(v) for v in (ctypes.c_int64 * 5).in_dll(
                cdll, f"{self.entry}_index_fault"))
        return kernel_failure(self.entry, status, self._index_sites, words)


def kernel_failure(entry: str, status: int, sites: tuple[str, ...],
                   fault_words: tuple[int, ...] | None = None) -> PolyloopError:
    """The error of a call of kernel ``entry`` that returned ``status``; ``fault_words``: the
    kernel's ``ENTRY_index_fault`` words after an index fault (status 2), when read.

    >>> print(kernel_failure("f", 1, ()))
    kernel f() failed with status 1: a temporary buffer could not be allocated (out of memory, or its byte count does not fit a 64-bit size)
    """
    if status == INDEX_FAULT_STATUS and sites and fault_words is not None \
            and len(fault_words) >= 5:
        return index_fault_error(entry, sites, *fault_words[1:5])
    meaning = STATUS_CODES.get(status, "the kernel reported a failure")
    return PolyloopError(f"kernel {entry}() failed with status {status}: {meaning}")


def _exports(path: Path, symbol: str) -> bool:
    """Does the (loaded) library at ``path`` export ``symbol``?"""
    return hasattr(ctypes.CDLL(str(path)), symbol)


def index_fault_error(entry: str, sites: tuple[str, ...], site: int, dim: int, index: int,
                      extent: int) -> IndexOutOfBounds:
    """The error raised after a call in which a checked index left its buffer."""
    where = sites[site] if 0 <= site < len(sites) else f"checked access #{site}"
    return IndexOutOfBounds(
        f"kernel {entry}(): {where} with index {index} in dimension {dim}, outside 0..{extent - 1}"
        "; that access was skipped, so the outputs are incomplete. Keep the values of index "
        "arrays (and non-affine indices) inside the shape of the buffer they index")


def _load(library: Library, entry: str) -> Callable[..., int]:
    if not verified(library.path):
        raise BuildError(f"the compiled library {library.path} is not the one polyloop wrote "
                         "(its SHA-256 differs from the one recorded, or none was): it is not "
                         "loaded. Build again to replace it")
    try:
        cdll = load_library(library.path)
    except OSError as e:
        raise BuildError(f"cannot load the compiled library {library.path}: {e}; delete that "
                         "cache directory to force a rebuild") from None
    try:
        fn = getattr(cdll, entry)
    except AttributeError:
        raise BuildError(f"the compiled library {library.path} has no function '{entry}' "
                         f"(source: {library.source_path}); the entry name must match the "
                         "generated code") from None
    fn.restype = ctypes.c_int32
    fn.argtypes = (ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64))
    apply_thread_count(cdll, config.CONFIG.num_threads)
    return fn


def _repeat_function(library: Library, entry: str) -> Callable[..., int] | None:
    """The C loop that calls ``entry`` a number of times (``pl_repeat_<entry>``, which the C
    target writes next to each entry), or None for a library without one."""
    fn = getattr(ctypes.CDLL(str(library.path)), f"pl_repeat_{entry}", None)
    if fn is not None:
        fn.restype = ctypes.c_int32
        fn.argtypes = (ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64),
                       ctypes.c_int64)
    return fn


def apply_thread_count(cdll: ctypes.CDLL, threads: int | None) -> bool:
    """Set OpenMP's thread count for the process (``POLYLOOP_NUM_THREADS``) through the OpenMP
    runtime the library was linked with; False when unset or the library has no OpenMP. More
    than ``config.max_threads()`` are clamped: OpenMP runtimes crash on huge counts."""
    if not threads:
        return False
    try:
        set_threads = cdll.omp_set_num_threads
    except AttributeError:
        return False
    set_threads.restype = None
    set_threads.argtypes = (ctypes.c_int,)
    set_threads(min(int(threads), max_threads()))
    return True
