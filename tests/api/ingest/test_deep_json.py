"""Deeply nested JSON at the ingest API: always 400 malformed_json, never a 500 with a traceback."""

from __future__ import annotations

import logging

import pytest

from tests.api.ingest.conftest import ApiServer
from tests.support.deep_json import BEYOND_ORJSON, nested, with_duplicate

EVENT_1000 = b'{"type": "order.created", "data": ' + nested(1000) + b"}"  # orjson reads it; the stdlib did not
EVENT_300 = b'{"type": "order.created", "data": ' + nested(300) + b"}"  # orjson reads it, and did not write it


@pytest.mark.parametrize(
    ("document", "says"),
    [
        pytest.param(BEYOND_ORJSON, "not valid JSON", id="200000-levels"),
        pytest.param(with_duplicate(EVENT_1000, "type"), "duplicate key 'type'", id="1000-levels-duplicate-key"),
        pytest.param(EVENT_300, "recursion limit", id="300-levels"),  # beyond pydantic's 200
    ],
)
@pytest.mark.parametrize("batch", [False, True], ids=["event", "batch"])
async def test_deep_json_is_malformed_json(
    api: ApiServer, caplog: pytest.LogCaptureFixture, document: bytes, says: str, batch: bool
) -> None:
    # Given a body nested deeper than a parser reads (orjson, the standard library's, pydantic's)
    body = b'{"events": [' + document + b"]}" if batch else document
    # When it is POSTed
    with caplog.at_level(logging.ERROR, logger="warren"):
        reply = await api.post(
            "/v1/events/batch" if batch else "/v1/events", data=body, headers={"Content-Type": "application/json"}
        )
    # Then it is refused as malformed JSON saying why, and nothing went wrong inside
    assert (reply.status, reply.error) == (400, "malformed_json"), reply.body
    assert says in reply.body["message"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
