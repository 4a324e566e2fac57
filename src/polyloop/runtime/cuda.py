# SPDX-License-Identifier: Apache-2.0
"""CUDA modules: load PTX with the CUDA driver (``cuda-bindings``), launch each kernel with its
grid on NumPy arrays (copied to and from the device), CuPy arrays or PyTorch CUDA tensors (used
in place, no copy). Calls work like the C target's: positional or by name, size parameters
inferred from shapes, outputs not passed are returned. ``benchmark`` times the launches with
CUDA events.

Building needs no GPU: the source and the PTX are readable on any machine with nvcc or NVRTC;
calling a module where no CUDA device is found raises ``DeviceError``.
"""
from __future__ import annotations

import ctypes
import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ArgumentError, DeviceError, PolyloopError
from ..ir.assumption import Assumption
from ..ir.dtypes import DType
from ..ir.expr import Expr
from ..ir.program import Buffer, BufferRole
from .binding import Binder
from .module import signature_to_str
from .shapes import evaluate

EXTRA_HINT = "install the driver bindings with `pip install cuda-bindings` (`polyloop[cuda]`)"
ALIGNMENT = 16          # bytes: the generated code may access arguments as float4
_CONTEXT: dict[str, Any] = {}


@dataclass(frozen=True, slots=True)
class CudaLaunch:
    """One kernel launch: its name, blocks per grid axis (x, y, z; expressions of the size
    parameters), threads per block per axis, and the buffers it takes, in order (the size
    parameters follow them)."""
    kernel: str
    grid: tuple[Expr, Expr, Expr]
    block: tuple[int, int, int]
    buffers: tuple[str, ...]


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError:
        raise DeviceError("no CUDA device found: the CUDA driver bindings are missing; "
                          + EXTRA_HINT) from None
    return driver


def _check(result: tuple, what: str) -> Any:
    """The values of a driver call after its status; DeviceError naming ``what`` if it failed."""
    driver = _driver()
    err, *values = result
    if err != driver.CUresult.CUDA_SUCCESS:
        _, text = driver.cuGetErrorString(err)
        detail = text.decode() if isinstance(text, bytes) else str(err)
        raise DeviceError(f"CUDA {what} failed: {detail}")
    return values[0] if len(values) == 1 else tuple(values)


