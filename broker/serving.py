"""Running a long-lived process part until SIGTERM or SIGINT: the signal wiring and an aiohttp app's lifetime."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Iterator

from aiohttp import web

__all__ = ["serve_app", "stop_on_signals"]


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
) -> None:
    """Serve ``app`` until ``stop`` is set or a signal arrives; requests in hand get ``grace`` seconds to finish.

    ``port`` 0 picks a free port; ``on_listening`` is told the one bound.
    """
    with stop_on_signals(stop):
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=grace)
        await runner.setup()
        try:
            site = web.TCPSite(runner, host, port, backlog=backlog)
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
