"""A cancellation is never lost: ``within`` (a time limit on an await) and ``stop_if_cancelled`` (once a round in
long loops), against Python 3.11's ``wait_for``, which drops a cancellation landing as its future completes."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

import pytest

from warren.core.deadlines import stop_if_cancelled, within

pytestmark = pytest.mark.timeout(60)

Wait = Callable[[Awaitable[None]], Awaitable[None]]


async def ended_by_cancel(wait: Wait, *, check: bool = False, tries: int = 50) -> int:
    """How many of ``tries`` loops of short waits end with CancelledError when cancelled mid-run (the rest ran on
    to their end, 2,000 rounds, the cancellation lost)."""
    loop = asyncio.get_running_loop()

    async def rounds() -> None:
        for _ in range(2000):
            future = loop.create_future()
            loop.call_soon(lambda f=future: f.done() or f.set_result(None))
            await wait(future)
            if check:
                stop_if_cancelled()

    cancelled = 0
    for i in range(tries):
        task = asyncio.create_task(rounds())
        for _ in range(i % 7 + 1):
            await asyncio.sleep(0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            cancelled += 1
    return cancelled


async def test_a_loop_of_waits_within_a_limit_always_ends_when_cancelled() -> None:
    assert await ended_by_cancel(lambda f: within(f, 10)) == 50


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="wait_for no longer loses cancellations")
async def test_wait_for_loses_them_and_a_check_each_round_ends_the_loop_anyway() -> None:
    # Given the race this module exists for (measured: every one of the cancellations lost)
    assert await ended_by_cancel(lambda f: asyncio.wait_for(f, 10)) < 50
    # When the loop asks once a round, Then it ends every time
    assert await ended_by_cancel(lambda f: asyncio.wait_for(f, 10), check=True) == 50


async def test_within_still_times_out_and_passes_results_through() -> None:
    assert await within(asyncio.sleep(0, "done"), 1) == "done"
    with pytest.raises(TimeoutError):
        await within(asyncio.sleep(5), 0.05)
    assert await within(asyncio.sleep(0, 3), None) == 3
