"""Running a long-lived process part until SIGTERM or SIGINT: the signal wiring and an aiohttp app's lifetime."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Iterator

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage

from warren.serving.guard import ConnectionGuard, GuardedSite, ServerLimits

__all__ = ["guard_app", "serve_app", "stop_on_signals"]


class _NoClientGarbage(logging.Filter):
    """Drop aiohttp's ERROR-with-traceback for malformed HTTP from a client: not our error, and a client
    could fill the log with it. The client still gets aiohttp's 400."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], BadHttpMessage))


_CLIENT_GARBAGE = _NoClientGarbage()


def guard_app(app: web.Application, limits: ServerLimits) -> ConnectionGuard:
    """A guard for ``app`` (its middleware put first); serve the app's runner with ``GuardedSite``."""
    guard = ConnectionGuard(limits)
    app.middlewares.insert(0, guard.middleware)
    logging.getLogger("aiohttp.server").addFilter(_CLIENT_GARBAGE)  # the same object: adding twice is a no-op
    return guard


@contextlib.contextmanager
def stop_on_signals(stop: asyncio.Event) -> Iterator[None]:
    """Set ``stop`` on SIGTERM or SIGINT while the block runs (where the loop can handle signals at all)."""
    loop = asyncio.get_running_loop()
    handled = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
            handled.append(sig)
    try:
        yield
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)


async def serve_app(
    app: web.Application,
    *,
    name: str,
    host: str,
    port: int,
    stop: asyncio.Event,
    grace: float,
    log: logging.Logger,
    on_listening: Callable[[str, int], None] | None = None,
    backlog: int = 128,
    limits: ServerLimits | None = None,
) -> None:
    """Serve ``app`` until ``stop`` is set or a signal arrives; requests in hand get ``grace`` seconds to finish.

    ``port`` 0 picks a free port; ``on_listening`` is told the one bound. ``limits`` bound how slow a client
    may be and how many may be connected (``connection_guard.py``).
    """
    guard = guard_app(app, limits or ServerLimits())
    with stop_on_signals(stop):
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=grace)
        await runner.setup()
        try:
            site = GuardedSite(runner, guard, host, port, backlog)
            await site.start()
            # Read from the runner rather than from the site's server: under uvloop that is not an asyncio.Server.
            bound = runner.addresses[0][1] if runner.addresses else port
            log.info("%s listening on http://%s:%d", name, host, bound)
            if on_listening is not None:
                on_listening(host, bound)
            await stop.wait()
            log.info("stopping: finishing requests in flight (up to %.0fs)", grace)
        finally:
            await runner.cleanup()
