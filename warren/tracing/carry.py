"""W3C trace context (``traceparent``, ``tracestate``) in a message's headers and the outgoing request's. Pure but
for OpenTelemetry's context.

Only the W3C trace context travels, never ``baggage``: the request goes to a third party. A value carried in
the headers is forwarded only when well formed (a bad one would make aiohttp refuse the request, and every
attempt fail); with tracing off it is forwarded unchanged, so the endpoint still joins the producer's trace.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from warren.tracing.state import active_tracer

__all__ = [
    "TRACEPARENT",
    "TRACESTATE",
    "TRACE_HEADERS",
    "Carried",
    "attached",
    "carried",
    "context_of",
    "current_headers",
    "environment_context",
    "inject_current",
    "outgoing_headers",
]

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
TRACE_HEADERS = (TRACEPARENT, TRACESTATE)
TRACESTATE_LIMIT = 512  # characters: W3C asks every vendor to pass on at least this much

# version-traceid-parentid-flags, lowercase hex (W3C Trace Context level 1; a later version may add fields).
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(?:-[\x21-\x7e]*)?")
_TRACESTATE = re.compile(r"[\x20-\x7e]*")  # printable ASCII: what a header may hold (W3C's rules are stricter)
_PROPAGATOR = TraceContextTextMapPropagator()
_ZERO_TRACE, _ZERO_SPAN = "0" * 32, "0" * 16

Carried = tuple[str, str | None]  # (traceparent, tracestate)


def _text(value: object) -> str | None:
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("ascii")
        except UnicodeDecodeError:
            return None
    return value if isinstance(value, str) else None


def carried(headers: Mapping[str, Any]) -> Carried | None:
    """The trace context a message carries, when its ``traceparent`` is well formed (else None: none is sent)."""
    parent = _text(headers.get(TRACEPARENT))
    if parent is None or not _TRACEPARENT.fullmatch(parent) or parent.startswith("ff"):
        return None
    if parent[3:35] == _ZERO_TRACE or parent[36:52] == _ZERO_SPAN:  # W3C: all zeros is no id
        return None
    state = _text(headers.get(TRACESTATE))
    if state is not None and (len(state) > TRACESTATE_LIMIT or not _TRACESTATE.fullmatch(state)):
        state = None
    return parent, state or None


def context_of(trace_context: Carried | None) -> otel_context.Context | None:
    """The OpenTelemetry context whose parent is the carried span (None without one)."""
    if trace_context is None:
        return None
    parent, state = trace_context
    carrier = {TRACEPARENT: parent} if state is None else {TRACEPARENT: parent, TRACESTATE: state}
    return _PROPAGATOR.extract(carrier)


def current_headers(context: otel_context.Context | None = None) -> dict[str, str]:
    """``traceparent`` (and ``tracestate``) of the current span, or of ``context``'s; empty when there is none."""
    out: dict[str, str] = {}
    _PROPAGATOR.inject(out, context)
    return out


# The context inject_current looked at last, and whether it held a valid span. A context is immutable, so the
# same one seen again (every event of a batch, published in one context) needs no second look (issue 38).
_LAST_LOOK: tuple[otel_context.Context | None, bool] = (None, False)


def inject_current(headers: dict[str, Any]) -> None:
    """Add the current span's trace context to ``headers``, when the current context holds a valid one."""
    global _LAST_LOOK  # a cache of one: a tuple swapped whole, so threads see one or the other
    context = otel_context.get_current()
    seen, valid = _LAST_LOOK
    if context is not seen:
        valid = trace.get_current_span(context).get_span_context().is_valid
        _LAST_LOOK = (context, valid)
    if valid:
        _PROPAGATOR.inject(headers, context)


def outgoing_headers(headers: dict[str, str], trace_context: Carried | None) -> None:
    """Add the trace context of the request to ``headers``: the current span's (the attempt's) while tracing,
    else the message's own, unchanged. Nothing when the message carries none and nothing records."""
    if active_tracer() is not None and trace.get_current_span().get_span_context().is_valid:
        _PROPAGATOR.inject(headers)
    elif trace_context is not None:
        headers[TRACEPARENT] = trace_context[0]
        if trace_context[1] is not None:
            headers[TRACESTATE] = trace_context[1]


@contextmanager
def attached(trace_context: Carried | None) -> Iterator[None]:
    """The carried span as the current context while the block runs (nothing changes without one): what the
    ingest API does with a request's ``traceparent``, and ``warren publish`` with ``TRACEPARENT``."""
    if trace_context is None:
        yield
        return
    token = otel_context.attach(context_of(trace_context) or otel_context.Context())
    try:
        yield
    finally:
        otel_context.detach(token)


def environment_context(env: Mapping[str, str] | None = None) -> Carried | None:
    """The trace context in ``TRACEPARENT`` and ``TRACESTATE``: OpenTelemetry's environment carrier, for a
    command started by a traced process."""
    env = os.environ if env is None else env
    return carried({TRACEPARENT: env.get("TRACEPARENT"), TRACESTATE: env.get("TRACESTATE")})
