"""Every async test's time limit, kept by its own event loop: the test is cancelled at its limit, wherever it is.

pytest-timeout's signal method raises its failure in whatever frame runs when the alarm comes. In an asyncio
test that is usually one of the loop's callbacks (a consumer's delivery, a receiver's handler), whose exception
the loop logs and drops: the test goes on past its limit, and a test that never ends holds its whole CI leg (one
did, on a loaded run, with an ordered lane's held copies keeping the loop busy). Here the test's coroutine runs
under ``asyncio.timeout`` at its limit, so it is cancelled (its ``async with`` blocks closed, its workers
stopped) and fails saying so; pytest-timeout stays, with its thread method and a later limit (``BACKSTOP``), for
a loop that is blocked outright or a cleanup that never ends: it ends the process, which pytest-xdist reports as
the test's failure.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

LIMIT = pytest.StashKey[float]()


def backstop(limit: float) -> float:
    """pytest-timeout's limit for an async test whose loop keeps ``limit``: time for its cleanup and report."""
    return limit + max(30.0, limit / 4)


def limit_of(item: pytest.Item) -> float | None:
    """The test's pytest-timeout limit in seconds (its closest ``timeout`` mark, else the ini's), or None."""
    marker = item.get_closest_marker("timeout")
    value = marker.args[0] if marker is not None and marker.args else item.config.getini("timeout")
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if seconds > 0 else None


def bounded(test: Callable[..., Coroutine[Any, Any, Any]], seconds: float) -> Callable[..., Coroutine[Any, Any, Any]]:
    """``test``, cancelled and failed once it has run ``seconds``."""

    @functools.wraps(test)
    async def run(*args: Any, **kwargs: Any) -> Any:
        scope = asyncio.timeout(seconds)
        try:
            async with scope:
                return await test(*args, **kwargs)
        except TimeoutError:
            if scope.expired():
                pytest.fail(f"the test ran past its time limit of {seconds:g} s and was cancelled")
            raise

    return run


def is_async_test(item: pytest.Item) -> bool:
    """An async test function (not a Hypothesis one, whose loop runs per example)."""
    test = getattr(item, "obj", None)
    return test is not None and inspect.iscoroutinefunction(test) and not hasattr(test, "hypothesis")


def arm(item: pytest.Item) -> None:
    """At collection: the loop keeps the test's limit; pytest-timeout's moves to the backstop."""
    limit = limit_of(item)
    if limit is None or not is_async_test(item):
        return
    item.stash[LIMIT] = limit
    item.add_marker(pytest.mark.timeout(backstop(limit)), append=False)
