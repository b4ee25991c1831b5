"""Running the ingest API until SIGTERM or SIGINT, then stopping gracefully.

On a signal the listening socket closes first, requests in flight get ``grace`` seconds to finish (their
publishes are confirmed or answered 503), and only then is the RabbitMQ connection closed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from warren.api.app import create_app
from warren.api.ingest.link import BrokerLink
from warren.serving.guard import ServerLimits
from warren.serving.server import serve_app
from warren.topology.config import WarrenConfig

__all__ = ["serve"]

log = logging.getLogger("warren.api")


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
    await serve_app(
        create_app(config, link),
        name="warren api",
        host=host,
        port=port,
        stop=stop,
        grace=grace,
        log=log,
        on_listening=on_listening,
        backlog=1024,
        limits=ServerLimits(config.api.header_timeout, config.api.body_timeout, config.api.max_connections),
    )
