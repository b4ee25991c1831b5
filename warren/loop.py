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
import signal
import sys
import threading
from collections.abc import Callable, Coroutine
from types import FrameType
from typing import Any, TypeVar

from warren.core.deadlines import within

__all__ = ["INTERRUPT_GRACE", "loop_factory", "loop_name", "run_interruptible", "run_on_best_loop"]

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


# How long leftover tasks get to finish once the command's coroutine has returned. A task that swallows its
# cancellation (aio-pika's reconnect loop does, while a broker does not answer) would otherwise hold the
# process forever after the command said it stopped: past this bound it is abandoned with the loop.
CLEANUP_SECONDS = 1.0


def run_on_best_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion on uvloop if installed, else on asyncio's loop, as ``asyncio.run`` would.

    Unlike ``asyncio.run`` the clean-up is bounded: leftover tasks are cancelled and given
    :data:`CLEANUP_SECONDS` to finish, then abandoned with a warning, so that a process always exits once its
    command has returned. The commands that use it install their own SIGTERM and SIGINT handlers.
    """
    factory = loop_factory() or asyncio.new_event_loop
    loop = factory()
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(_announced(coroutine))
    finally:
        _close_down(loop)


# How long a one-shot command gets to end after Ctrl-C before it is abandoned (as a second Ctrl-C would).
INTERRUPT_GRACE = 10.0


def run_interruptible(coroutine: Coroutine[Any, Any, T], *, grace: float = INTERRUPT_GRACE) -> T:
    """Run a one-shot command's coroutine on asyncio's loop as ``asyncio.run`` does, with Ctrl-C bounded.

    The first SIGINT cancels the command, which then ends as it would (a replay finishes the message in hand) and
    KeyboardInterrupt is raised. ``asyncio.run`` waits without bound for that and for the tasks left behind, and a
    library that loses the cancellation (aiormq closing a channel the broker does not answer: seen holding a
    ``warren status --watch`` past 15 s) held the process. Here the command gets ``grace`` seconds after the
    signal, leftover tasks :data:`CLEANUP_SECONDS`; past that they are abandoned with the loop, as a second Ctrl-C
    abandons them at once. The connections go with the process: RabbitMQ takes back what they held unacked.
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    main = loop.create_task(coroutine)
    interrupts = 0

    def give_up() -> None:
        print(f"warren: the command did not stop within {grace:g}s of Ctrl-C; abandoned", file=sys.stderr)
        raise KeyboardInterrupt

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        nonlocal interrupts
        interrupts += 1
        if interrupts > 1 or main.done():
            raise KeyboardInterrupt
        loop.call_soon_threadsafe(main.cancel)
        loop.call_soon_threadsafe(loop.call_later, grace, give_up)

    previous = None
    if threading.current_thread() is threading.main_thread() and (
        signal.getsignal(signal.SIGINT) is signal.default_int_handler
    ):
        previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        try:
            return loop.run_until_complete(main)
        except asyncio.CancelledError:
            if interrupts:
                raise KeyboardInterrupt from None
            raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        _close_down(loop)


def _close_down(loop: asyncio.AbstractEventLoop) -> None:
    """Leftover tasks cancelled, async generators finalised, each within its bound; then the loop closed."""
    try:
        _cancel_leftovers(loop)
        loop.run_until_complete(_bounded(loop.shutdown_asyncgens()))
    finally:
        asyncio.set_event_loop(None)
        loop.close()


async def _bounded(awaitable: Coroutine[Any, Any, None]) -> None:
    try:
        await within(awaitable, CLEANUP_SECONDS)
    except TimeoutError:
        log.warning("async generators not finalised within %gs: abandoned", CLEANUP_SECONDS)


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    tasks = asyncio.all_tasks(loop)
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    done, pending = loop.run_until_complete(asyncio.wait(tasks, timeout=CLEANUP_SECONDS))
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            log.debug("a leftover task ended with %r", task.exception())
    if pending:
        log.warning("%d task(s) did not finish within %gs of shutdown: abandoned", len(pending), CLEANUP_SECONDS)
