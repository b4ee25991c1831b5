"""The event loop of Warren's long-running commands: uvloop when it is installed, else asyncio's own.

``warren worker``, ``warren api``, ``warren receive`` and ``warren inbox`` spend their time in the event loop
(AMQP frames, HTTP requests and responses), and uvloop runs that loop faster (see bench/README.md). uvloop is a
dependency everywhere but Windows, which it does not support. A missing uvloop is not an error: the command runs
on asyncio's default loop. Either way the command logs the loop it runs on (logger ``warren.loop``) before its
own work starts, read from the running loop itself rather than from what was asked for.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["loop_factory", "loop_name", "run_on_best_loop"]

T = TypeVar("T")

log = logging.getLogger("warren.loop")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or ``None`` (asyncio's default loop) when uvloop cannot be imported."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """``uvloop`` or ``asyncio``: the package the loop's class comes from."""
    return type(loop).__module__.partition(".")[0]


async def _announced(coroutine: Coroutine[Any, Any, T]) -> T:
    name = loop_name(asyncio.get_running_loop())
    log.info("event loop %s", name, extra={"event_loop": name})
    return await coroutine


def run_on_best_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion on uvloop if installed, else on asyncio's loop, as ``asyncio.run`` would.

    ``asyncio.Runner`` because ``asyncio.run`` takes a loop factory only from Python 3.12. Ctrl-C cancels the
    coroutine, and leftover tasks and async generators are finalised, exactly as with ``asyncio.run``.
    """
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(_announced(coroutine))
