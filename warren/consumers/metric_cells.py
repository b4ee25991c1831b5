"""The worker's per-attempt metric updates, without ``prometheus_client``'s per-call overhead.

An attempt updates five labelled children (a counter, three histograms, a gauge) and its settlement one or more
counters. Through the library's public methods each update checks that the metric is observable and a histogram
walks its bounds in Python, about 7 µs of CPU a delivery. Here each child's value cells are read once (the same
locked ``inc``/``set`` the library's own methods end in) and a histogram's bucket is found by bisection: the
exposition is the same, sample for sample (tests/consumers/test_metric_cells.py holds it so). Should another
version of the library not have those fields, the public methods are used as they are.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from typing import Any

__all__ = ["HistogramCells", "adder", "setter"]


def adder(child: Any) -> Callable[[float], None]:
    """``child.inc`` of a counter child, as its value cell's ``inc`` (what ``Counter.inc`` calls after its checks)."""
    inc = getattr(getattr(child, "_value", None), "inc", None)
    return inc if callable(inc) else child.inc  # type: ignore[no-any-return]


def setter(child: Any) -> Callable[[float], None]:
    """``child.set`` of a gauge child, as its value cell's ``set``."""
    set_ = getattr(getattr(child, "_value", None), "set", None)
    return set_ if callable(set_) else child.set  # type: ignore[no-any-return]


class HistogramCells:
    """``observe`` of a histogram child: the sum's cell, and the bucket's that ``prometheus_client`` would pick
    (the first whose bound is at or above the value: ``bisect_left`` over the bounds)."""

    def __init__(self, child: Any) -> None:
        self.child = child
        bounds, buckets, total = (getattr(child, name, None) for name in ("_upper_bounds", "_buckets", "_sum"))
        usable = isinstance(bounds, list) and isinstance(buckets, list) and len(bounds) == len(buckets) > 0
        usable = usable and all(callable(getattr(b, "inc", None)) for b in buckets)  # type: ignore[union-attr]
        self._bounds: list[float] = bounds if usable else []  # type: ignore[assignment]
        # Each bucket's inc, bound once; the last bound is +Inf, so every value but NaN has a bucket.
        self._incs: list[Callable[[float], None]] = [b.inc for b in buckets] if usable else []  # type: ignore[union-attr]
        usable = usable and self._bounds[-1] == float("inf")
        self._sum = total.inc if usable and callable(getattr(total, "inc", None)) else None  # type: ignore[union-attr]

    def observe(self, value: float) -> None:
        if self._sum is None or value != value:  # no cells, or NaN (which the library puts in no bucket)
            self.child.observe(value)
            return
        self._sum(value)
        self._incs[bisect_left(self._bounds, value)](1)
