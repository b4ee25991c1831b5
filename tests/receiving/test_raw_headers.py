"""Header bytes that are not UTF-8 on ``warren receive``: a verification failure (401), never a 500."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import time
from collections.abc import AsyncIterator

import pytest
from aio_pika.abc import AbstractRobustConnection
from aiohttp.test_utils import TestServer

from tests.receiving.test_receiver import WH_SECRET, config, connection  # noqa: F401 (fixtures)
from tests.support.declare import declare_plan
from tests.support.raw_http import raw_exchange, status_of
from warren.receiving.receiver import build_receiver_app
from warren.topology.config import WarrenConfig
from warren.topology.planner import plan_topology
from warren.topology.secrets import WebhookSecret

pytestmark = pytest.mark.timeout(30)

BODY = b'{"id": "e-1", "update_id": 7, "type": "order.paid", "data": {}}'


@pytest.fixture
async def port(config: WarrenConfig, connection: AbstractRobustConnection) -> AsyncIterator[int]:  # noqa: F811
    await declare_plan(connection, plan_topology(config))
    server = TestServer(build_receiver_app(config, connection=connection), host="127.0.0.1")
    await server.start_server()
    assert server.port is not None
    yield server.port
    await server.close()


def _signed(msg_id: bytes) -> bytes:
    """Standard Webhooks headers whose signature is right for the raw id bytes, so only their encoding is wrong."""
    ts = int(time.time())
    mac = hmac.new(WebhookSecret(WH_SECRET).key, msg_id + b".%d." % ts + BODY, hashlib.sha256).digest()
    signature = b"v1," + base64.b64encode(mac)
    return b"webhook-id: " + msg_id + b"\r\nwebhook-timestamp: %d\r\nwebhook-signature: " % ts + signature


def _post(path: bytes, headers: bytes) -> bytes:
    return (
        b"POST "
        + path
        + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + b"Content-Length: %d\r\n" % len(BODY)
        + headers
        + b"\r\nConnection: close\r\n\r\n"
        + BODY
    )


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        (b"/in/warren", _signed(b"msg_\xff\xfe")),
        (b"/telegram/webhook", b"X-Telegram-Bot-Api-Secret-Token: tg-\xff\xfe"),
        (b"/in/github", b"X-Hub-Signature-256: sha256=\xff\xfe\r\nX-GitHub-Delivery: d-1"),
        (b"/in/github", b"X-Hub-Signature-256: sha256=00\r\nX-GitHub-Delivery: d-\xff"),
        (b"/in/open", b"X-Anything: \xff\xfe"),
    ],
    ids=["webhook-id", "token", "signature", "id-header", "unverified-source"],
)
async def test_non_utf8_header_bytes_are_a_verification_failure(
    port: int, caplog: pytest.LogCaptureFixture, path: bytes, headers: bytes
) -> None:
    caplog.set_level(logging.WARNING)
    # When a webhook arrives with header bytes that are not UTF-8
    response = await raw_exchange(port, _post(path, headers))
    # Then it is refused as not verified, with a JSON reason, and nothing is logged as an error
    assert status_of(response) == 401, response
    assert b'"error": "unauthorized"' in response
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]
