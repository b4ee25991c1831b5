"""Closing a client's connection from RabbitMQ's side (the management API), as a broker or an operator does."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

from warren.broker.management import ManagementClient

__all__ = ["close_named"]


async def close_named(management: ManagementClient, name: str, timeout: float = 20.0) -> None:
    """Close every connection whose client named itself ``name``, once the management API lists one."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        connections = await management.request("GET", f"vhosts/{quote(management.vhost, safe='')}/connections") or []
        mine = [c["name"] for c in connections if (c.get("client_properties") or {}).get("connection_name") == name]
        if mine:
            for connection in mine:
                await management.request("DELETE", f"connections/{quote(connection, safe='')}", allow_404=True)
            return
        assert asyncio.get_running_loop().time() < deadline, f"no connection named {name} was ever listed"
        await asyncio.sleep(0.2)
