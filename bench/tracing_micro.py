"""What tracing adds to one delivery, in microseconds, in this process (no broker, no HTTP): the checks it makes
with tracing off, and a whole attempt span with OpenTelemetry's SDK on (BatchSpanProcessor into an
InMemorySpanExporter). timeit on CPU time, best of ``--repeat``.

    .venv/bin/python bench/tracing_micro.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import sys
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from warren import tracing
from warren.consumers.delivery import parse_delivery
from warren.tracing.carry import TRACEPARENT, carried, inject_current, outgoing_headers
from warren.tracing.spans import AttemptFacts, end_attempt_span, start_attempt_span

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
BODY = orjson.dumps({"id": "evt_1", "type": "order.paid", "timestamp": "2026-01-01T00:00:00.000Z", "data": {"n": 1}})
HEADERS = {"warren-key": "evt_1", "warren-published-ms": 1_700_000_000_000}
TRACED = {**HEADERS, TRACEPARENT: PARENT, "tracestate": "vendor=1"}


def micro(statement: object, number: int, repeat: int) -> float:
    """Best CPU time of one call (this process's, every thread's: the batch processor's export too), in µs. CPU
    time, not the wall clock: on a loaded machine the wall clock counts the time others had the core."""
    times = timeit.repeat(statement, number=number, repeat=repeat, timer=time.process_time)  # type: ignore[arg-type]
    return min(times) / number * 1e6


def main(repeat: int) -> None:
    n = 20_000
    rows = [
        ("parse_delivery, no traceparent", lambda: parse_delivery(BODY, "evt_1", HEADERS, 0, max_payload=1 << 20)),
        ("parse_delivery, with traceparent", lambda: parse_delivery(BODY, "evt_1", TRACED, 0, max_payload=1 << 20)),
        (
            "off: the checks a delivery without traceparent makes",
            lambda: (
                carried(HEADERS) if TRACEPARENT in HEADERS else None,
                tracing.active_tracer(),
                outgoing_headers({}, None),
                tracing.active_tracer(),
            ),
        ),
        ("off: a traceparent checked and copied to the request", lambda: outgoing_headers({}, carried(TRACED))),
        ("off, publishing: is a provider set? any context to pass on?", lambda: (tracing.tracer(), inject_current({}))),
    ]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=1 << 16))
    tracer = provider.get_tracer("bench")
    trace_context = carried(TRACED)
    facts = AttemptFacts("retry", 503, None, "HTTP 503", False, next_delay=0.5)

    def attempt_span() -> None:
        span = start_attempt_span(
            tracer, endpoint="shop", url="https://hooks.example/shop?token=x", event_id="evt_1",
            event_type="order.paid", attempt=1, tenant=None, trace_context=trace_context,
        )  # fmt: skip
        with trace.use_span(span, end_on_exit=False):
            outgoing_headers({}, trace_context)
        end_attempt_span(span, facts)

    rows.append(("on: an attempt span (start, current, inject, end, batch)", attempt_span))
    print(f"| what | CPU µs per delivery (best of {repeat} x {n:,}) |\n|---|---:|")
    for name, statement in rows:
        print(f"| {name} | {micro(statement, n, repeat):.2f} |", flush=True)
        exporter.clear()
    provider.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    main(parser.parse_args().repeat)
