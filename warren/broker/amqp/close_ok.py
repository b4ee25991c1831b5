"""Every ``channel.close`` RabbitMQ sends is answered with ``close-ok``, however busy the connection.

aiormq (7.2.4, the newest) answers a broker's ``channel.close`` by putting ``close-ok`` on the connection's
write queue with ``put_nowait`` and drops it silently when the queue is full (it holds 10 frames). RabbitMQ then
keeps that channel in state ``closing`` until the connection ends. A passive declare that finds nothing is such
a close, and a connection busy with other frames is when the queue is full: after a burst of eight endpoint
creations through the admin API, its long-lived connection held ten channels ``closing`` for good (RabbitMQ
3.10 and 4.0, on a loaded machine). ``answer_every_channel_close`` makes the answer wait for room instead.
Installed by ``connect`` and ``connect_once`` (broker/amqp/connection.py) before they open a connection, which
every connection Warren makes goes through; installing is idempotent, and importing this module changes nothing.
"""

from __future__ import annotations

import inspect
from typing import Any

from aiormq.abc import ChannelFrame
from aiormq.channel import Channel, exception_by_code
from pamqp import commands as spec

__all__ = ["answer_every_channel_close", "source_of"]


def source_of(function: Any) -> str:
    """The source of an aiormq function a patch replaces ("" when it cannot be read): checked before patching."""
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""


async def _on_close_frame(self: Any, frame: spec.Channel.Close) -> None:
    """aiormq's ``Channel._on_close_frame``, with the ``close-ok`` waiting for room in the write queue."""
    exc: BaseException = exception_by_code(frame)
    self._close_exception = exc
    await self.write_queue.put(ChannelFrame.marshall(channel_number=self.number, frames=[spec.Channel.CloseOk()]))
    self._Channel__close_event.set()
    raise exc


def answer_every_channel_close() -> bool:
    """Replace aiormq's handler, once; True when it is (or was) replaced.

    Only an aiormq whose handler still drops the answer (``put_nowait``) and whose channel keeps the close event
    where this one sets it is patched: a release that changed either is left as it is.
    """
    if Channel._on_close_frame is _on_close_frame:
        return True
    original = source_of(Channel._on_close_frame)
    if "put_nowait" not in original or "_Channel__close_event" not in Channel.__init__.__code__.co_names:
        return False
    Channel._on_close_frame = _on_close_frame  # type: ignore[method-assign]
    return True
