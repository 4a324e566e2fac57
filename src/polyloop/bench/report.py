# SPDX-License-Identifier: Apache-2.0
"""The benchmark's outputs: a Markdown table, a JSON list of records, a bar chart.

>>> from polyloop.bench.report import format_time
>>> format_time(0.0123), format_time(4.5e-5), format_time(None)
('12.30 ms', '45.0 us', '-')
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ..errors import PolyloopError
from ..util.units import format_time
from .limits import Limits
from .run import PEERS, Record

_LABELS = {"torch": "PyTorch", "numpy": "NumPy", "tvm": "TVM"}




def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _reference(record: Record, peer: str) -> str:
    seconds = record.reference_s.get(peer)
    if seconds is not None:
        return format_time(seconds)
    note = record.notes.get(peer)
    shown = ("not installed", "unusable", "failed")
    return note if note is not None and note.startswith(shown) else "-"


def _tvm_ratio(record: Record) -> tuple[float | None, str]:
    """polyloop vs TVM: measured, or against a published TVM figure when TVM did not run."""
    measured = record.ratio("tvm")
    fallback = record.workload.goal.tvm_fallback_s
    if measured is not None or fallback is None or record.polyloop_s is None:
        return measured, ""
    return fallback / record.polyloop_s, "*"


def verdict(record: Record, limits: Limits | None) -> str:
    """"met", "not met", "unknown" (a figure missing), or "-" (no goal)."""
    w = record.workload
    if not w.goal.criteria:
        return "-"
    if record.polyloop_s is None:
        return record.status if record.status != "ok" else "unknown"
    ratios = {p: record.ratio(p) for p in PEERS}
    ratios["tvm"] = _tvm_ratio(record)[0]
    fraction = record.fraction(limits)
    unit_is_bw = w.unit == "GB/s"
    ok = w.goal.judge(ratios=ratios, peak=None if unit_is_bw else fraction,
                      triad=fraction if unit_is_bw else None)
    return {True: "met", False: "NOT met", None: "unknown"}[ok]


def table(records: Sequence[Record], limits: Limits | None, *, stat: str = "median") -> str:
    """The Markdown table: one row per workload."""
    head = ["workload", "shape", "polyloop", "rate", "% limit",
            *(_LABELS[p] for p in PEERS), *(f"vs {_LABELS[p]}" for p in PEERS), "goal",
            "verdict"]
    rows = []
    footnote = False
    for r in records:
        rate = "-" if r.rate is None else f"{r.rate:.1f} {r.workload.unit}"
        fraction = r.fraction(limits)
        tvm_ratio, mark = _tvm_ratio(r)
        footnote |= bool(mark)
        polyloop = format_time(r.polyloop_s) if r.polyloop_s is not None else r.status
        rows.append([r.workload.group, r.workload.shape, polyloop, rate,
                     "-" if fraction is None else f"{fraction:.0%}",
                     *(_reference(r, p) for p in PEERS),
                     _ratio(r.ratio("torch")), _ratio(r.ratio("numpy")),
                     _ratio(tvm_ratio) + mark, r.workload.goal.text(), verdict(r, limits)])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "| " + " | ".join(f"{c:<{w}}" for c, w in zip(cells, widths)) + " |"  # noqa: E731
    out = [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(row) for row in rows]
    what = ("medians (best median of the interleaved rounds)" if stat == "median"
            else "least timings (--stat min)")
    notes = ["", f"Times are {what}; 'vs X' is X's time "
             "over polyloop's (> 1: polyloop is faster); '% limit' is the share of the measured "
             "FMA peak (GFLOP/s rows) or triad bandwidth (GB/s rows)."]
    if limits is not None:
        notes.append(f"Machine limits measured in this run: {limits.describe()}.")
    if footnote:
        notes.append("* TVM did not run: ratio against TVM's published figure for this workload (no schedule, 2-core Xeon).")
    return "\n".join(out + notes)


def to_json(records: Sequence[Record], limits: Limits | None) -> str:
    """One JSON list of records (medians, seconds)."""
    items = []
    for r in records:
        item = r.to_json()
        fraction = r.fraction(limits)
        item["fraction_of_limit"] = fraction
        item["goal"] = r.workload.goal.text()
        item["verdict"] = verdict(r, limits)
        items.append(item)
    return json.dumps(items, indent=1)


def plot(records: Sequence[Record], path: str | Path, *, title: str) -> Path:
    """A bar chart of each implementation's speed relative to PyTorch (PyTorch = 1), per
    workload; rows without a PyTorch time are left out."""
    try:
        import matplotlib
        import matplotlib.ticker
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PolyloopError("--plot needs matplotlib: pip install 'polyloop[viz]'") from None
    rows = [r for r in records if r.reference_s.get("torch") is not None]
    if not rows:
        raise PolyloopError("--plot: no workload has both a polyloop and a PyTorch time to "
                            "compare (is PyTorch installed? pip install 'polyloop[bench]')")
    torch_s = [r.reference_s["torch"] for r in rows]
    series = {"polyloop": [r.polyloop_s for r in rows],
              **{_LABELS[p]: [r.reference_s.get(p) for r in rows] for p in ("numpy", "tvm")}}
    fig, ax = plt.subplots(figsize=(12, 5.5))
    width = 0.8 / (len(series) + 1)
    xs = range(len(rows))
    ax.bar([x - 0.4 + width / 2 for x in xs], [1.0] * len(rows), width, label="PyTorch")
    for n, (label, times) in enumerate(series.items(), start=1):
        speed = [t_ref / t if t else float("nan") for t, t_ref in zip(times, torch_s)]
        ax.bar([x - 0.4 + width / 2 + n * width for x in xs], speed, width, label=label)
    ax.set_xticks(list(xs), [f"{r.workload.group} {r.workload.shape}" for r in rows],
                  fontsize=8, rotation=30, ha="right")
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(matplotlib.ticker.FixedLocator([2.0 ** e for e in range(-8, 9)]))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%gx"))
    ax.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.axhline(1.0, color="grey", linewidth=0.6)
    ax.set_ylabel("speed relative to PyTorch (log scale; higher is faster)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
