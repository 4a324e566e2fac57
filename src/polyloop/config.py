# SPDX-License-Identifier: Apache-2.0
"""Settings. The only module that reads environment variables."""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Config:
    cache_dir: Path
    cc: str
    dump: frozenset[str]
    num_threads: int | None
    compile_timeout: float = 300.0
    fuzz_examples: int | None = None    # POLYLOOP_FUZZ_EXAMPLES: inputs per fuzz test
    cflags: tuple[str, ...] = ()        # POLYLOOP_CFLAGS: appended to the C compiler's flags
    # OMP_WAIT_POLICY or GOMP_SPINCOUNT as the user set them (None: unset, polyloop chooses
    # "passive" before the OpenMP runtime starts, see runtime/openmp.py)
    omp_waiting: str | None = None
    # POLYLOOP_CC_<TRIPLE> (e.g. POLYLOOP_CC_AARCH64_LINUX_GNU): the C compiler of a cross
    # target, keyed by the variable's suffix; default <triple>-gcc
    cross_cc: tuple[tuple[str, str], ...] = ()
    rpc_key: str | None = None           # POLYLOOP_RPC_KEY: the RPC servers' shared key
    onnx_backend_test: bool = False     # POLYLOOP_ONNX_BACKEND_TEST=1: run ONNX's BackendTest
    # POLYLOOP_GRAPH_REGIONS=kernel: each kernel of a compiled model opens its own parallel
    # region, as a stand-alone kernel does (to compare with the default, one per run)
    region_per_kernel: bool = False

    def cc_for(self, triple: str) -> str:
        """The C compiler of cross target ``triple``: POLYLOOP_CC_<TRIPLE> or ``<triple>-gcc``.

        >>> Config(Path("."), "gcc", frozenset(), None).cc_for("aarch64-linux-gnu")
        'aarch64-linux-gnu-gcc'
        """
        key = triple.upper().replace("-", "_").replace(".", "_")
        return dict(self.cross_cc).get(key, f"{triple}-gcc")

    @property
    def threads(self) -> int:
        """The threads a parallel loop runs on: POLYLOOP_NUM_THREADS, else one per CPU."""
        return self.num_threads or os.cpu_count() or 1


# OpenMP runtimes crash or abort when asked for tens of thousands of threads; more threads
# than a few per core never make a kernel faster, so larger requests are clamped.
THREADS_PER_CPU_LIMIT = 4
DEFAULT_COMPILE_TIMEOUT = 300.0


def max_threads() -> int:
    """The largest POLYLOOP_NUM_THREADS honoured: a few threads per CPU of this machine."""
    return THREADS_PER_CPU_LIMIT * (os.cpu_count() or 1)


def _positive_int(variable: str) -> int | None:
    """The variable's value as a positive integer; unset or invalid (with a warning) is None."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return None
    if text.isdigit() and int(text) > 0:
        return int(text)
    warnings.warn(f"{variable}={text!r} is not a positive integer; it is ignored",
                  RuntimeWarning, stacklevel=2)
    return None


def _thread_count() -> int | None:
    """POLYLOOP_NUM_THREADS, clamped (with a warning) to ``max_threads()``."""
    threads = _positive_int("POLYLOOP_NUM_THREADS")
    limit = max_threads()
    if threads is not None and threads > limit:
        warnings.warn(f"POLYLOOP_NUM_THREADS={threads} is more than {THREADS_PER_CPU_LIMIT} "
                      f"threads per CPU ({os.cpu_count() or 1} CPUs); {limit} threads are used",
                      RuntimeWarning, stacklevel=3)
        return limit
    return threads


def _timeout(variable: str, default: float) -> float:
    """A positive number of seconds from ``variable``; unset or invalid (warned) is ``default``."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value > 0 and value != float("inf"):
        return value
    warnings.warn(f"{variable}={text!r} is not a positive number of seconds; "
                  f"{default:g} s is used", RuntimeWarning, stacklevel=3)
    return default


def load() -> Config:
    cache = os.environ.get("POLYLOOP_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "polyloop")
    dump = os.environ.get("POLYLOOP_DUMP", "")
    threads = _thread_count()
    return Config(
        cache_dir=Path(cache),
        cc=os.environ.get("POLYLOOP_CC", "gcc"),
        dump=frozenset(s.strip() for s in dump.split(",") if s.strip()),
        num_threads=threads,
        compile_timeout=_timeout("POLYLOOP_COMPILE_TIMEOUT", DEFAULT_COMPILE_TIMEOUT),
        fuzz_examples=_positive_int("POLYLOOP_FUZZ_EXAMPLES"),
        cflags=tuple(os.environ.get("POLYLOOP_CFLAGS", "").split()),
        omp_waiting=os.environ.get("OMP_WAIT_POLICY") or os.environ.get("GOMP_SPINCOUNT"),
        rpc_key=os.environ.get("POLYLOOP_RPC_KEY") or None,
        cross_cc=tuple(sorted((k[len("POLYLOOP_CC_"):], v) for k, v in os.environ.items()
                              if k.startswith("POLYLOOP_CC_") and v.strip())),
        onnx_backend_test=os.environ.get("POLYLOOP_ONNX_BACKEND_TEST", "") not in ("", "0"),
        region_per_kernel=os.environ.get("POLYLOOP_GRAPH_REGIONS", "").strip() == "kernel",
    )


CONFIG = load()

