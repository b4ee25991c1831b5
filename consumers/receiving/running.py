"""Running ``warren receive`` and ``warren inbox`` until SIGTERM or SIGINT, then stopping gracefully."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Iterator

from aiohttp import web

from consumers.receiving.inbox import Inbox
from consumers.receiving.receiver import build_receiver_app
from consumers.receiving.stores import open_store
from topology.config import WarrenConfig

__all__ = ["run_inbox", "serve_receiver"]

log = logging.getLogger("warren.receive")


@contextlib.contextmanager
def _signals(stop: asyncio.Event) -> Iterator[None]:
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


async def serve_receiver(
    config: WarrenConfig,
    *,
    host: str | None = None,
    port: int | None = None,
    stop: asyncio.Event | None = None,
    grace: float = 10.0,
    on_listening: Callable[[str, int], None] | None = None,
) -> None:
    """Serve every inbound source until ``stop`` is set or a signal arrives; requests in hand finish first."""
    host = host or config.receiver.host
    port = config.receiver.port if port is None else port
    stop = stop or asyncio.Event()
    with _signals(stop):
        runner = web.AppRunner(build_receiver_app(config), access_log=None, shutdown_timeout=grace)
        await runner.setup()
        try:
            site = web.TCPSite(runner, host, port)
            await site.start()
            bound = port
            server = site._server
            if isinstance(server, asyncio.Server) and server.sockets:
                bound = server.sockets[0].getsockname()[1]
            log.info("warren receive listening on http://%s:%d", host, bound)
            if on_listening is not None:
                on_listening(host, bound)
            await stop.wait()
            log.info("stopping: finishing requests in flight (up to %.0fs)", grace)
        finally:
            await runner.cleanup()


async def run_inbox(
    config: WarrenConfig,
    *,
    sources: list[str] | None = None,
    stop: asyncio.Event | None = None,
    on_started: Callable[[Inbox], None] | None = None,
) -> None:
    """Consume the inbound queues until ``stop`` is set or a signal arrives."""
    stop = stop or asyncio.Event()
    store = open_store(
        config.inbox.store, postgres_schema=config.inbox.postgres_schema, pool_size=config.inbox.concurrency + 2
    )
    inbox = Inbox(config, store, sources=sources)
    with _signals(stop):
        async with inbox:
            if on_started is not None:
                on_started(inbox)
            await stop.wait()
            log.info("stopping: finishing events in hand")
