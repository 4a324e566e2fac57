# SPDX-License-Identifier: Apache-2.0
"""OpenCL modules: build a program with PyOpenCL, enqueue its launches on NumPy (or PyOpenCL)
arrays. Calls work like the C target's: positional or by name, size parameters inferred from
shapes, outputs not passed are returned (one array, or a tuple in argument order).

PyOpenCL is optional (the ``opencl`` extra) and imported only here, when a module is built.
Without a usable platform, building raises a BuildError saying how to install one.

>>> mod = OpenCLModule(source, entry="k", args=..., params=("n",), scratch=(),
...                    launches=(LaunchSpec("k", groups, (128, 1, 1), ("a", "out")),))  # doctest: +SKIP
"""
from __future__ import annotations

import hashlib
import math
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import config
from ..errors import ArgumentError, BuildError, PolyloopError
from ..ir.assumption import Assumption
from ..ir.expr import Expr
from ..ir.program import Buffer, BufferRole
from . import cache
from .binding import Binder
from .module import index_fault_error, signature_to_str
from .shapes import evaluate

INSTALL_HINT = ("install one with `pip install pyopencl pocl-binary-distribution` (PoCL, an "
                "OpenCL platform for the CPU; also the `polyloop[opencl]` extra) or the system "
                "package pocl-opencl-icd")
_DEFAULT: dict[str, Any] = {}
# The launch argument that stands for the fault words of checked indices (codegen.index_checks):
# not a valid buffer name, so no user buffer can take its place.
FAULT_BUFFER = "<index fault>"
FAULT_WORDS = 5


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """One kernel enqueue: its name, work-groups per axis (x, y, z; expressions of the size
    parameters), work-items per group per axis, and the buffers it takes, in order (the size
    parameters follow them)."""
    kernel: str
    groups: tuple[Expr, Expr, Expr]
    items: tuple[int, int, int]
    buffers: tuple[str, ...]


def _cl():
    try:
        import pyopencl as cl
    except ImportError:
        raise BuildError("the OpenCL target needs PyOpenCL and an OpenCL platform; "
                         + INSTALL_HINT) from None
    return cl


_PROBE = "__kernel void polyloop_probe(__global float *a) { a[get_global_id(0)] += 1.0f; }"


def _usable(cl, device) -> str | None:
    """None when ``device`` builds and runs a trivial kernel, else why not. A device can be
    listed and still fail every build (e.g. an OpenCL CPU runtime whose LLVM does not know
    the host CPU: "unknown target CPU 'generic'"), so each one is tried before it is chosen;
    one whose build does not finish within the compile time-out is not usable either."""
    try:
        ctx = cl.Context([device])
        build_program(cl, ctx, _PROBE, "polyloop_probe")
        return None
    except (cl.Error, BuildError) as e:
        first = str(e).strip().splitlines()
        return first[0] if first else type(e).__name__


def default_queue():
    """A command queue on the first OpenCL device that can build a kernel, created once per
    process."""
    if "queue" not in _DEFAULT:
        cl = _cl()
        try:
            platforms = cl.get_platforms()
        except cl.Error:
            platforms = []
        devices = [d for p in platforms for d in p.get_devices()]
        if not devices:
            raise BuildError("no OpenCL platform with a device was found; " + INSTALL_HINT)
        failures = []
        for device in devices:
            why = _usable(cl, device)
            if why is None:
                _DEFAULT["queue"] = cl.CommandQueue(cl.Context([device]))
                break
            failures.append(f"{device.platform.name} / {device.name}: {why}")
        else:
            raise BuildError("no OpenCL device here can build a kernel ("
                             + "; ".join(failures) + "); " + INSTALL_HINT)
    return _DEFAULT["queue"]


def platform_available() -> tuple[bool, str]:
    """(True, device description) when OpenCL can run here, else (False, why not)."""
    try:
        q = default_queue()
    except BuildError as e:
        return False, str(e)
    d = q.device
    return True, f"{d.platform.name} / {d.name}"


