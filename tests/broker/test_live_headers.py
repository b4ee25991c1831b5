"""A live endpoint's headers: live apply seals the secret values it announces (as it seals the signing secrets),
a worker with the store's keys opens them and sends every header; ``warren setup``'s plan reads the record
without opening anything."""

from __future__ import annotations

from collections.abc import Callable

import orjson
import pytest
from standardwebhooks import Webhook

from tests.broker.test_live_apply_sealed import stream_bodies
from tests.conftest import TEST_SECRET, TEST_STORE_KEY
from tests.consumers.test_live_endpoints import publish
from tests.support.receiver import Receiver
from tests.support.topology import declare
from warren.broker.endpoint_records import EndpointRecord
from warren.broker.live_apply import apply_endpoint
from warren.consumers.worker import Worker
from warren.store.keys import sealer_from
from warren.topology.config import Endpoint, WarrenConfig

SECRET_VALUE = "Bearer live-h3ader-s3cret"


def live_endpoint(receiver: Receiver, name: str) -> Endpoint:
    return Endpoint.model_validate(
        {
            "name": name,
            "url": f"{receiver.url}/{name}",
            "secret": TEST_SECRET,
            "events": ["#"],
            "tenant": "k",
            "headers": {"X-Team": "billing", "Authorization": {"value": SECRET_VALUE, "secret": True}},
        }
    )


def test_a_record_seals_secret_header_values_and_opens_them_with_the_key() -> None:
    endpoint = Endpoint.model_validate(
        {
            "name": "e",
            "url": "https://hooks.example.com/",
            "secret": TEST_SECRET,
            "events": ["#"],
            "headers": {"X-Team": "billing", "Authorization": {"value": SECRET_VALUE, "secret": True}},
        }
    )
    sealer = sealer_from([TEST_STORE_KEY])
    body = EndpointRecord.applying(endpoint, "test", sealer).to_message().body
    assert SECRET_VALUE.encode() not in body and b"billing" in body
    record = EndpointRecord.from_bytes(body)
    assert record.endpoint_config(sealer) == endpoint
    layout = record.endpoint_layout()  # the plan's reading: nothing opened, the secret value a placeholder
    assert layout.headers.outgoing() == {"X-Team": "billing", "Authorization": "sealed"}


@pytest.mark.timeout(30)
async def test_a_live_endpoints_headers_reach_the_receiver_and_never_the_stream_in_plain_text(
    make_config: Callable[..., WarrenConfig],
) -> None:
    config = make_config([])
    await declare(config)
    async with Receiver() as receiver, Worker(config, name="headers"):
        # When a live endpoint with a secret header is applied and events are published for its tenant
        await apply_endpoint(config, live_endpoint(receiver, "hdr"))
        ids = [f"e{n}" for n in range(5)]
        await publish(config, ids, "k")
        await receiver.wait_for(lambda r: set(ids) <= r.ok_ids(), timeout=10)
    # Then every request carried both headers, and its signature still verifies
    for request in receiver.received:
        assert request.headers["Authorization"] == SECRET_VALUE and request.headers["X-Team"] == "billing"
        Webhook(TEST_SECRET).verify(request.body.decode(), request.headers)
    # And the endpoints stream holds the secret value sealed only
    [body] = await stream_bodies(config)
    assert SECRET_VALUE.encode() not in body
    assert set(orjson.loads(body)["config"]["headers"]["Authorization"]) == {"sealed", "secret"}


@pytest.mark.timeout(30)
async def test_a_live_change_of_headers_reaches_a_running_worker(make_config: Callable[..., WarrenConfig]) -> None:
    config = make_config([])
    await declare(config)
    async with Receiver() as receiver, Worker(config, name="headers-change"):
        first = live_endpoint(receiver, "chg")
        await apply_endpoint(config, first)
        await publish(config, ["a1"], "k")
        await receiver.wait_for(lambda r: "a1" in r.ok_ids(), timeout=10)
        # When only its secret header's value changes
        changed = {"Authorization": {"value": "Bearer rotated", "secret": True}}
        await apply_endpoint(config, Endpoint.model_validate({**first.model_dump(mode="json"), "headers": changed}))
        await publish(config, ["a2"], "k")
        await receiver.wait_for(lambda r: "a2" in r.ok_ids(), timeout=10)
    # Then the next delivery carries the new value, and only the headers given
    by_id = {r.event_id: r.headers for r in receiver.received}
    assert by_id["a1"]["Authorization"] == SECRET_VALUE and by_id["a1"]["X-Team"] == "billing"
    assert by_id["a2"]["Authorization"] == "Bearer rotated" and "X-Team" not in by_id["a2"]
