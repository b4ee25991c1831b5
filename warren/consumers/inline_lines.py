"""Lines of events waiting for a lane endpoint's inline slot (warren/consumers/lane_inline.py): one per endpoint,
in arrival order, each wait bounded by the caller; woken one at a time as slots free, or all at once."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

__all__ = ["WaitingLines"]


class WaitingLines:
    """``await wait(name, seconds)`` until ``wake(name)`` (the first in line) or ``wake_all(name)``, or ``seconds``."""

    def __init__(self) -> None:
        self._lines: dict[str, deque[asyncio.Future[None]]] = {}
        self.count = 0  # events waiting, every endpoint's

    def waiting(self, name: str) -> int:
        line = self._lines.get(name)
        return len(line) if line else 0

    async def wait(self, name: str, seconds: float, first: bool = False) -> None:
        """Wait in ``name``'s line (at its head if ``first``: woken once already) until woken or ``seconds``."""
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        line = self._lines.setdefault(name, deque())
        if first:
            line.appendleft(woken)
        else:
            line.append(woken)
        self.count += 1
        timer = loop.call_later(seconds, _resolve, woken)
        try:
            await woken
        except asyncio.CancelledError:
            if woken.done() and not woken.cancelled():
                self.wake(name)  # woken, then cancelled (the worker stopping): the wake goes on to the next
            raise
        finally:
            timer.cancel()
            self.count -= 1
            with contextlib.suppress(ValueError):
                line.remove(woken)
            if not line and self._lines.get(name) is line:
                del self._lines[name]

    def wake(self, name: str) -> None:
        """Wake the first in ``name``'s line not woken yet, if any."""
        for woken in self._lines.get(name, ()):
            if not woken.done():
                woken.set_result(None)
                return

    def wake_all(self, name: str) -> None:
        for woken in self._lines.get(name, ()):
            _resolve(woken)


def _resolve(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)
