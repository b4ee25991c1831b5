"""The spans Warren records: one per publish (PRODUCER) and one per delivery attempt (CLIENT), with the attributes
of OpenTelemetry's messaging and HTTP client conventions where they fit, and ``warren.*`` for the rest.

An attempt's span is the child of the publish span its message carries (every attempt of an event, through the
delay chain, parking or a DLQ replay, is a sibling under it), and its context is what the endpoint receives in
``traceparent``. It starts once the attempt passed the endpoint's gates and ends when the attempt's outcome is
known (delivered, retry, dead...), so it holds that outcome.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from warren.core.redact import redact_url
from warren.tracing.carry import Carried, context_of, inject_current

__all__ = ["AttemptFacts", "end_attempt_span", "publish_span", "start_attempt_span"]

SYSTEM = "rabbitmq"
_DEFAULT_PORTS = {"http": 80, "https": 443}


@contextmanager
def publish_span(
    tracer: trace.Tracer,
    headers: dict[str, Any],
    *,
    event_id: str,
    event_type: str,
    exchange: str,
    routing_key: str,
    body_size: int,
    tenant: str | None,
) -> Iterator[Span]:
    """A PRODUCER span around one publish (until RabbitMQ confirmed it), its context written into ``headers``.

    An exception escaping the block is recorded on the span and marks it as an error (OpenTelemetry's default)."""
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "send",
        "messaging.operation.name": "publish",
        "messaging.destination.name": exchange,
        "messaging.rabbitmq.destination.routing_key": routing_key,
        "messaging.message.id": event_id,
        "messaging.message.body.size": body_size,
        "warren.event.type": event_type,
    }
    if tenant is not None:
        attributes["warren.tenant"] = tenant
    with tracer.start_as_current_span(f"publish {event_type}", kind=SpanKind.PRODUCER, attributes=attributes) as span:
        inject_current(headers)
        yield span


@lru_cache(maxsize=1024)
def _server(url: str) -> tuple[tuple[str, Any], ...]:
    """The attributes of an endpoint's URL (computed once per URL): credentials and query values hidden."""
    try:
        parsed = urlsplit(url)
        host, port, scheme = parsed.hostname, parsed.port or _DEFAULT_PORTS.get(parsed.scheme), parsed.scheme
    except ValueError:
        host, port, scheme = None, None, None
    found: list[tuple[str, Any]] = [("url.full", redact_url(url))]
    if host:
        found.append(("server.address", host))
    if port:
        found.append(("server.port", port))
    if scheme:
        found.append(("url.scheme", scheme))
    return tuple(found)


def start_attempt_span(
    tracer: trace.Tracer,
    *,
    endpoint: str,
    url: str,
    event_id: str,
    event_type: str,
    attempt: int,
    tenant: str | None,
    trace_context: Carried | None,
) -> Span:
    """The span of one attempt, a child of the publish span the message carries (a root without one)."""
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "process",
        "messaging.operation.name": "deliver",
        "messaging.message.id": event_id,
        "http.request.method": "POST",
        **dict(_server(url)),
        "warren.endpoint": endpoint,
        "warren.event.type": event_type,
        "warren.attempt": attempt,
    }
    if tenant is not None:
        attributes["warren.tenant"] = tenant
    return tracer.start_span(
        f"deliver {endpoint}", context=context_of(trace_context), kind=SpanKind.CLIENT, attributes=attributes
    )


@dataclass(frozen=True)
class AttemptFacts:
    """What an attempt's span is told when it ends."""

    outcome: str  # the decision's label: delivered, retry, retry-in-place, dead, exhausted, parked, disabled
    status: int | None  # the HTTP status; None when no answer came
    error: str | None  # why no answer came
    reason: str  # the result in words ("HTTP 503", "timed out after 5s")
    delivered: bool
    refused: bool = False  # refused before sending (the egress guard, a bad URL)
    next_delay: float | None = None  # seconds until the next attempt, when there is one


def _error_type(facts: AttemptFacts) -> str:
    if facts.status is not None:
        return str(facts.status)
    if facts.refused:
        return "refused"
    text = facts.error or ""
    if text.startswith("timed out"):
        return "timeout"
    if text.startswith("connection failed"):
        return "connection_failed"
    return "_OTHER"


def end_attempt_span(span: Span, facts: AttemptFacts) -> None:
    """Set the attempt's outcome on its span and end it; an attempt that did not deliver is an error."""
    if facts.status is not None:
        span.set_attribute("http.response.status_code", facts.status)
    span.set_attribute("warren.outcome", facts.outcome)
    if facts.next_delay is not None:
        span.set_attribute("warren.retry.delay", round(facts.next_delay, 3))
    if not facts.delivered:
        span.set_attribute("error.type", _error_type(facts))
        span.set_status(Status(StatusCode.ERROR, facts.reason))
    span.end()
