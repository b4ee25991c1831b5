"""One event's trace, recorded in memory: published in a producer's span, refused once (HTTP 503), retried
through the delay chain and delivered. Prints each span as the SDK recorded it (docs/tracing.md shows a run).

    .venv/bin/python examples/trace_one_event.py [amqp://guest:guest@127.0.0.1:5672/]

Needs a RabbitMQ with Warren's plugins and the SDK (the ``otel`` extra; ``pip install 'warren-webhooks[otel]'``).
Declares a topology under a fresh prefix and removes it at the end.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path

from aiohttp import web
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.topology_teardown import teardown
from warren import Event, Publisher, connect
from warren.broker.applier import apply_setup
from warren.consumers.worker import Worker
from warren.topology.config import WarrenConfig

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


async def main(url: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # Warren records with the global provider an application set

    received: list[str] = []

    async def hook(request: web.Request) -> web.Response:
        await request.read()
        received.append(request.headers["traceparent"])
        return web.Response(status=503 if len(received) == 1 else 200)

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    config = WarrenConfig(
        broker={"url": url, "prefix": f"trace{uuid.uuid4().hex[:6]}"},
        retry={"base": "200ms", "cap": "1s", "max_attempts": 5},
        delivery={"allow_private_networks": True},
        endpoints=[{"name": "shop", "url": f"http://127.0.0.1:{port}/hook", "secret": SECRET, "events": ["order.*"]}],
    )
    await apply_setup(config)
    try:
        connection = await connect(config.broker.urls)
        publisher = await Publisher.open(connection, config.broker.prefix)
        with trace.get_tracer("shop-backend").start_as_current_span("POST /checkout"):
            await publisher.publish(Event(type="order.paid", data={"order": 1042}, id="evt_1042"))
        await connection.close()
        async with Worker(config):
            while len(received) < 2 or len(exporter.get_finished_spans()) < 4:
                await asyncio.sleep(0.05)
    finally:
        await teardown(config)
        await runner.cleanup()
    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    for span in spans:
        show(span, spans[0].start_time or 0)
    for n, traceparent in enumerate(received, 1):
        print(f"request {n} to the endpoint: traceparent: {traceparent}")


def show(span: ReadableSpan, origin: int) -> None:
    assert span.context is not None
    parent = f"{span.parent.span_id:016x}" if span.parent else "-"
    at, took = ((span.start_time or 0) - origin) / 1e6, ((span.end_time or 0) - (span.start_time or 0)) / 1e6
    status = span.status.status_code.name + (f" ({span.status.description})" if span.status.description else "")
    print(f"{span.name}  [{span.kind.name}]  at +{at:.1f} ms, {took:.1f} ms  status {status}")
    print(f"  trace {span.context.trace_id:032x}  span {span.context.span_id:016x}  parent {parent}")
    for key, value in (span.attributes or {}).items():
        print(f"  {key} = {value!r}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "amqp://guest:guest@127.0.0.1:5672/"))
