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

__all__ = ["HistogramCells", "Tallies", "adder", "setter"]


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


class Tallies:
    """Value cells moved as plain numbers, written to the cells just before the registry is read (``fold``).

    ``values`` holds one number a cell: ``count`` and ``histogram`` give its index, and the worker moves it in
    place (``values[i] += 1``: no call, no lock), where each ``inc`` of a cell is a call that takes its lock. Each
    number is the cell's whole value, moved by the same additions in the same order as the cell's own ``inc``
    would be, so what ``fold`` writes (the cell's ``set``) is bit for bit what the cells would hold. Only the
    worker moves these cells, on its event loop, where ``/metrics`` is served too (folded there first).
    """

    def __init__(self) -> None:
        self.values: list[float] = []
        self._cells: list[Any] = []
        self._written: list[float] = []

    @staticmethod
    def usable(counter: Any, histogram: Any) -> bool:
        """Whether these children (unlabelled, of a throwaway registry) have the cells this reads and writes."""
        cells = [getattr(counter, "_value", None), getattr(histogram, "_sum", None)]
        bounds, buckets = getattr(histogram, "_upper_bounds", None), getattr(histogram, "_buckets", None)
        if not (isinstance(bounds, list) and isinstance(buckets, list) and len(bounds) == len(buckets) > 0):
            return False
        return bounds[-1] == float("inf") and all(
            callable(getattr(cell, "get", None)) and callable(getattr(cell, "set", None)) for cell in cells + buckets
        )

    def _slot(self, cell: Any) -> int:
        value = cell.get()
        self.values.append(value)
        self._cells.append(cell)
        self._written.append(value)
        return len(self.values) - 1

    def count(self, child: Any) -> int:
        """The index of a counter's or a gauge's value."""
        return self._slot(child._value)

    def histogram(self, child: Any) -> tuple[int, int, list[float]]:
        """A histogram's: the index of its sum, of its first bucket (the others follow), and its bounds. A value's
        bucket is the first whose bound is at or above it (``bisect_left``); a NaN goes in none (its sum only)."""
        total = self._slot(child._sum)
        first = len(self.values)
        for bucket in child._buckets:
            self._slot(bucket)
        return total, first, child._upper_bounds

    def observe(self, histogram: tuple[int, int, list[float]], value: float) -> None:
        """Move ``histogram``'s numbers (``histogram``'s answer) as its ``observe(value)`` would its cells."""
        total, first, bounds = histogram
        values = self.values
        values[total] += value
        if value == value:  # a NaN goes in no bucket, as the library does
            values[first + bisect_left(bounds, value)] += 1

    def fold(self) -> None:
        """Write every number that moved to its cell."""
        values, written = self.values, self._written
        for i, cell in enumerate(self._cells):
            value = values[i]
            if value != written[i]:
                cell.set(value)
                written[i] = value
