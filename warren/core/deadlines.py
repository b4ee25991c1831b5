"""Awaiting with a time limit without losing a cancellation.

Python 3.11's ``asyncio.wait_for`` drops a cancellation that lands as the awaited future completes: the caller
gets the result and carries on as if it had never been cancelled. A loop of short waits (a replay awaiting
thousands of confirms) then ignores Ctrl-C or a shutdown: measured, 300 cancellations of 300 landing that way
were lost. ``asyncio.timeout`` has no such race; ``within`` is ``wait_for``'s call shape on top of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["stop_if_cancelled", "within"]

T = TypeVar("T")


async def within(awaitable: Awaitable[T], seconds: float | None) -> T:
    """``await awaitable``, raising TimeoutError after ``seconds`` (None: no limit); a cancellation always wins."""
    async with asyncio.timeout(seconds):
        return await awaitable


def stop_if_cancelled() -> None:
    """Raise CancelledError when this task was asked to stop and the CancelledError was lost on the way (by a
    library's ``wait_for``): long loops call it once a round, so Ctrl-C always ends them."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
