"""serve(): a request in flight when the stop comes is still answered (after RabbitMQ confirmed it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from tests.api.ingest.conftest import TOKEN
from tests.support.topology import declare
from warren.api.ingest.link import BrokerLink
from warren.api.server import serve
from warren.core.errors import BrokerUnavailable
from warren.topology.config import WarrenConfig


async def test_stop_lets_a_request_in_flight_finish(api_config: Callable[..., WarrenConfig], monkeypatch: Any) -> None:
    # Given a running server whose publishes take 300 ms to reach RabbitMQ
    config = api_config()
    await declare(config)
    link = BrokerLink(config.broker)
    stop = asyncio.Event()
    bound: list[int] = []
    server = asyncio.create_task(
        serve(
            config, host="127.0.0.1", port=0, stop=stop, link=link, grace=5.0, on_listening=lambda _, p: bound.append(p)
        )
    )
    await asyncio.wait_for(link.connected.wait(), 10)
    publisher = link.publisher()
    real_publish = publisher.publish
    publishing = asyncio.Event()

    async def slow_publish(event: Any, **options: Any) -> str:
        publishing.set()
        await asyncio.sleep(0.3)
        return await real_publish(event, **options)

    monkeypatch.setattr(publisher, "publish", slow_publish)
    async with aiohttp.ClientSession() as session:
        request = asyncio.create_task(
            session.post(
                f"http://127.0.0.1:{bound[0]}/v1/events",
                json={"type": "order.created", "data": 1},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
        )
        # When the stop comes while the publish is in flight
        await asyncio.wait_for(publishing.wait(), 5)
        stop.set()
        response = await asyncio.wait_for(request, 5)
        # Then the request is still answered 202, and the server then returns
        assert response.status == 202
        response.release()
    await asyncio.wait_for(server, 10)
    # And the link to RabbitMQ was closed after the request, not before
    with pytest.raises(BrokerUnavailable):
        link.publisher()
