"""Hostile text at the admin API: deeply nested bodies are 400 malformed_json, never a 500 with a traceback."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import pytest

from tests.broker.admin.conftest import ADMIN_TOKEN, AdminServer
from tests.support.deep_json import BEYOND_ORJSON, nested, with_duplicate

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
