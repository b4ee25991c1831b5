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


async def test_each_attempt_keeps_the_start_of_the_answer_and_its_headers(
    endpoint_config: Any, receiver: Receiver, publish: Any, start_api: Any, store_url: str
) -> None:
    # Given an endpoint that answers 503 with a Retry-After and a body holding a NUL and invalid UTF-8, then 400
    # with a JSON body longer than the 24 bytes of response_body_limit; and one that never answers in time
    answers = iter(
        [
            Reply(503, headers={"Retry-After": "0", "Content-Type": "text/plain"}, body=b"busy\x00\xff now"),
            Reply(400, headers={"Content-Type": "application/json"}, body=b'{"error": "amount must be positive"}'),
        ]
    )
    receiver.behaviour = lambda r, request, body: (
        Reply(200, delay=5) if request.path.endswith("/slow") else next(answers)
    )
    config = await endpoint_config(
        [{"name": "shop", "tenant": "acme"}, {"name": "slow", "tenant": "acme", "timeout": "200ms"}],
        retry={"base": "10ms", "cap": "20ms", "max_attempts": 2},
        delivery={"response_body_limit": 24},
        worker={"attempt_log_interval": "50ms"},
        store={"url": store_url},
        api={"tokens": [TOKEN], "admin_tokens": [ADMIN_TOKEN]},
    )
    api = await start_api(config)
    async with Worker(config):
        # When an event is attempted twice at each endpoint
        event = Event(type="order.paid", data={"n": 1}, tenant="acme")
        await publish(config, [event])
        await wait_until_listed(api, event.id, 4)
    listed = await attempts_of(api, event.id)
    shop = [a for a in listed if a["endpoint"] == "shop"]
    slow = [a for a in listed if a["endpoint"] == "slow"]
    # Then each answered attempt keeps the start of its body as text and the headers that matter
    assert [a["status"] for a in shop] == [503, 400]
    assert shop[0]["response"] == "busy\ufffd\ufffd now"  # the NUL made storable, the invalid byte replaced
    assert shop[0]["response_headers"] == {"content-type": "text/plain", "retry-after": "0"}
    assert shop[1]["response"] == '{"error": "amount must b'  # 24 bytes: response_body_limit
    assert shop[1]["response_headers"] == {"content-type": "application/json"}
    # And an attempt that got no answer keeps none, only its error
    assert [(a["response"], a["response_headers"]) for a in slow] == [(None, None)] * 2
    assert all(a["error"].startswith("timed out") for a in slow)
