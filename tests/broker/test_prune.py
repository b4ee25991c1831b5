"""Pruning against the real broker: what it keeps when a queue belongs to another live connection."""

from __future__ import annotations

from typing import Any

import aio_pika
import pytest

from warren.broker.drift import Leftover
from warren.broker.prune import prune

pytestmark = pytest.mark.timeout(30)


async def test_a_queue_exclusive_to_another_connection_is_kept_not_an_error(make_config: Any) -> None:
    # Given a queue in the endpoint namespace held exclusively by another connection (a worker's claim)
    config = make_config()
    holder = await aio_pika.connect(config.broker.url)
    pruner = await aio_pika.connect(config.broker.url)
    name = f"{config.broker.prefix}.ep.gone.p00.owner"
    try:
        channel = await holder.channel()
        await channel.declare_queue(name, exclusive=True, auto_delete=True)
        # When prune is asked to delete it, even with force
        outcomes = await prune(pruner, [Leftover("queue", name, "test")], [], force=True)
        # Then it is kept and said why, and the holder's queue is still there
        assert [(o.action, "exclusive" in o.detail) for o in outcomes] == [("kept", True)]
        assert (await channel.declare_queue(name, passive=True)).name == name
    finally:
        await pruner.close()
        await holder.close()
