"""``warren worker`` sets the SDK up from ``OTEL_EXPORTER_OTLP_ENDPOINT`` and exports its attempt spans over OTLP
(HTTP/protobuf, the ``otel`` extra) to a collector: a real worker process, a real receiver, a local collector
that decodes what it gets. Real RabbitMQ."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.support.processes import WorkerProcess, write_config
from tests.support.receiver import Receiver
from warren.broker.events import Event
from warren.tracing.carry import attached

pytestmark = pytest.mark.timeout(60)

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


class Collector:
    """An OTLP/HTTP traces endpoint on 127.0.0.1: every span it is sent, with its resource's attributes."""

    def __init__(self) -> None:
        self.spans: list[tuple[dict[str, Any], Any]] = []
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def _traces(self, request: web.Request) -> web.Response:
        message = ExportTraceServiceRequest()
        message.ParseFromString(await request.read())
        for resource_spans in message.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                self.spans.extend((resource, span) for span in scope_spans.spans)
        body = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=body, content_type="application/x-protobuf")

    async def __aenter__(self) -> Collector:
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


async def test_the_worker_exports_attempt_spans_over_otlp(
    endpoint_config: Any, receiver: Receiver, publish: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Collector() as collector:
        # Given a worker process told where the collector is, and nothing else
        config = await endpoint_config([{"name": "otlp"}])
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{collector.port}")
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
        monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
        monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
        worker = WorkerProcess(write_config(tmp_path, config))
        try:
            await worker.start()
            await worker.wait_ready()
            # When an event published in a caller's trace is delivered, and the worker stops
            with attached((f"00-{CALLER_TRACE}-00f067aa0ba902b7-01", None)):
                [event_id] = await publish(config, [Event(type="a.b", data={})])
            await receiver.wait_for(lambda r: event_id in r.ok_ids(), 20)
            assert await worker.terminate() == 0
        finally:
            await worker.cleanup()
    # Then the collector got the attempt's span, in the caller's trace, from the service warren-worker
    [(resource, span)] = collector.spans
    assert resource["service.name"] == "warren-worker"
    assert span.name == "deliver otlp" and span.trace_id.hex() == CALLER_TRACE
    assert span.parent_span_id.hex() == "00f067aa0ba902b7"
    attributes = {a.key: a.value for a in span.attributes}
    assert attributes["messaging.message.id"].string_value == event_id
    assert attributes["http.response.status_code"].int_value == 200
    assert attributes["warren.outcome"].string_value == "delivered"
    assert receiver.received[0].headers["traceparent"] == f"00-{CALLER_TRACE}-{span.span_id.hex()}-01"
