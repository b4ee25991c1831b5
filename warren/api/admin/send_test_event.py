"""Sending one signed test event to an endpoint now, as a worker would, and saying what came of it.

The admin API's ``POST /v1/endpoints/{name}/test`` and ``warren endpoint test``. It goes through the same transport
the worker delivers with (``warren.transport``), behind the same private-address guard, but never through
RabbitMQ: nothing is queued, retried or dead-lettered, and the answer is the attempt's outcome.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import aiohttp

from warren.broker.events import Event, envelope_bytes
from warren.topology.config import DeliverySettings, Endpoint
from warren.transport.base import Delivery, Outcome, SendResult
from warren.transport.http import HttpTransport

__all__ = ["TestResult", "TestSender", "delivered"]

TEST_MESSAGE = {"message": "a test event from Warren"}


@dataclass(frozen=True)
class TestResult:
    event_id: str
    result: SendResult


def delivered(result: SendResult) -> bool:
    return result.outcome is Outcome.DELIVERED


class TestSender:
    """Sends test events with one HTTP session, opened on first use and closed by ``close()``."""

    def __init__(self, settings: DeliverySettings) -> None:
        self.settings = settings
        self._session: aiohttp.ClientSession | None = None
        self._transport: HttpTransport | None = None

    async def send(self, endpoint: Endpoint, event_type: str = "warren.test", data: Any = None) -> TestResult:
        """Raises EventError (409 at the API) for data nested deeper than orjson writes."""
        event = Event(type=event_type, data=TEST_MESSAGE if data is None else data)
        body = envelope_bytes(event)
        if self._transport is None:
            self._session, self._transport = HttpTransport.for_settings(self.settings)
        transport = self._transport
        delivery = Delivery(event.id, event.type, body, 0, int(time.time() * 1000), None, ())
        return TestResult(event.id, await transport.send(endpoint, delivery))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = self._transport = None
