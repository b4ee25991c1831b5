"""OpenTelemetry tracing: W3C trace context carried in message headers to the endpoint, a span per publish and per
delivery attempt (docs/tracing.md).

Only the OpenTelemetry API is a dependency; the SDK and its exporter are the ``otel`` extra, set up from the
standard ``OTEL_*`` variables by ``warren worker``, ``warren api`` and ``warren publish`` (``sdk.py``). Without a
tracer provider nothing is recorded and a delivery costs one check more: a ``traceparent`` the event carries is
still passed on as it is.
"""

from __future__ import annotations

from warren.tracing.carry import TRACE_HEADERS, TRACEPARENT, TRACESTATE, carried, outgoing_headers
from warren.tracing.spans import AttemptFacts, end_attempt_span, publish_span, start_attempt_span
from warren.tracing.state import active_tracer, resolve, tracer, use

__all__ = [
    "TRACEPARENT",
    "TRACESTATE",
    "TRACE_HEADERS",
    "AttemptFacts",
    "active_tracer",
    "carried",
    "end_attempt_span",
    "outgoing_headers",
    "publish_span",
    "resolve",
    "start_attempt_span",
    "tracer",
    "use",
]
