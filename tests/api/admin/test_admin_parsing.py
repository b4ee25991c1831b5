"""Hostile text at the admin API: deeply nested bodies are 400 malformed_json, and a test event's numbers are sent as
written or refused; never a 500 with a traceback."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import pytest

from tests.api.admin.conftest import ADMIN_TOKEN, AdminServer
from tests.api.ingest.conftest import Reply
from tests.support.deep_json import BEYOND_ORJSON, nested, with_duplicate
from tests.support.receiver import Receiver

Start = Callable[..., Awaitable[AdminServer]]

pytestmark = pytest.mark.timeout(30)


def endpoint(depth: int) -> bytes:
    return b'{"name": "deep", "url": "http://127.0.0.1:9/hook", "events": ["a.b"], "x": ' + nested(depth) + b"}"


@pytest.mark.parametrize(
    ("document", "says"),
    [
        pytest.param(BEYOND_ORJSON, "not valid JSON", id="200000-levels"),
        pytest.param(with_duplicate(endpoint(1000), "name"), "duplicate key 'name'", id="1000-levels-duplicate-key"),
        pytest.param(endpoint(300), "recursion limit", id="300-levels"),
    ],
)
async def test_deep_json_is_malformed_json(
    start_admin: Start, caplog: pytest.LogCaptureFixture, document: bytes, says: str
) -> None:
    admin = await start_admin()
    with caplog.at_level(logging.ERROR, logger="warren"):
        reply = await admin.api.request(
            "POST", "/v1/endpoints", data=document, token=ADMIN_TOKEN, headers={"Content-Type": "application/json"}
        )
    assert (reply.status, reply.error) == (400, "malformed_json"), reply.body
    assert says in reply.body["message"]
    assert admin.applier.applied == []
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


async def test_test_event_data_is_sent_as_written_or_refused(start_admin: Start) -> None:
    # Given an endpoint
    async with Receiver() as receiver:
        admin = await start_admin()
        created = await admin.call(
            "POST", "/v1/endpoints", {"name": "acme", "url": receiver.url, "events": ["order.*"]}
        )
        assert created.status == 201, created.body

        async def test_with(data: bytes) -> Reply:
            body = b'{"type": "order.test", "data": ' + data + b"}"
            return await admin.api.request(
                "POST",
                "/v1/endpoints/acme/test",
                data=body,
                token=ADMIN_TOKEN,
                headers={"Content-Type": "application/json"},
            )

        # When test events carry a number pydantic reads as infinity, and an integer beyond 64 bits
        infinite = await test_with(b'{"n": 1e999}')
        big = await test_with(b'{"n": 123456789012345678901234567890}')
    # Then the first is refused (it was sent as {"n": null}) and the second sent digit for digit (it was a 500)
    assert infinite.status == 422 and "finite" in infinite.body["message"], infinite.body
    assert big.status == 200 and big.body["delivered"] is True, big.body
    [request] = receiver.received
    assert b'"data":{"n":123456789012345678901234567890}' in request.body
