"""``warren receive`` with an Ed25519 public key (``whpk_``), against the real RabbitMQ: a ``v1a`` request signed
by PyNaCl with the matching secret key is queued; one signed by another key is refused with 401."""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterator, Callable

import nacl.signing
import orjson
import pytest
from aio_pika.abc import AbstractRobustConnection
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tests.receiving.test_receiver import connection
from tests.support.declare import declare_plan
from warren.receiving.receiver import build_receiver_app
from warren.topology import names
from warren.topology.config import WarrenConfig
from warren.topology.planner import plan_topology

pytestmark = pytest.mark.timeout(60)

KEY = nacl.signing.SigningKey.generate()
OTHER = nacl.signing.SigningKey.generate()
PUBLIC = "whpk_" + base64.b64encode(bytes(KEY.verify_key)).decode()
Client = TestClient[web.Request, web.Application]
__all__ = ["connection"]  # the fixture of test_receiver.py: a robust connection to the test's broker


@pytest.fixture
async def client(
    make_config: Callable[..., WarrenConfig], connection: AbstractRobustConnection
) -> AsyncIterator[tuple[Client, WarrenConfig]]:
    source = {"name": "signed", "verifier": "standard-webhooks", "secret": [PUBLIC], "handler": "m.n:f"}
    config = make_config(inbound=[source], receiver={"publish_timeout": "2s"})
    await declare_plan(connection, plan_topology(config))
    async with TestClient(TestServer(build_receiver_app(config, connection=connection), host="127.0.0.1")) as c:
        yield c, config


def signed(key: nacl.signing.SigningKey, body: bytes, msg_id: str) -> dict[str, str]:
    ts = str(int(time.time()))
    signature = key.sign(f"{msg_id}.{ts}.".encode() + body).signature
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": ts,
        "webhook-signature": "v1a," + base64.b64encode(signature).decode(),
        "Content-Type": "application/json",
    }


async def test_a_v1a_request_is_queued_and_one_of_another_key_refused(
    client: tuple[Client, WarrenConfig], connection: AbstractRobustConnection
) -> None:
    http, config = client
    body = orjson.dumps({"id": "msg_1", "type": "order.paid", "data": {}})
    accepted = await http.post("/in/signed", data=body, headers=signed(KEY, body, "msg_1"))
    assert accepted.status == 202, await accepted.text()
    refused = await http.post("/in/signed", data=body, headers=signed(OTHER, body, "msg_2"))
    assert refused.status == 401 and (await refused.json())["reason"] == "no_matching_signature"
    async with connection.channel() as channel:
        queue = await channel.get_queue(names.inbound_queue(config.broker.prefix, "signed"))
        deadline = time.monotonic() + 3
        message = None
        while message is None and time.monotonic() < deadline:
            message = await queue.get(fail=False, no_ack=True)
        assert message is not None and message.message_id == "msg_1" and message.body == body
        assert await queue.get(fail=False, no_ack=True) is None  # the refused one never reached the queue
