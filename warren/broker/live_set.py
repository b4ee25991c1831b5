"""The live endpoints as RabbitMQ remembers them: the endpoints stream read to its end, latest record per endpoint.

``warren setup`` plans them beside the file's, so that drift and ``--prune`` never take a live endpoint's
objects for leftovers. Workers follow the same stream themselves (warren/consumers/live_endpoints.py).
"""

from __future__ import annotations

import contextlib
import logging

from aio_pika.abc import AbstractConnection

from warren.broker.amqp.channels import close_channel
from warren.broker.amqp.connection import connect_once
from warren.broker.amqp.probe import all_exist
from warren.broker.amqp.stream_read import read_to_end
from warren.broker.endpoint_records import APPLY, EndpointRecord, decode_record, latest_per_endpoint
from warren.topology import names
from warren.topology.config import Endpoint, WarrenConfig

__all__ = [
    "API_MANAGED",
    "FILE_MANAGED",
    "announced_endpoints",
    "latest_records",
    "managed_by",
    "read_live_endpoints",
    "with_live_endpoints",
]

# How commands mark an endpoint: from the configuration file, or live (created through the admin API or CLI).
FILE_MANAGED = "file"
API_MANAGED = "api"

log = logging.getLogger("warren.live")


async def latest_records(connection: AbstractConnection, prefix: str) -> dict[str, EndpointRecord]:
    """Endpoint name -> its record in force on the endpoints stream (empty without the stream)."""
    stream = names.endpoints_stream(prefix)
    if not await all_exist(connection, queues=[stream]):
        return {}
    channel = await connection.channel(publisher_confirms=True)
    try:
        records = await read_to_end(connection, channel, stream, decode_record)
    finally:
        with contextlib.suppress(Exception):
            await close_channel(channel)
    return latest_per_endpoint(records)


async def announced_endpoints(connection: AbstractConnection, prefix: str) -> dict[str, Endpoint]:
    """Endpoint name -> configuration of every live endpoint applied and not removed (empty without the stream).

    Their secrets are left sealed (setup signs nothing, and needs no store key); a record that does not validate
    is left out, with a warning.
    """
    live: dict[str, Endpoint] = {}
    for name, record in (await latest_records(connection, prefix)).items():
        if record.action != APPLY:
            continue
        try:
            live[name] = record.endpoint_layout()
        except ValueError as exc:
            log.warning("live endpoint %s left out: %s", name, exc)
    return live


async def read_live_endpoints(config: WarrenConfig, timeout: float = 5.0) -> dict[str, Endpoint]:
    """``announced_endpoints`` on a connection of its own (for a command that has none open)."""
    connection = await connect_once(config.broker.urls, name="warren-live-read", timeout=timeout)
    try:
        return await announced_endpoints(connection, config.broker.prefix)
    finally:
        with contextlib.suppress(Exception):
            await connection.close()


def managed_by(file_config: WarrenConfig, name: str) -> str:
    """``file`` for an endpoint of the configuration file, ``api`` for a live one."""
    return FILE_MANAGED if any(e.name == name for e in file_config.endpoints) else API_MANAGED


def with_live_endpoints(config: WarrenConfig, live: dict[str, Endpoint]) -> WarrenConfig:
    """``config`` with the live endpoints added after the file's; the file's own win a name both have."""
    file_names = {e.name for e in config.endpoints}
    extra = tuple(e for name, e in sorted(live.items()) if name not in file_names)
    return config.model_copy(update={"endpoints": config.endpoints + extra}) if extra else config
