"""Spans recorded in memory: OpenTelemetry's SDK with an InMemorySpanExporter, given to Warren with
``warren.tracing.use`` (the global provider stays the API's no-op one, so other tests run with tracing off)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from warren import tracing


class Spans:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def finished(self) -> Sequence[ReadableSpan]:
        return self.exporter.get_finished_spans()

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.finished() if s.name.startswith(prefix)]

    async def wait_for(self, predicate: Callable[[Sequence[ReadableSpan]], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not predicate(self.finished()):
            assert time.monotonic() < deadline, f"spans not there in {timeout}s: {[s.name for s in self.finished()]}"
            await asyncio.sleep(0.02)


@pytest.fixture
def spans() -> Iterator[Spans]:
    recorded = Spans()
    tracing.use(recorded.provider)
    try:
        yield recorded
    finally:
        tracing.use(None)
        recorded.provider.shutdown()


def trace_id_of(traceparent: str) -> str:
    return traceparent.split("-")[1]


def parent_id_of(traceparent: str) -> str:
    return traceparent.split("-")[2]


def hex_trace(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.trace_id:032x}"


def hex_span(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.span_id:016x}"
