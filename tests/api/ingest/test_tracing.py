"""The ingest API in a caller's trace (docs/tracing.md): a request's ``traceparent`` is the parent of the publish
span, or with tracing off travels on unchanged in the message; a malformed one is ignored. Real RabbitMQ."""

from __future__ import annotations

import pytest

from tests.api.ingest.conftest import ApiServer, work_queue
from tests.support.tracing import Spans, hex_span, parent_id_of, spans, trace_id_of

__all__ = ["spans"]

pytestmark = pytest.mark.timeout(30)

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"


def text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def test_with_tracing_off_the_requests_trace_context_is_carried_unchanged(api: ApiServer, queue_reader) -> None:
    headers = {"traceparent": CALLER, "tracestate": "caller=1"}
    one = await api.post("/v1/events", {"type": "order.paid", "data": {}}, headers=headers)
    batch = await api.post(
        "/v1/events/batch", {"events": [{"type": "order.paid", "data": {"n": n}} for n in range(2)]}, headers=headers
    )
    plain = await api.post("/v1/events", {"type": "order.paid", "data": {}})
    assert (one.status, batch.status, plain.status) == (202, 202, 202)
    messages = await queue_reader(work_queue(api.config), 4)
    carried = [m.headers for m in messages if "traceparent" in (m.headers or {})]
    assert len(carried) == 3
    assert {(text(h["traceparent"]), text(h["tracestate"])) for h in carried} == {(CALLER, "caller=1")}


@pytest.mark.parametrize("bad", ["00-xyz-00f067aa0ba902b7-01", "00-" + "0" * 32 + "-00f067aa0ba902b7-01", "ff-x"])
async def test_a_malformed_traceparent_is_ignored(api: ApiServer, queue_reader, bad: str) -> None:
    reply = await api.post("/v1/events", {"type": "order.paid", "data": {}}, headers={"traceparent": bad})
    assert reply.status == 202
    [message] = await queue_reader(work_queue(api.config), 1)
    assert "traceparent" not in (message.headers or {})


async def test_with_tracing_on_the_publish_span_is_a_child_of_the_requests(
    api: ApiServer, queue_reader, spans: Spans
) -> None:
    reply = await api.post("/v1/events", {"type": "order.paid", "data": {}}, headers={"traceparent": CALLER})
    assert reply.status == 202
    [message] = await queue_reader(work_queue(api.config), 1)
    [span] = spans.named("publish ")
    assert span.parent is not None and f"{span.parent.span_id:016x}" == parent_id_of(CALLER)
    assert span.attributes is not None and span.attributes["messaging.message.id"] == reply.body["id"]
    traceparent = text((message.headers or {})["traceparent"])
    assert trace_id_of(traceparent) == CALLER_TRACE and parent_id_of(traceparent) == hex_span(span)
