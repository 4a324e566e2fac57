# SPDX-License-Identifier: Apache-2.0
"""``polyloop bench``: polyloop's operator schedules timed against PyTorch, NumPy and Apache TVM
in one run, next to the machine's limits measured by the harness itself.

>>> from polyloop.bench import QUICK, run_benchmarks, table
>>> records, limits = run_benchmarks(QUICK[:1], repeat=2, rounds=1, peers=("numpy",),
...                                  limits=False)  # doctest: +SKIP
>>> print(table(records, limits))  # doctest: +SKIP
"""
from .limits import Limits, measure_limits
from .report import plot, table, to_json
from .run import BenchFailure, Record, run_benchmarks
from .workloads import QUICK, WORKLOADS, Workload, select

__all__ = ["BenchFailure", "Limits", "QUICK", "Record", "WORKLOADS", "Workload", "measure_limits",
           "plot", "run_benchmarks", "select", "table", "to_json"]
