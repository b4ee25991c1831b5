"""One attempt of one delivery, and what is told of it: through the gates and the transport, then the attempt's
log line and the same facts to every observer (metrics, the breaker, the attempt log).

Anything unexpected while attempting (a header aiohttp refuses, a gate that fails) becomes a failed result, so
that it is retried within the budget and then dead-lettered with its text, never an uncounted hand-back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from warren.consumers.attempt_log import log_attempt
from warren.consumers.attempt_trace import end_span, traced_send
from warren.consumers.decision import Decision, HandBack, Retry
from warren.consumers.hooks import ATTEMPTING, AttemptRecord, DeliveryGate, DeliveryHooks, EndpointBlocked
from warren.topology.config import Endpoint
from warren.tracing import active_tracer, resolve
from warren.transport.base import Delivery, SendResult, Transport, failed_result

__all__ = ["Attempter"]

log = logging.getLogger("warren.worker")


class Attempter:
    """Makes and reports the attempts of one endpoint; ``now_ms`` is the runner's clock (tests set it)."""

    def __init__(
        self, endpoint: Endpoint, transport: Transport, hooks: DeliveryHooks, now_ms: Callable[[], int]
    ) -> None:
        self.endpoint = endpoint
        self.transport = transport
        self.hooks = hooks
        self.now_ms = now_ms
        resolve()  # a tracer provider the application set before starting the worker (warren/tracing/state.py)

    async def attempt(self, delivery: Delivery) -> tuple[SendResult, int]:
        """One attempt through the gates and the transport. Anything unexpected becomes a failed result."""
        name = self.endpoint.name
        acquired: list[DeliveryGate] = []
        sent: SendResult | None = None  # what the gates are told: None unless the transport was reached
        started = time.monotonic()
        attempt_ms = self.now_ms()
        attempting = ATTEMPTING.set(delivery.event_id)
        try:
            try:
                for gate in self.hooks.gates:
                    await gate.acquire(name)
                    acquired.append(gate)
                attempt_ms = self.now_ms()
                tracer = active_tracer()
                if tracer is None:
                    sent = result = await self.transport.send(self.endpoint, delivery)
                else:
                    sent = result = await traced_send(tracer, self.transport, self.endpoint, delivery)
            except EndpointBlocked:
                raise
            except Exception as exc:
                # e.g. aiohttp's ValueError for a header value it refuses, or a gate that failed: a failed attempt,
                # retried within the budget and then dead-lettered with this text, never an uncounted hand-back.
                log.warning(
                    "attempt of %s failed unexpectedly", delivery.event_id, exc_info=True, extra={"endpoint": name}
                )
                result = failed_result(exc, time.monotonic() - started)
            return result, attempt_ms
        finally:
            ATTEMPTING.reset(attempting)
            for gate in reversed(acquired):
                try:
                    gate.release(name, sent)
                except Exception:
                    log.exception("a delivery gate of %s failed on release", name)

    def report(
        self,
        delivery: Delivery,
        attempt: int,
        result: SendResult,
        decision: Decision,
        at_ms: int,
        *,
        observers: bool = True,
    ) -> None:
        """The attempt's log line, and the same facts to every observer (metrics, breaker)."""
        delay = decision.delay if isinstance(decision, Retry) else None
        if isinstance(decision, HandBack) and decision.remember:
            delay = decision.after
        if active_tracer() is not None:
            end_span(result, decision.label, delay)
        log_attempt(
            event_id=delivery.event_id,
            endpoint=self.endpoint.name,
            attempt=attempt,
            status=result.status,
            error=result.error,
            duration=result.duration,
            outcome=decision.label,
            next_delay=delay,
        )
        if not observers or not self.hooks.observers:
            return
        record = AttemptRecord(
            self.endpoint.name,
            delivery.event_id,
            attempt,
            result.status,
            result.error,
            result.duration,
            decision.label,
            delay,
            delivery.age(at_ms),
            result.retry_after,
            delivery.tenant,
            result.excerpt if result.status is not None else None,
            result.response_headers,
        )
        for observer in self.hooks.observers:
            observer(record)
