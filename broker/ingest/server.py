"""Running the ingest API until SIGTERM or SIGINT, then stopping gracefully.

On a signal the listening socket closes first, requests in flight get ``grace`` seconds to finish (their
publishes are confirmed or answered 503), and only then is the RabbitMQ connection closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage

from broker.ingest.app import create_app
from broker.ingest.link import BrokerLink
from topology.config import WarrenConfig

__all__ = ["serve"]

log = logging.getLogger("warren.api")


class _NoClientGarbage(logging.Filter):
    """Drop aiohttp's ERROR-with-traceback for malformed HTTP from a client: not our error, and a client
    could fill the log with it. The client still gets aiohttp's 400."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], BadHttpMessage))


_CLIENT_GARBAGE = _NoClientGarbage()


async def serve(
    config: WarrenConfig,
    *,
    host: str | None = None,
    port: int | None = None,
    stop: asyncio.Event | None = None,
    link: BrokerLink | None = None,
    grace: float = 10.0,
    on_listening: Callable[[str, int], None] | None = None,
) -> None:
    """Serve until ``stop`` is set or the process gets SIGTERM/SIGINT."""
    host = host or config.api.host
    port = config.api.port if port is None else port
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    handled = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
            handled.append(sig)
    logging.getLogger("aiohttp.server").addFilter(_CLIENT_GARBAGE)  # the same object: adding twice is a no-op
    runner = web.AppRunner(create_app(config, link), access_log=None, shutdown_timeout=grace)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, backlog=1024)
        await site.start()
        bound = port
        server = site._server
        if isinstance(server, asyncio.Server) and server.sockets:
            bound = server.sockets[0].getsockname()[1]
        log.info("warren api listening on http://%s:%d", host, bound)
        if on_listening is not None:
            on_listening(host, bound)
        await stop.wait()
        log.info("stopping: finishing requests in flight (up to %.0fs)", grace)
    finally:
        await runner.cleanup()
        for sig in handled:
            loop.remove_signal_handler(sig)
