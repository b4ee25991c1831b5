"""Human durations: ``"250ms"``, ``"2s"``, ``"1m30s"``, ``"1h"``, ``"3d"``.

A bare number is seconds. Durations are kept as float seconds everywhere inside Warren. Digits are ASCII
(``\\d`` would take other scripts' digits, which ``float`` reads), and a duration is finite: ``"9" * 400 + "s"``
is infinity to ``float``, which the delay chain, ``round`` and ``datetime`` then refuse with OverflowError.
"""

from __future__ import annotations

import math
import re

__all__ = ["format_duration", "parse_duration"]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)")


def parse_duration(value: object) -> float:
    """Turn a human duration (or a number of seconds) into float seconds; raise ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError("a duration is a string such as '250ms', '2s', '1h' or a number of seconds")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        try:
            seconds = float(value)
        except OverflowError:  # an integer beyond any float
            seconds = math.inf
        return _finite(seconds, value)
    if not isinstance(value, str):
        raise ValueError("a duration is a string such as '250ms', '2s', '1h' or a number of seconds")
    text = value.strip().lower().replace(" ", "")
    if not text:
        raise ValueError("empty duration")
    position, total = 0, 0.0
    for match in _PART.finditer(text):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if position != len(text):
        raise ValueError(f"{value!r} is not a duration (use forms like '250ms', '2s', '5m', '1h', '3d')")
    return _finite(total, value)


def _finite(seconds: float, value: object) -> float:
    if not math.isfinite(seconds):
        shown = repr(value)
        raise ValueError(f"{shown if len(shown) <= 40 else shown[:37] + '...'} is not a finite duration")
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest readable form of a duration, for tables and logs (inverse of parse_duration)."""
    if seconds < 1 and seconds != 0:
        return f"{round(seconds * 1000)}ms"
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
