"""Lines of a blocking stream (a pipe, a terminal, a file), each handed to the event loop as soon as it is read.

``warren publish --file -`` used to read standard input on the event loop: a line that had arrived waited,
unpublished, until the next one (or the end of the pipe) unblocked the loop. Here a daemon thread does the
blocking reads; the loop only awaits a queue. A semaphore bounds how far the thread reads ahead, so a large
file is not loaded into memory while the publisher waits for confirms. The thread is a daemon: a command that
ends (or fails) while the pipe stays open is not held up by a read that never returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from typing import BinaryIO

__all__ = ["READ_AHEAD", "stream_lines"]

READ_AHEAD = 1000  # lines read but not yet taken by the loop

_END = b""


async def stream_lines(stream: BinaryIO, *, read_ahead: int = READ_AHEAD) -> AsyncIterator[bytes]:
    """Every line of ``stream`` (with its newline), in order, without blocking the running loop."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | BaseException] = asyncio.Queue()
    room = threading.Semaphore(read_ahead)

    def hand_over(item: bytes | BaseException) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: the command is over, nobody reads
            loop.call_soon_threadsafe(queue.put_nowait, item)

    def pump() -> None:
        try:
            while line := stream.readline():
                room.acquire()
                hand_over(line)
        except Exception as exc:  # handed to the reader, who raises it
            hand_over(exc)
        else:
            hand_over(_END)

    threading.Thread(target=pump, name="warren-line-reader", daemon=True).start()
    while True:
        item = await queue.get()
        if isinstance(item, BaseException):
            raise item
        if item == _END:
            return
        room.release()
        yield item
