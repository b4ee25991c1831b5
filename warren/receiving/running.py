"""Running ``warren receive`` and ``warren inbox`` until SIGTERM or SIGINT, then stopping gracefully."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from warren.receiving.inbox import Inbox
from warren.receiving.receiver import build_receiver_app
from warren.receiving.stores import open_store
from warren.serving.guard import ServerLimits
from warren.serving.server import serve_app, stop_on_signals
from warren.topology.config import WarrenConfig

__all__ = ["run_inbox", "serve_receiver"]

log = logging.getLogger("warren.receive")


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
    await serve_app(
        build_receiver_app(config),
        name="warren receive",
        host=host,
        port=port,
        stop=stop,
        grace=grace,
        log=log,
        on_listening=on_listening,
        limits=ServerLimits(
            config.receiver.header_timeout, config.receiver.body_timeout, config.receiver.max_connections
        ),
    )


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
    with stop_on_signals(stop):
        async with inbox:
            if on_started is not None:
                on_started(inbox)
            await stop.wait()
            log.info("stopping: finishing events in hand")
