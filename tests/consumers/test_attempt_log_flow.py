"""The attempt log end to end: a worker records each attempt of a retried event, the writer inside
``warren api`` stores them, and the admin API lists them in order, on each store (SQLite and PostgreSQL).

Real RabbitMQ, a real receiver on 127.0.0.1 that fails twice, the worker and the API in this process.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.api.admin.conftest import ADMIN_TOKEN
from tests.api.ingest.conftest import TOKEN, ApiServer, start_api
from tests.support.receiver import Receiver, Reply
from tests.support.store import store_postgres, store_url
from warren.broker.events import Event
from warren.consumers.worker import Worker

__all__ = ["start_api", "store_postgres", "store_url"]

pytestmark = pytest.mark.timeout(120)


async def attempts_of(api: ApiServer, event_id: str) -> list[dict[str, Any]]:
    reply = await api.request("GET", f"/v1/events/{event_id}/attempts", token=ADMIN_TOKEN)
    assert reply.status == 200, reply.body
    data: list[dict[str, Any]] = reply.body["data"]
    return data


async def test_a_retried_events_attempts_are_listed_in_order_through_the_api(
    endpoint_config: Any, receiver: Receiver, publish: Any, start_api: Any, store_url: str
) -> None:
    # Given an endpoint of tenant acme that answers 503, then 500, then 200; a worker (the attempt log is on
    # by default with a store) and `warren api` with that store (its writer stores the records)
    answers = iter([503, 500])
    receiver.behaviour = lambda r, request, body: Reply(next(answers, 200))
    config = await endpoint_config(
        [{"name": "shop", "tenant": "acme"}],
        retry={"base": "10ms", "cap": "20ms"},
        worker={"attempt_log_interval": "50ms"},
        store={"url": store_url},
        api={"tokens": [TOKEN], "admin_tokens": [ADMIN_TOKEN]},
    )
    assert config.attempt_log
    api = await start_api(config)
    async with Worker(config):
        # When an event is published and delivered at its third attempt
        event = Event(type="order.paid", data={"n": 1}, tenant="acme")
        await publish(config, [event])
        await receiver.wait_for(lambda r: event.id in r.ok_ids(), 15)
        # Then the API lists its three attempts, in order, with what each one did
        await wait_until_listed(api, event.id, 3)
    listed = await attempts_of(api, event.id)
    assert [a["attempt"] for a in listed] == [1, 2, 3]
    assert [a["outcome"] for a in listed] == ["retry", "retry", "delivered"]
    assert [a["status"] for a in listed] == [503, 500, 200]
    assert [a["failed"] for a in listed] == [True, True, False]
    assert {(a["endpoint"], a["tenant"]) for a in listed} == {("shop", "acme")}
    assert listed[0]["next_delay_s"] is not None and listed[2]["next_delay_s"] is None
    assert [a["at"] for a in listed] == sorted(a["at"] for a in listed)
    # And the endpoint's failed attempts are the first two, newest first
    failed = await api.request("GET", "/v1/endpoints/shop/attempts?status=failed", token=ADMIN_TOKEN)
    assert failed.status == 200, failed.body
    assert [a["attempt"] for a in failed.body["data"]] == [2, 1]


async def wait_until_listed(api: ApiServer, event_id: str, count: int, timeout: float = 20) -> None:
    """Until the API lists ``count`` attempts of the event (the writer stores batches as they come)."""
    deadline = time.monotonic() + timeout
    while len(await attempts_of(api, event_id)) < count:
        assert time.monotonic() < deadline, f"{count} attempts not listed within {timeout}s"
        await asyncio.sleep(0.1)