def _source_path(source: str) -> str:
    """Where the rejected ``source`` was written for the user to read (in the private cache)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    folder = cache.safe_directory(config.CONFIG.cache_dir) / "opencl"
    path = folder / f"{digest}.cl"
    with cache.locked(folder):
        cache.write_atomic(path, source.encode())
    return str(path)


def _binary_cache() -> str:
    """PyOpenCL's cache of compiled programs, inside polyloop's private cache directory: the
    binaries it holds are loaded onto the device, so they get the same protection."""
    return str(cache.safe_directory(cache.safe_directory(config.CONFIG.cache_dir) / "pyopencl"))


def driver_build(cl: Any, context: Any, source: str, cache_dir: str | None) -> Any:
    """The OpenCL driver's build of ``source`` (through PyOpenCL's cache of binaries in
    ``cache_dir``; None: PyOpenCL's default one)."""
    return cl.Program(context, source).build(cache_dir=cache_dir)


def build_program(cl: Any, context: Any, source: str, entry: str, *,
                  cache_dir: str | None = None) -> Any:
    """``source`` built for ``context``, or a BuildError when the driver has not finished
    within ``POLYLOOP_COMPILE_TIMEOUT`` seconds.

    The driver compiles inside this process and offers no way to stop a compilation, so the
    build runs in a worker thread (PyOpenCL lets go of the interpreter while the driver
    works) and this thread waits for it up to the deadline. A build past the deadline is
    abandoned: its thread is a daemon, which finishes (or hangs) on its own without keeping
    the process alive, and the caller gets the error at once instead of a hang.

    >>> build_program(cl, queue.context, source, "k")  # doctest: +SKIP
    """
    done: dict[str, Any] = {}

    def work() -> None:
        try:
            done["program"] = driver_build(cl, context, source, cache_dir)
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread, re-raised there
            done["error"] = e
    worker = threading.Thread(target=work, name=f"polyloop OpenCL build of {entry}", daemon=True)
    worker.start()
    timeout = config.CONFIG.compile_timeout
    worker.join(timeout)
    if worker.is_alive():
        raise BuildError(f"the OpenCL driver did not finish building '{entry}' within "
                         f"{timeout:g} s (source written to {_source_path(source)}) and the "
                         "build was abandoned; raise POLYLOOP_COMPILE_TIMEOUT for a very large "
                         "kernel, or try another OpenCL device or driver version")
    if "error" in done:
        raise done["error"]
    return done["program"]


def _memory_range(cl: Any, array: Any) -> tuple[int, int, int]:
    """(memory object, first byte, end byte) of a PyOpenCL array's data, a sub-buffer counted
    in the buffer it was cut from."""
    buffer, start = array.base_data, array.offset
    parent = buffer.get_info(cl.mem_info.ASSOCIATED_MEMOBJECT)
    if parent is not None:
        start += buffer.get_info(cl.mem_info.OFFSET)
        buffer = parent
    return buffer.int_ptr, start, start + array.nbytes