def device_context() -> Any:
    """The primary context of device 0, made current once per process; DeviceError saying
    that no CUDA device was found when there is none (or no driver)."""
    if "ctx" not in _CONTEXT:
        driver = _driver()
        try:
            (err,) = driver.cuInit(0)
        except Exception as e:   # the bindings raise when libcuda itself cannot be loaded
            raise DeviceError(f"no CUDA device found: the CUDA driver cannot be loaded ({e})"
                              ) from None
        count = 0
        if err == driver.CUresult.CUDA_SUCCESS:
            err, count = driver.cuDeviceGetCount()
        if err != driver.CUresult.CUDA_SUCCESS or count == 0:
            raise DeviceError(f"no CUDA device found ({err}); build with target='opencl' or "
                              "'c' to run here, or run on a machine with an NVIDIA GPU")
        device = _check(driver.cuDeviceGet(0), "cuDeviceGet")
        ctx = _check(driver.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
        _check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        _CONTEXT["ctx"], _CONTEXT["device"] = ctx, device
    return _CONTEXT["ctx"]


def device_available() -> tuple[bool, str]:
    """(True, device name) when a CUDA device can run modules here, else (False, why not)."""
    try:
        device_context()
    except DeviceError as e:
        return False, str(e)
    driver = _driver()
    name = _check(driver.cuDeviceGetName(64, _CONTEXT["device"]), "cuDeviceGetName")
    return True, name.split(b"\0")[0].decode()


# float32 FMA units per SM, by compute capability major version (Volta .. Blackwell); each
# does 2 flops per clock
FP32_LANES_PER_SM = {7: 64, 8: 128, 9: 128, 10: 128, 12: 128}


@dataclass(frozen=True, slots=True)
class DeviceProperties:
    """What a benchmark reports about device 0."""
    name: str
    capability: str
    sms: int
    clock_ghz: float
    fp32_peak: float          # flop/s


def device_properties() -> DeviceProperties:
    """Name, compute capability, SM count, clock and float32 peak of device 0."""
    device_context()
    driver = _driver()
    attr = driver.CUdevice_attribute

    def get(a) -> int:
        return int(_check(driver.cuDeviceGetAttribute(a, _CONTEXT["device"]),
                          "cuDeviceGetAttribute"))
    major = get(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
    minor = get(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
    sms = get(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
    ghz = get(attr.CU_DEVICE_ATTRIBUTE_CLOCK_RATE) / 1e6       # kHz -> GHz
    lanes = FP32_LANES_PER_SM.get(major, 128) if not (major == 8 and minor == 0) else 64
    _, name = device_available()
    return DeviceProperties(name, f"{major}.{minor}", sms, ghz, 2.0 * lanes * sms * ghz * 1e9)


class CudaModule:
    """A CUDA program (``source``, and ``ptx`` it compiled to) callable on arrays."""

    def __init__(self, source: str, ptx: str, *, entry: str, args: tuple[Buffer, ...],
                 params: tuple[str, ...], scratch: tuple[Buffer, ...],
                 launches: tuple[CudaLaunch, ...],
                 assumptions: tuple[Assumption, ...] = ()) -> None:
        self.source, self.ptx = source, ptx
        self.entry, self.target = entry, "cuda"
        self.args, self.params = tuple(args), tuple(params)
        self.scratch, self.launches = tuple(scratch), tuple(launches)
        self.signature = signature_to_str(entry, self.args)
        self._binder = Binder(entry, self.args, self.params, assumptions=assumptions)
        self._functions: dict[str, Any] | None = None

    @property
    def requires(self) -> tuple[str, ...]:
        """The conditions on the sizes every call checks (see ``Module.requires``)."""
        return self._binder.requires

    def __repr__(self) -> str:
        return f"<CudaModule {self.signature}>"

    def _load(self) -> dict[str, Any]:
        """The kernels, loaded on the first call (a module is built without a device)."""
        if self._functions is None:
            device_context()
            driver = _driver()
            module = _check(driver.cuModuleLoadData(self.ptx.encode() + b"\0"),
                            "loading the PTX of " + self.entry)
            self._functions = {x.kernel: _check(driver.cuModuleGetFunction(
                module, x.kernel.encode()), "cuModuleGetFunction") for x in self.launches}
        return self._functions

    def __call__(self, *positional: object, **named: object) -> object:
        return self._run(positional, named, timed=False)[0]

    def benchmark(self, *positional: object, repeat: int = 10, warmup: int = 2,
                  **named: object) -> float:
        """Median seconds of the launches of one call (transfers excluded; CUDA events)."""
        if repeat < 1 or warmup < 0:
            raise PolyloopError(f"benchmark() needs repeat >= 1 and warmup >= 0, got "
                                f"repeat={repeat}, warmup={warmup}")
        for _ in range(warmup):
            self._run(positional, dict(named), timed=False)
        return statistics.median(self._run(positional, dict(named), timed=True)[1]
                                 for _ in range(repeat))

    def _run(self, positional: tuple, named: dict, *, timed: bool) -> tuple[object, float]:
        functions = self._load()
        driver = _driver()
        host, device_given = self._split(positional, named)
        arrays, _, plan = self._binder.bind(*host)
        env = dict(zip(self.params, (int(v) for v in plan.params)))
        owned: list[Any] = []
        pointers: dict[str, int] = {}
        try:
            for slot, a in zip(self._binder.slots, arrays):
                if slot.name in device_given:
                    pointers[slot.name] = device_given[slot.name]
                    continue
                pointers[slot.name] = self._alloc(max(a.nbytes, 1), owned)
                if slot.buffer.role is not BufferRole.OUTPUT and a.nbytes:
                    _check(driver.cuMemcpyHtoD(pointers[slot.name], a.ctypes.data, a.nbytes),
                           "cuMemcpyHtoD")
            for b in self.scratch:
                size = int(np.prod([evaluate(d, env) for d in b.shape])) * b.dtype.itemsize
                pointers[b.name] = self._alloc(max(size, 1), owned)
            seconds = self._launch_all(functions, pointers, env, timed)
            for slot, a in zip(self._binder.slots, arrays):
                if slot.written and slot.name not in device_given and a.nbytes:
                    _check(driver.cuMemcpyDtoH(a.ctypes.data, pointers[slot.name], a.nbytes),
                           "cuMemcpyDtoH")
        finally:
            for p in owned:
                driver.cuMemFree(p)
        allocations = plan.allocations
        if not allocations:
            return None, seconds
        if len(allocations) == 1:
            return arrays[allocations[0][0]], seconds
        return tuple(arrays[i] for i, _ in allocations), seconds

    @staticmethod
    def _alloc(nbytes: int, owned: list) -> int:
        p = _check(_driver().cuMemAlloc(nbytes), f"cuMemAlloc of {nbytes} bytes")
        owned.append(p)
        return int(p)

    def _launch_all(self, functions: dict, pointers: dict[str, int], env: dict[str, int],
                    timed: bool) -> float:
        driver = _driver()
        events = [_check(driver.cuEventCreate(0), "cuEventCreate") for _ in range(2)]
        _check(driver.cuEventRecord(events[0], 0), "cuEventRecord")
        for x in self.launches:
            grid = [evaluate(g, env) for g in x.grid]
            if min(grid) <= 0:
                continue
            values = tuple(pointers[n] for n in x.buffers) + tuple(env[p] for p in self.params)
            types = (ctypes.c_void_p,) * len(x.buffers) + (ctypes.c_longlong,) * len(self.params)
            _check(driver.cuLaunchKernel(functions[x.kernel], *grid, *x.block, 0, 0,
                                         (values, types), 0), f"launching {x.kernel}")
        _check(driver.cuEventRecord(events[1], 0), "cuEventRecord")
        _check(driver.cuEventSynchronize(events[1]), f"running {self.entry}")
        ms = _check(driver.cuEventElapsedTime(events[0], events[1]), "cuEventElapsedTime")
        for e in events:
            driver.cuEventDestroy(e)
        return ms / 1e3 if timed else 0.0

    def _split(self, positional: tuple, named: dict) -> tuple[tuple[tuple, dict], dict]:
        """CuPy arrays and torch CUDA tensors (anything with ``__cuda_array_interface__``)
        stand in for NumPy arrays of their shape during argument checks; the kernels then use
        their device memory directly."""
        names = [b.name for b in self.args]
        device: dict[str, int] = {}

        def host(name: str, value: object) -> object:
            iface = _cuda_interface(value)
            if iface is None:
                return value
            shape, dtype = tuple(iface["shape"]), iface.get("dtype") or np.dtype(iface["typestr"])
            strides = iface.get("strides")
            if strides is not None and strides != _c_strides(shape, dtype.itemsize):
                raise ArgumentError(f"argument '{name}' of {self.entry}() must be a "
                                    "C-contiguous device array; pass .contiguous() (torch) or "
                                    "cupy.ascontiguousarray(...)")
            pointer = int(iface["data"][0])
            if pointer % ALIGNMENT:
                raise ArgumentError(f"argument '{name}' of {self.entry}() starts at a device "
                                    f"address that is not {ALIGNMENT}-byte aligned (a view "
                                    "with an offset?); pass a copy")
            device[name] = pointer
            return np.empty(shape, dtype)
        pos = tuple(host(names[k] if k < len(names) else str(k), v)
                    for k, v in enumerate(positional))
        nam = {k: host(k, v) for k, v in named.items()}
        return (pos, nam), device


def _cuda_interface(value: object) -> dict | None:
    """``__cuda_array_interface__`` of a device array, or None for a host one. A torch CUDA
    bfloat16 tensor has none (the interface has no bfloat16 type string): its pointer, shape
    and strides are read from the tensor, its dtype is ml_dtypes' bfloat16."""
    if str(getattr(value, "dtype", "")) == "torch.bfloat16" and getattr(value, "is_cuda", False):
        itemsize = 2
        return {"shape": tuple(value.shape), "dtype": DType.BFLOAT16.numpy,  # type: ignore
                "data": (value.data_ptr(), False),                         # type: ignore
                "strides": tuple(x * itemsize for x in value.stride())}     # type: ignore
    return getattr(value, "__cuda_array_interface__", None)


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    out, step = [], itemsize
    for extent in reversed(shape):
        out.append(step)
        step *= extent
    return tuple(reversed(out))


__all__ = ["CudaLaunch", "CudaModule", "DeviceProperties", "device_available", "device_context",
           "device_properties"]
