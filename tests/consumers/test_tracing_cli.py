"""``warren publish`` in a traced process (docs/tracing.md): the trace context of ``TRACEPARENT`` is the parent of
its publish span, which the SDK set up from ``OTEL_*`` exports, and the endpoint receives the trace. Real
RabbitMQ, the real CLI in a child process, a real receiver."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import warren
from tests.support.processes import write_config
from tests.support.receiver import Receiver
from tests.support.tracing import parent_id_of, trace_id_of
from warren.consumers.worker import Worker

pytestmark = pytest.mark.timeout(60)

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"


def console_spans(out: str) -> list[dict[str, Any]]:
    """The spans ConsoleSpanExporter printed (one JSON object each, indented), among the command's own lines."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while (start := out.find("{", at)) != -1:
        span, at = decoder.raw_decode(out, start)
        found.append(span)
    return found


async def test_warren_publish_exports_its_span_in_the_callers_trace(
    endpoint_config: Any, receiver: Receiver, tmp_path: Path
) -> None:
    # Given a traced caller (TRACEPARENT) and the SDK asked for with OTEL_TRACES_EXPORTER=console
    config = await endpoint_config([{"name": "cli"}])
    path = write_config(tmp_path, config)
    env = {"TRACEPARENT": CALLER, "TRACESTATE": "caller=1", "OTEL_TRACES_EXPORTER": "console"}
    # When `warren publish` publishes an event and a worker (tracing off here) delivers it
    run = await warren("publish", "-c", str(path), "--type", "order.paid", "--data", "{}", "--id", "evt_cli", env=env)
    assert run.code == 0, run.err
    async with Worker(config):
        await receiver.wait_for(lambda r: "evt_cli" in r.ok_ids(), 20)
    # Then the command exported its publish span, a child of the caller's span, for the service warren-publish
    [span] = console_spans(run.out)
    assert span["name"] == "publish order.paid" and span["kind"] == "SpanKind.PRODUCER"
    assert span["context"]["trace_id"] == "0x" + CALLER_TRACE and span["parent_id"] == "0x00f067aa0ba902b7"
    assert span["attributes"]["messaging.message.id"] == "evt_cli"
    assert span["resource"]["attributes"]["service.name"] == "warren-publish"
    # And the endpoint received the trace, naming the publish span as the parent, the caller's tracestate kept
    [request] = receiver.received
    assert trace_id_of(request.headers["traceparent"]) == CALLER_TRACE
    assert "0x" + parent_id_of(request.headers["traceparent"]) == span["context"]["span_id"]
    assert request.headers["tracestate"] == "caller=1"


async def test_warren_publish_without_the_sdk_asked_passes_the_callers_trace_on(
    endpoint_config: Any, receiver: Receiver, tmp_path: Path
) -> None:
    config = await endpoint_config([{"name": "cli"}])
    path = write_config(tmp_path, config)
    run = await warren(
        "publish", "-c", str(path), "--type", "a.b", "--data", "{}", "--id", "evt_plain", env={"TRACEPARENT": CALLER}
    )
    assert run.code == 0, run.err
    assert "{" not in run.out  # no span printed: no SDK was set up
    async with Worker(config):
        await receiver.wait_for(lambda r: "evt_plain" in r.ok_ids(), 20)
    assert receiver.received[0].headers["traceparent"] == CALLER