class OpenCLModule:
    """An OpenCL program callable on NumPy arrays (PyOpenCL arrays are accepted too)."""

    def __init__(self, source: str, *, entry: str, args: tuple[Buffer, ...],
                 params: tuple[str, ...], scratch: tuple[Buffer, ...],
                 launches: tuple[LaunchSpec, ...], queue: Any = None,
                 assumptions: tuple[Assumption, ...] = (),
                 index_sites: tuple[str, ...] = (),
                 partial_outputs: frozenset[str] = frozenset()) -> None:
        cl = _cl()
        self.source = source
        self.entry = entry
        self.args = tuple(args)
        self.params = tuple(params)
        self.scratch = tuple(scratch)
        self.launches = tuple(launches)
        self._index_sites = tuple(index_sites)   # accesses checked at run time, by number
        self.target = "opencl"
        self.queue = queue if queue is not None else default_queue()
        self.signature = signature_to_str(entry, self.args)
        self._binder = Binder(entry, self.args, self.params, assumptions=assumptions,
                              temps=self.scratch, zeroed=partial_outputs)
        try:
            self.program = build_program(cl, self.queue.context, source, entry,
                                         cache_dir=_binary_cache())
        except cl.Error as e:
            raise BuildError(f"the OpenCL compiler rejected the generated code of '{entry}' "
                             f"(source written to {_source_path(source)}):\n{e}") from None
        self._kernels = {spec.kernel: getattr(self.program, spec.kernel) for spec in launches}

    @property
    def requires(self) -> tuple[str, ...]:
        """The conditions on the sizes every call checks (see ``Module.requires``)."""
        return self._binder.requires

    def __repr__(self) -> str:
        d = self.queue.device
        return f"<OpenCLModule {self.signature} on {d.name.strip()}>"

    def rebuild_options(self) -> dict[str, Any]:
        """The keyword arguments, besides source, entry, args and params, that build this
        module again (in another process, on that process's default device).

        >>> OpenCLModule(mod.source, entry=mod.entry, args=mod.args, params=mod.params,
        ...              **mod.rebuild_options())  # doctest: +SKIP
        """
        return {"scratch": self.scratch, "launches": self.launches,
                "assumptions": self._binder.assumptions, "index_sites": self._index_sites,
                "partial_outputs": self._binder.zeroed}

    # calls ----------------------------------------------------------------------------------------
    def __call__(self, *positional: object, **named: object) -> object:
        outputs, _ = self._run(positional, named)
        return outputs

    def _run(self, positional: tuple, named: dict) -> tuple[object, float]:
        cl = _cl()
        host, device_given = self._split(positional, named)
        arrays, _, plan = self._binder.bind(*host)
        if len(device_given) > 1:
            self._check_device_aliasing(cl, device_given)
        env = dict(zip(self.params, (int(v) for v in plan.params)))
        try:
            buffers = self._buffers(cl, arrays, device_given, env)
            start = time.perf_counter()
            self._launch(cl, buffers, env)
            for slot, a in zip(self._binder.slots, arrays):
                if slot.written and slot.name not in device_given and a.nbytes:
                    cl.enqueue_copy(self.queue, a, buffers[slot.name])
            self.queue.finish()
            elapsed = time.perf_counter() - start
            fault = np.zeros(FAULT_WORDS, np.int64)
            if self._index_sites:
                cl.enqueue_copy(self.queue, fault, buffers[FAULT_BUFFER])
        except (cl.Error, OverflowError) as e:   # out of device memory, a grid too large
            lines = str(e).strip().splitlines() or [type(e).__name__]
            raise PolyloopError(f"OpenCL could not run {self.entry}() with sizes {env} on "
                                f"{self.queue.device.name.strip()}: {lines[0]}; use smaller "
                                "sizes or another device") from None
        if fault[0]:
            raise index_fault_error(self.entry, self._index_sites, *map(int, fault[1:]))
        allocations = plan.allocations
        if not allocations:
            return None, elapsed
        if len(allocations) == 1:
            return arrays[allocations[0][0]], elapsed
        return tuple(arrays[i] for i, _ in allocations), elapsed

    def _buffers(self, cl: Any, arrays: list, device_given: dict[str, Any],
                 env: dict[str, int]) -> dict[str, Any]:
        """Device memory of every argument (inputs copied over) and scratch buffer."""
        ctx = self.queue.context
        buffers: dict[str, Any] = {}
        for slot, a in zip(self._binder.slots, arrays):
            if slot.name in device_given:
                buffers[slot.name] = device_given[slot.name].base_data
                continue
            flags = cl.mem_flags.READ_WRITE
            # an output the kernel may not write everywhere starts as the caller's array
            # (zeros when allocated), so the copy back never overwrites what it did not write
            copy_in = slot.buffer.role is not BufferRole.OUTPUT or slot.name in self._binder.zeroed
            if copy_in and a.nbytes:
                buffers[slot.name] = cl.Buffer(ctx, flags | cl.mem_flags.COPY_HOST_PTR, hostbuf=a)
            else:
                buffers[slot.name] = cl.Buffer(ctx, flags, size=max(a.nbytes, 1))
        for b in self.scratch:
            size = math.prod(max(evaluate(d, env), 0) for d in b.shape) * b.dtype.itemsize
            buffers[b.name] = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, size=max(size, 1))
        if self._index_sites:
            buffers[FAULT_BUFFER] = cl.Buffer(ctx, cl.mem_flags.READ_WRITE
                                              | cl.mem_flags.COPY_HOST_PTR,
                                              hostbuf=np.zeros(FAULT_WORDS, np.int64))
        return buffers

    def _launch(self, cl: Any, buffers: dict[str, Any], env: dict[str, int]) -> None:
        for spec in self.launches:
            groups = [evaluate(g, env) for g in spec.groups]
            if min(groups) <= 0:
                continue
            kernel = self._kernels[spec.kernel]
            kernel.set_args(*[buffers[n] for n in spec.buffers],
                            *[np.int64(env[p]) for p in self.params])
            cl.enqueue_nd_range_kernel(self.queue, kernel,
                                       tuple(g * i for g, i in zip(groups, spec.items)),
                                       spec.items)

    def _split(self, positional: tuple, named: dict) -> tuple[tuple[tuple, dict], dict]:
        """PyOpenCL arrays stand in for NumPy arrays of their shape during argument checks;
        the kernel then uses their device memory directly."""
        names = [b.name for b in self.args]
        device: dict[str, Any] = {}

        def host(name: str, value: object) -> object:
            if type(value).__module__.startswith("pyopencl") and hasattr(value, "base_data"):
                if value.context != self.queue.context:  # type: ignore[attr-defined]
                    raise ArgumentError(f"argument '{name}' of {self.entry}() lives on another "
                                        "OpenCL context; build with queue= on its queue")
                if not value.flags.c_contiguous or value.offset:  # type: ignore[attr-defined]
                    raise ArgumentError(f"argument '{name}' of {self.entry}() must be a "
                                        "C-contiguous PyOpenCL array without offset")
                device[name] = value
                return np.empty(value.shape, value.dtype)  # type: ignore[attr-defined]
            return value
        pos = tuple(host(names[k] if k < len(names) else str(k), v)
                    for k, v in enumerate(positional))
        nam = {k: host(k, v) for k, v in named.items()}
        return (pos, nam), device

    def _check_device_aliasing(self, cl: Any, device: dict[str, Any]) -> None:
        """A written PyOpenCL array must not share device memory with another argument, as
        NumPy arguments must not overlap: the kernel reads what it has already written."""
        ranges = {name: _memory_range(cl, a) for name, a in device.items()}
        for slot in self._binder.slots:
            if not slot.written or slot.name not in ranges:
                continue
            mem, lo, hi = ranges[slot.name]
            if lo == hi:
                continue
            for other, (mem2, lo2, hi2) in ranges.items():
                if other != slot.name and mem == mem2 and lo2 < hi2 and lo < hi2 and lo2 < hi:
                    raise ArgumentError(
                        f"argument '{slot.name}' of {self.entry}() is written by the kernel and "
                        f"shares device memory with argument '{other}'; the kernel assumes "
                        f"arguments do not overlap, pass separate arrays (e.g. {other}.copy())")

    def benchmark(self, *positional: object, repeat: int = 10, warmup: int = 2,
                  **named: object) -> float:
        """Median seconds of the launches of one call (transfers excluded), over ``repeat``."""
        if repeat < 1 or warmup < 0:
            raise PolyloopError(f"benchmark() needs repeat >= 1 and warmup >= 0, got "
                                f"repeat={repeat}, warmup={warmup}")
        for _ in range(warmup):
            self._run(positional, dict(named))
        return statistics.median(self._run(positional, dict(named))[1] for _ in range(repeat))
