"""Moments as epoch seconds: the range a ``datetime`` holds, and the one way Warren writes them. Pure.

A time read from outside (an AMQP header, a record, a query, ``--since 999999999d``) may be any number, and
``datetime.fromtimestamp`` raises ValueError, OverflowError or OSError beyond years 1 to 9999: such a moment is
refused where it is read (``within_range``) or written as unknown (``iso_utc`` gives None), never a traceback.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

__all__ = ["EARLIEST", "LATEST", "iso_utc", "within_range"]

EARLIEST = datetime(1, 1, 1, tzinfo=UTC).timestamp()
LATEST = datetime(9999, 12, 31, tzinfo=UTC).timestamp()  # the last day's start: its end rounds into year 10000


def within_range(seconds: float) -> bool:
    """Whether ``seconds`` since the epoch is a moment a ``datetime`` holds (false for inf and nan too)."""
    return math.isfinite(seconds) and EARLIEST <= seconds <= LATEST


def iso_utc(seconds: float | None) -> str | None:
    """Epoch seconds as ISO 8601 UTC with milliseconds (``2024-05-01T12:00:00.123Z``); None for None and for a
    moment outside years 1 to 9999."""
    if seconds is None or not within_range(seconds):
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
