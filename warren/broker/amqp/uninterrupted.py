"""AMQP commands that a cancellation or a time limit does not cut in half.

aiormq ends a channel whose RPC is cancelled before its answer (it sends ``channel.close``): the channel is
gone, its consumer with it, and a lock held by an exclusive queue on it. A cancellation reaches an RPC from
anywhere: a task stopped (a drain, a refresh, a consumer callback whose channel closed), a time limit around a
step. ``uninterrupted`` runs the command in a task of its own that nothing cancels: its caller's cancellation
waits for it (up to ``grace`` seconds), then is honoured; a time limit around it ends the wait, never the
command, which finishes by itself (its channel is then in a known state: open, or closed by its own close).
A channel's close is one such command (broker/amqp/channels.py); aiormq's own close is made single
(broker/amqp/close_once.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar

__all__ = ["RPC_GRACE", "uninterrupted"]

T = TypeVar("T")

RPC_GRACE = 5.0  # seconds a cancelled caller waits for its command to end (then it goes on by itself)
_RUNNING: set[asyncio.Future[Any]] = set()  # commands whose caller stopped waiting: kept until they end


def _ended(command: asyncio.Future[Any]) -> None:
    _RUNNING.discard(command)
    if not command.cancelled():
        command.exception()  # retrieved: a failure nobody waits for any more is not logged as lost


async def uninterrupted(awaitable: Awaitable[T], grace: float = RPC_GRACE) -> T:
    """``await awaitable`` in a task that the caller's cancellation does not cancel (see the module docstring)."""
    command = asyncio.ensure_future(awaitable)
    _RUNNING.add(command)
    command.add_done_callback(_ended)
    try:
        return await asyncio.shield(command)
    except asyncio.CancelledError:
        if not command.done() and grace > 0:
            with contextlib.suppress(asyncio.CancelledError):  # cancelled again: stop waiting, the command goes on
                await asyncio.wait({command}, timeout=grace)
        raise
