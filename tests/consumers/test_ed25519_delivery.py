"""Ed25519 (``v1a``) signatures end to end: real RabbitMQ, the Worker in this process, and a receiver on 127.0.0.1
that verifies each request with the endpoint's public key through PyNaCl (libsodium), not Warren's code, and
answers 401 when it does not verify (so a bad signature would show as a failed delivery, not pass unseen)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from aiohttp import web
from standardwebhooks import Webhook

from tests.conftest import TEST_SECRET
from tests.support.ed25519 import public_bytes, v1a_verified, versions
from tests.support.receiver import Receiver, Reply
from tests.support.topology import declare
from warren.broker.events import Event
from warren.consumers.worker import Worker
from warren.receiving.signatures import verify_standard_webhook
from warren.topology.signing_keys import PublicKey, new_ed25519_secret

pytestmark = pytest.mark.timeout(120)


def verifying_receiver(public: bytes) -> Receiver:
    def reply(_: Receiver, request: web.Request, body: bytes) -> Reply:
        ok = v1a_verified(public, dict(request.headers), body)
        return Reply(200 if ok else 401)

    return Receiver(reply)


async def delivered_all(make_config, publish, receiver: Receiver, endpoints: list[dict[str, Any]], count: int) -> None:
    """Each endpoint (a path under the receiver) gets ``count`` events through a worker; every one verified."""
    config = make_config([{"url": receiver.url + "/" + e["name"], "events": ["#"], **e} for e in endpoints])
    await declare(config)
    events = [Event(type="order.paid", data={"n": i}) for i in range(count)]
    async with Worker(config):
        await publish(config, events)
        await receiver.wait_for(lambda r: len(r.received) >= count * len(endpoints), 20)
    assert sorted(r.status for r in receiver.received) == [200] * count * len(endpoints)
    assert receiver.ok_ids() == {e.id for e in events}


async def test_an_ed25519_endpoint_signs_v1a_only_and_each_request_verifies_with_its_public_key(
    make_config, publish
) -> None:
    key = new_ed25519_secret()
    async with verifying_receiver(public_bytes(key)) as receiver:
        await delivered_all(make_config, publish, receiver, [{"name": "ed", "secret": key}], 20)
        for request in receiver.received:
            (signature,) = request.headers["webhook-signature"].split(" ")
            assert signature.startswith("v1a,")
            # And Warren's own receiving toolkit agrees, given the whpk_
            whpk = "whpk_" + base64.b64encode(public_bytes(key)).decode()
            assert verify_standard_webhook([PublicKey(whpk)], request.headers, request.body) == request.event_id


async def test_during_a_migration_each_request_carries_v1_and_v1a_and_either_receiver_verifies(
    make_config, publish
) -> None:
    key = new_ed25519_secret()
    async with verifying_receiver(public_bytes(key)) as receiver:
        endpoints = [
            {"name": "both", "secret": [TEST_SECRET, key]},
            {"name": "moved", "secret": [TEST_SECRET, key], "signing": ["ed25519"]},
        ]
        await delivered_all(make_config, publish, receiver, endpoints, 10)
        hmac_receiver = Webhook(TEST_SECRET)  # a receiver that knows v1 only (standardwebhooks 1.1)
        for request in receiver.received:
            if request.path.endswith("/both"):
                assert versions(request.headers) == ["v1", "v1a"]
                hmac_receiver.verify(request.body, dict(request.headers))
            else:
                assert versions(request.headers) == [
                    "v1a"
                ]  # signing = ["ed25519"]: the HMAC secret is kept but signs nothing
