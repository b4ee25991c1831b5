"""tests/support/bounded.py: an async test past its limit is cancelled by its own loop, even a busy one."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.support.bounded import LIMIT, backstop, bounded

pytestmark = pytest.mark.timeout(30)


async def test_a_test_that_never_ends_is_cancelled_at_its_limit_and_fails_saying_so() -> None:
    closed = []

    async def never_ends() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            closed.append(True)  # its cleanup ran: cancelled, not abandoned

    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception, match=r"past its time limit of 0\.3 s"):
        await bounded(never_ends, 0.3)()
    assert 0.3 <= time.monotonic() - started < 5
    assert closed == [True]


async def test_a_loop_kept_busy_by_callbacks_still_cancels_the_test() -> None:
    # Given a loop always running a callback (as a consumer busy with held copies keeps it): a signal raised
    # in a callback is dropped by the loop, a cancellation of the test's task is not
    loop = asyncio.get_running_loop()
    spinning = {"on": True}

    def spin() -> None:
        time.sleep(0.001)
        if spinning["on"]:
            loop.call_soon(spin)

    loop.call_soon(spin)
    try:
        with pytest.raises(pytest.fail.Exception, match="was cancelled"):
            await bounded(asyncio.Event().wait, 0.3)()
    finally:
        spinning["on"] = False


async def test_a_timeout_the_test_itself_raises_is_its_own() -> None:
    async def own() -> None:
        async with asyncio.timeout(0.01):
            await asyncio.sleep(1)

    with pytest.raises(TimeoutError):
        await bounded(own, 5)()


async def test_this_test_runs_under_its_own_limit_and_pytest_timeout_under_the_backstop(
    request: pytest.FixtureRequest,
) -> None:
    assert request.node.stash[LIMIT] == 30
    assert request.node.get_closest_marker("timeout").args[0] == backstop(30) == 60
