"""The response a dead letter's last attempt got is kept in its headers, and ``warren dlq show`` prints it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.cli import warren
from tests.support.dead_letters import wait_depth
from tests.support.processes import write_config
from tests.support.receiver import Receiver, Reply
from warren.broker import wire
from warren.broker.events import Event
from warren.consumers.worker import Worker
from warren.topology import names

pytestmark = pytest.mark.timeout(120)

ANSWER = b'{"error": "invalid_signature", "detail": "no v1 signature matched \\u00e9"}'


async def test_dlq_show_prints_the_last_response_body(
    endpoint_config: Any, receiver: Receiver, publish: Any, tmp_path: Path
) -> None:
    # Given an endpoint that refuses an event with 400 and a body saying why (non-retryable: dead at once)
    receiver.behaviour = lambda r, request, body: Reply(400, body=ANSWER)
    config = await endpoint_config([{"name": "down", "circuit": {"enabled": False}}])
    event = Event(type="order.paid", data={"n": 1})
    async with Worker(config):
        await publish(config, [event])
        assert await wait_depth(config, names.dlq(config.broker.prefix, "down"), 1, 20) == 1
    path = write_config(tmp_path, config)
    # When the dead letter is shown, as text and as JSON
    text = await warren("dlq", "show", "down", event.id, "--config", str(path))
    as_json = await warren("dlq", "show", "down", event.id, "--json", "--config", str(path))
    # Then both carry the body the endpoint answered, as the worker read it
    assert text.code == 0 and as_json.code == 0, (text.err, as_json.err)
    expected = ANSWER.decode()
    assert "last response" in text.out and '"error": "invalid_signature"' in text.out, text.out
    shown = orjson.loads(as_json.out)  # one copy: the document itself
    assert shown["last_response"] == expected
    assert shown["headers"][wire.H_LAST_RESPONSE] == expected
