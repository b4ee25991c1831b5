"""The span of one delivery attempt (warren/tracing/spans.py), kept between the attempt and its report.

The attempter starts it once the attempt passed the endpoint's gates, makes it the current span while the
transport sends (so the request's ``traceparent`` names it), and ends it when it reports the attempt's outcome;
the span waits in between in a context variable of the message's task. None of this runs with tracing off: the
attempter checks ``active_tracer()`` first.
"""

from __future__ import annotations

from contextvars import ContextVar

from opentelemetry import trace
from opentelemetry.trace import Span

from warren.topology.config import Endpoint
from warren.tracing import AttemptFacts, end_attempt_span, start_attempt_span
from warren.transport.base import Delivery, Outcome, SendResult, Transport

__all__ = ["end_span", "traced_send"]

_SPAN: ContextVar[Span | None] = ContextVar("warren_attempt_span", default=None)


async def traced_send(tracer: trace.Tracer, transport: Transport, endpoint: Endpoint, delivery: Delivery) -> SendResult:
    """``transport.send`` inside the attempt's span, which stays open until ``end_span``."""
    left = _SPAN.get()
    if left is not None:  # an attempt whose report never came (an exception in between): end it as it is
        left.end()
    span = start_attempt_span(
        tracer,
        endpoint=endpoint.name,
        url=endpoint.url,
        event_id=delivery.event_id,
        event_type=delivery.event_type,
        attempt=delivery.attempts_made + 1,
        tenant=delivery.tenant,
        trace_context=delivery.trace,
    )
    _SPAN.set(span)
    with trace.use_span(span, end_on_exit=False, set_status_on_exception=False):
        return await transport.send(endpoint, delivery)


def end_span(result: SendResult, outcome: str, next_delay: float | None) -> None:
    """End the current attempt's span with what became of the attempt (nothing when there is none)."""
    span = _SPAN.get()
    if span is None:
        return
    _SPAN.set(None)
    end_attempt_span(
        span,
        AttemptFacts(
            outcome=outcome,
            status=result.status,
            error=result.error,
            reason=result.reason,
            delivered=result.outcome is Outcome.DELIVERED,
            refused=result.refused,
            next_delay=next_delay,
        ),
    )
