"""A channel is closed with one ``channel.close``, however its close is interrupted.

aiormq (7.2.4, the newest) closes a channel with an RPC; a cancelled or timed-out RPC makes it send
``channel.close`` (504) to end the channel. When the RPC cut short is that close itself, a second
``channel.close`` follows the first. RabbitMQ answers the first, forgets the channel, then reads the second as
a method on a channel that was never opened and closes the whole connection: ``504 CHANNEL_ERROR - expected
'channel.open'``. Any cancellation of a close did it (a task stopped during its ``finally``, a close under a time
limit): of 60 closes each cut after 0 to 11 turns of the loop, the 10th, 12th and 34th closed the connection in
three runs (tests/broker/test_close_once.py). During an ordered endpoint's move a worker lost its connection
with this error (issue 34).

``close_once`` replaces aiormq's channel close: the ``channel.close`` frame is put on the connection's write
queue once, and whatever interrupts the wait for ``close-ok`` after that only stops the waiting (the reader
completes the close when ``close-ok`` comes). Installed by ``connect`` and ``connect_once``
(broker/amqp/connection.py) with the close-ok answer (close_ok.py); installing is idempotent.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiormq.abc import ChannelFrame
from aiormq.channel import Channel, task
from pamqp import commands as spec

from warren.broker.amqp.close_ok import source_of

__all__ = ["ORIGINAL_CLOSE", "close_once"]

ORIGINAL_CLOSE = Channel.__dict__["_on_close"]  # aiormq's, as released (tests/broker/test_close_once.py)


async def _close(self: Any, exc: Any = None) -> None:
    """aiormq's ``Channel._on_close`` with its close frame sent once and never followed by another."""
    if not self.connection.is_opened or self._Channel__close_event.is_set():
        return
    frame = ChannelFrame.marshall(
        channel_number=self.number,
        frames=[
            spec.Channel.Close(
                reply_code=self._Channel__close_reply_code,
                class_id=self._Channel__close_class_id,
                method_id=self._Channel__close_method_id,
            )
        ],
    )
    async with asyncio.timeout(self.connection.connection_tune.heartbeat or None):  # as aiormq bounds its RPC
        async with self.lock:  # as an RPC: after the one in flight, whose reply is on its way
            if self._Channel__close_event.is_set():
                return
            # Shielded: once asked for, the frame goes even if this wait is cut (the channel then closes when
            # close-ok comes, or with the connection).
            await asyncio.shield(self.write_queue.put(frame))
        await self._Channel__close_event.wait()


_close_task = task(_close)


def close_once() -> bool:
    """Replace aiormq's channel close, once; True when it is (or was) replaced.

    Only an aiormq whose close is still the RPC described above is patched (its source names the RPC and the
    attributes used here): a release that changed it is left as it is.
    """
    if Channel._on_close is not _close_task:
        if not _still_the_rpc():
            return False
        Channel._on_close = _close_task  # type: ignore[method-assign]
    return True


def _still_the_rpc() -> bool:
    original = source_of(ORIGINAL_CLOSE)
    names = Channel.__init__.__code__.co_names
    expected = ("_Channel__close_event", "_Channel__close_reply_code", "_Channel__close_class_id")
    return "self.rpc(" in original and "spec.Channel.Close(" in original and all(n in names for n in expected)
