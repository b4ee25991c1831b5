"""Delivery for one endpoint: consume its queues, POST each message, and settle it exactly once.

Settling follows one rule: a message is acked only after its fate is safe elsewhere — delivered (2xx), or
its next attempt confirmed into the delay chain, or its dead letter confirmed into the DLQ. Any failure on
the way leaves it unacked, so RabbitMQ delivers it again (at-least-once, never at-most-once).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import aiormq.exceptions
from aio_pika.abc import (
    AbstractChannel,
    AbstractExchange,
    AbstractIncomingMessage,
    AbstractQueue,
    AbstractRobustConnection,
)

from warren.broker import wire
from warren.broker.connection import CONNECTION_EXCEPTIONS
from warren.consumers.ack_batcher import AckBatcher
from warren.consumers.attempt_log import log_attempt
from warren.consumers.classify import Outcome, Verdict, classify, parse_retry_after
from warren.consumers.delivery import Delivery, MalformedMessage, dead_headers, parse_delivery, retry_headers
from warren.consumers.hooks import AttemptRecord, DeliveryGate, DeliveryHooks, EndpointBlocked, Settlement
from warren.consumers.http_attempt import AttemptResult, HttpSender
from warren.consumers.signing import signature_header
from warren.topology import names
from warren.topology.backoff import Exhausted, RetryIn, next_step
from warren.topology.config import DeliverySettings, Endpoint, RetryPolicy
from warren.topology.delays import delay_routing_key
from warren.topology.errors import describe

__all__ = ["EndpointRunner"]

log = logging.getLogger("warren.worker")

MOVE_FAILURES: tuple[type[Exception], ...] = (aiormq.exceptions.DeliveryError, *CONNECTION_EXCEPTIONS)
MOVE_FAILURE_PAUSE = 1.0  # seconds before a message whose move failed is handed back to RabbitMQ
HELD_MEMORY = 1000  # messages handed back at the hold limit whose attempt counts a runner remembers


class EndpointRunner:
    """Consumes one endpoint's work queue (competing consumers) or partition queues (single active consumer)."""

    def __init__(
        self,
        endpoint: Endpoint,
        policy: RetryPolicy,
        delivery: DeliverySettings,
        *,
        prefix: str,
        delay_levels: int,
        sender: HttpSender,
        hooks: DeliveryHooks | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.policy = policy
        self.delivery = delivery
        self.prefix = prefix
        self.delay_levels = delay_levels
        self.sender = sender
        self.hooks = hooks or DeliveryHooks()
        self.ordered = endpoint.ordering == "key"
        self.queue_names = (
            [names.partition_queue(prefix, endpoint.name, i) for i in range(endpoint.partition_count)]
            if self.ordered
            else [names.work_queue(prefix, endpoint.name)]
        )
        self._retry_statuses = frozenset(endpoint.retry_statuses)
        self._connection: AbstractRobustConnection | None = None
        self._consume_channel: AbstractChannel | None = None  # the work queue's (unordered endpoints)
        # One channel per partition (ordered endpoints): closing it is how a held message goes back to the head
        # of its partition. A quorum queue puts a nacked message at the *back* (checked on 3.10.8), which
        # would let the messages behind it overtake it; a closed channel returns it to the front.
        self._partition_channels: dict[str, AbstractChannel] = {}
        self._tag_queue: dict[str, str] = {}  # consumer tag -> queue name, kept after the consumer is gone
        self._publish_channel: AbstractChannel | None = None
        self._queues: dict[str, AbstractQueue] = {}
        self._consumer_tags: dict[str, str] = {}
        self._delay_exchange: AbstractExchange | None = None
        self._dead_exchange: AbstractExchange | None = None
        self._in_flight: set[asyncio.Task[Any]] = set()
        # Attempts of messages handed back at the ordered hold limit: event id -> (attempts, first ms, history).
        self._held_before: dict[str, tuple[int, int | None, list[dict[str, Any]]]] = {}
        # Unordered queues batch their acks; a partition (prefetch 1) must ack at once to get its next message.
        self._acks: AckBatcher | None = None if self.ordered else AckBatcher()
        self._busy: dict[str, int] = {}  # consumer tag -> messages being delivered
        self._cancel_when_idle: set[str] = set()  # consumer tags to cancel once their message is settled
        self._accepting = False
        self.paused_reason: str | None = None
        self.assigned: list[str] = list(self.queue_names)

    # --- lifecycle -----------------------------------------------------------------------------------------
    async def open(self, connection: AbstractRobustConnection) -> None:
        """Open this endpoint's channels (consume with per-consumer prefetch; publish with confirms)."""
        self._connection = connection
        if not self.ordered:
            # Per-consumer prefetch (quorum queues refuse global QoS) = the endpoint's concurrency.
            self._consume_channel = await connection.channel()
            await self._consume_channel.set_qos(prefetch_count=self.endpoint.concurrency)
            self._queues[self.queue_names[0]] = await self._consume_channel.get_queue(self.queue_names[0], ensure=True)
        self._publish_channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        self._delay_exchange = await self._publish_channel.get_exchange(
            names.delay_exchange(self.prefix, self.delay_levels - 1), ensure=False
        )
        self._dead_exchange = await self._publish_channel.get_exchange(names.dead_exchange(self.prefix), ensure=False)

    async def start_consuming(self) -> None:
        """Consume every assigned queue (all of this endpoint's unless partition claims assign fewer)."""
        self._accepting = True
        self.paused_reason = None
        # Resumed before a busy partition's deferred cancel ran: keep that consumer, it is wanted again.
        self._cancel_when_idle.clear()
        for name in self.assigned:
            await self._consume(name)

    async def _consume(self, name: str) -> None:
        if name in self._consumer_tags:
            return
        if self.ordered:
            # A partition gets a channel of its own, prefetch 1: nothing behind a held message is delivered.
            assert self._connection is not None
            channel = await self._connection.channel()
            await channel.set_qos(prefetch_count=1)
            self._partition_channels[name] = channel
            self._queues[name] = await channel.get_queue(name, ensure=True)
        tag = await self._queues[name].consume(self._on_message)
        self._consumer_tags[name] = tag
        self._tag_queue[tag] = name

    async def _cancel(self, name: str) -> None:
        """Stop consuming ``name``. A partition's channel is closed, which returns a held message to its head."""
        tag = self._consumer_tags.pop(name, None)
        if tag is None:
            return
        with contextlib.suppress(*CONNECTION_EXCEPTIONS, aiormq.exceptions.AMQPError):
            channel = self._partition_channels.pop(name, None)
            if channel is not None:
                await channel.close()
            else:
                await self._queues[name].cancel(tag)

    async def assign(self, name: str) -> None:
        """This worker now owns partition ``name``: consume it unless the endpoint is paused."""
        if name not in self.assigned:
            self.assigned.append(name)
        if self.paused_reason is None and self._accepting:
            await self._consume(name)

    async def _cancel_tag(self, tag: str) -> None:
        for name, current in list(self._consumer_tags.items()):
            if current == tag:
                await self._cancel(name)

    async def unassign(self, name: str) -> None:
        """Give partition ``name`` up: cancel its consumer (deliveries arriving after are handed back)."""
        if name in self.assigned:
            self.assigned.remove(name)
        await self._cancel(name)

    async def stop_consuming(self) -> None:
        """Cancel every consumer; messages already delivered but not started are handed back as they arrive.

        A partition whose message is still being delivered keeps its consumer until that message is settled:
        cancelling a single-active consumer makes the next one active at once, and it would overtake the
        message still held here.
        """
        self._accepting = False
        for name in list(self._consumer_tags):
            if self.ordered and self.busy(name):
                self._cancel_when_idle.add(self._consumer_tags[name])
            else:
                await self._cancel(name)

    async def pause(self, reason: str) -> None:
        """Stop consuming: messages wait in RabbitMQ, neither attempted nor dead-lettered."""
        await self.stop_consuming()
        self.paused_reason = reason

    async def resume(self) -> None:
        await self.start_consuming()

    def connected(self) -> bool:
        """Whether the delivery connection is up (a robust connection may be between two attempts)."""
        return self._connection is not None and self._connection.connected.is_set()

    def consuming(self) -> list[str]:
        return list(self._consumer_tags)

    def busy(self, queue_name: str) -> bool:
        """Whether a message of this queue is being delivered (or held for a retry in place) right now."""
        tag = self._consumer_tags.get(queue_name)
        return tag is not None and self._busy.get(tag, 0) > 0

    async def drain(self, grace: float) -> int:
        """Wait up to ``grace`` seconds for in-flight deliveries; hand the rest back. Returns how many were."""
        still: set[asyncio.Task[Any]] = set()
        pending = set(self._in_flight)
        if pending:
            _, still = await asyncio.wait(pending, timeout=grace)
            for task in still:
                task.cancel()
            if still:
                await asyncio.wait(still, timeout=5)
        if self._acks is not None:
            await self._acks.flush()  # before the channel closes, or finished deliveries would come back
        return len(still)

    async def close(self) -> None:
        for name in list(self._partition_channels):
            self._consumer_tags.pop(name, None)
            partition_channel = self._partition_channels.pop(name)
            if not partition_channel.is_closed:
                with contextlib.suppress(*CONNECTION_EXCEPTIONS):
                    await partition_channel.close()
        for channel in (self._consume_channel, self._publish_channel):
            if channel is not None and not channel.is_closed:
                with contextlib.suppress(*CONNECTION_EXCEPTIONS):
                    await channel.close()

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    # --- per message ---------------------------------------------------------------------------------------
    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        task = asyncio.current_task()
        assert task is not None
        if self._acks is not None:
            self._acks.track(message)
        if not self._accepting or message.consumer_tag not in self._consumer_tags.values():
            # Delivered after a pause or cancel began: back to RabbitMQ untouched (for a partition, by closing
            # its channel, which keeps the partition's order).
            await self._hand_back(message)
            return
        self._in_flight.add(task)
        tag = message.consumer_tag or ""
        self._busy[tag] = self._busy.get(tag, 0) + 1
        try:
            await self._deliver(message)
        except EndpointBlocked:
            # A gate refused the attempt (circuit open, paused, disabled): back to RabbitMQ, no attempt counted.
            await self._hand_back(message)
        except asyncio.CancelledError:
            await self._hand_back(message)
            raise
        except Exception:
            log.exception("unexpected error delivering a message of %s; handing it back", self.endpoint.name)
            await asyncio.sleep(MOVE_FAILURE_PAUSE)
            await self._hand_back(message)
        finally:
            self._in_flight.discard(task)
            self._busy[tag] -= 1
            if tag in self._cancel_when_idle and not self._busy[tag]:
                self._cancel_when_idle.discard(tag)
                await self._cancel_tag(tag)

    def _parse(self, message: AbstractIncomingMessage, now_ms: int) -> Delivery:
        return parse_delivery(
            message.body, message.message_id, message.headers or {}, now_ms, max_payload=self.delivery.max_payload
        )

    async def _attempt(self, delivery: Delivery) -> tuple[AttemptResult, Verdict, int]:
        gates = self.hooks.gates
        acquired: list[DeliveryGate] = []
        try:
            for gate in gates:
                await gate.acquire(self.endpoint.name)
                acquired.append(gate)
        except BaseException:
            # A later gate refused (or the task was cancelled): the earlier ones must not keep their slot.
            for gate in reversed(acquired):
                gate.release(self.endpoint.name, None, None)
            raise
        result: AttemptResult | None = None
        verdict: Verdict | None = None
        try:
            attempt_ms = int(time.time() * 1000)
            timestamp = attempt_ms // 1000
            headers = {
                "content-type": "application/json",
                "webhook-id": delivery.event_id,
                "webhook-timestamp": str(timestamp),
                "webhook-signature": signature_header(
                    self.endpoint.secret, delivery.event_id, timestamp, delivery.body
                ),
            }
            result = await self.sender.post(
                self.endpoint.url,
                delivery.body,
                headers,
                timeout=self.endpoint.timeout,
                connect_timeout=self.endpoint.connect_timeout,
            )
            if result.forbidden:
                verdict = Verdict(Outcome.DEAD, result.error or "address refused")
            else:
                verdict = classify(result.status, result.error, self._retry_statuses)
            return result, verdict, attempt_ms
        finally:
            for gate in reversed(gates):
                gate.release(self.endpoint.name, result, verdict)

    def _report(
        self, delivery: Delivery, attempt: int, result: AttemptResult, outcome: str, delay: float | None, at_ms: int
    ) -> None:
        """The attempt's log line, and the same facts to every observer (metrics, breaker)."""
        log_attempt(
            event_id=delivery.event_id,
            endpoint=self.endpoint.name,
            attempt=attempt,
            status=result.status,
            error=result.error,
            duration=result.duration,
            outcome=outcome,
            next_delay=delay,
        )
        if self.hooks.observers:
            record = AttemptRecord(
                self.endpoint.name,
                delivery.event_id,
                attempt,
                result.status,
                result.error,
                result.duration,
                outcome,
                delay,
                delivery.age(at_ms),
                parse_retry_after(result.retry_after),
            )
            for observer in self.hooks.observers:
                observer(record)

    def _parks_failures(self) -> bool:
        """Whether a retryable failure should leave the message untouched in RabbitMQ (the circuit opened)."""
        return any(check(self.endpoint.name) for check in self.hooks.park_failures)

    def _settled(self, how: Settlement) -> None:
        for callback in self.hooks.settlements:
            callback(self.endpoint.name, how)

    async def _deliver(self, message: AbstractIncomingMessage) -> None:
        """Read the message once; one that is not a Warren envelope goes to the DLQ at once with the reason."""
        try:
            delivery = self._parse(message, int(time.time() * 1000))
        except MalformedMessage as exc:
            await self._dead_letter(message, None, f"malformed message: {exc}")
            return
        if self.ordered:
            await self._deliver_in_place(message, delivery)
        else:
            await self._deliver_once(message, delivery)

    async def _deliver_once(self, message: AbstractIncomingMessage, delivery: Delivery) -> None:
        """Unordered: one attempt, then ack, or move the message into the delay chain or the DLQ."""
        result, verdict, attempt_ms = await self._attempt(delivery)
        attempt = delivery.attempts_made + 1
        if verdict.outcome is Outcome.DELIVERED:
            self._report(delivery, attempt, result, "delivered", None, attempt_ms)
            await self._ack(message)
        elif verdict.outcome is Outcome.DISABLE:
            self._report(delivery, attempt, result, "disabled", None, attempt_ms)
            await self._disable(verdict.reason)
            await self._hand_back(message)
        elif verdict.outcome is Outcome.DEAD:
            self._report(delivery, attempt, result, "dead", None, attempt_ms)
            await self._dead_letter(message, delivery, verdict.reason, result, attempt_ms)
        elif self._parks_failures():
            self._report(delivery, attempt, result, "parked", None, attempt_ms)
            await self._hand_back(message)
        else:
            step = next_step(
                attempt,
                delivery.age(attempt_ms),
                self.policy,
                retry_after=parse_retry_after(result.retry_after),
            )
            if isinstance(step, Exhausted):
                self._report(delivery, attempt, result, "exhausted", None, attempt_ms)
                await self._dead_letter(message, delivery, f"{step.reason}; last: {verdict.reason}", result, attempt_ms)
            else:
                self._report(delivery, attempt, result, "retry", step.delay, attempt_ms)
                await self._schedule_retry(message, delivery, step, result, attempt_ms)

    async def _deliver_in_place(self, message: AbstractIncomingMessage, delivery: Delivery) -> None:
        """Ordered: retry while holding the message unacked, so nothing behind it in the partition overtakes it.

        The hold is bounded by ``delivery.ordered_hold_limit``, below RabbitMQ's ``consumer_timeout`` (30 min by
        default): past it the message is handed back to the head of its partition (its headers cannot change
        while it is held) and this runner remembers its attempts, so that the next delivery of it continues the
        schedule. Another worker taking it over starts from the headers' count; ``max_age`` bounds it either way.
        """
        held_since = time.monotonic()
        attempts, first_ms, history = self._held_before.pop(
            delivery.event_id, (delivery.attempts_made, delivery.first_attempt_ms, list(delivery.history))
        )
        while True:
            current = Delivery(
                delivery.event_id,
                delivery.event_type,
                delivery.body,
                attempts,
                delivery.published_ms,
                first_ms,
                tuple(history[-5:]),
            )
            result, verdict, attempt_ms = await self._attempt(current)
            attempts += 1
            first_ms = first_ms or attempt_ms
            history.append(
                {
                    "at": attempt_ms,
                    "status": result.status_code,
                    "ms": round(result.duration * 1000),
                    **({"error": result.error[:300]} if result.error else {}),
                }
            )
            if verdict.outcome is Outcome.DELIVERED:
                self._report(current, attempts, result, "delivered", None, attempt_ms)
                await self._ack(message)
                return
            if verdict.outcome is Outcome.DISABLE:
                self._report(current, attempts, result, "disabled", None, attempt_ms)
                await self._disable(verdict.reason)
                await self._hand_back(message)
                return
            if verdict.outcome is Outcome.DEAD:
                self._report(current, attempts, result, "dead", None, attempt_ms)
                await self._dead_letter(message, current, verdict.reason, result, attempt_ms)
                return
            if self._parks_failures():
                self._report(current, attempts, result, "parked", None, attempt_ms)
                await self._hand_back(message)
                return
            step = next_step(
                attempts, current.age(attempt_ms), self.policy, retry_after=parse_retry_after(result.retry_after)
            )
            if isinstance(step, Exhausted):
                self._report(current, attempts, result, "exhausted", None, attempt_ms)
                await self._dead_letter(message, current, f"{step.reason}; last: {verdict.reason}", result, attempt_ms)
                return
            self._report(current, attempts, result, "retry-in-place", step.delay, attempt_ms)
            if time.monotonic() - held_since + step.delay > self.delivery.ordered_hold_limit:
                log.warning(
                    "hold limit reached; handing %s back to the head of its partition",
                    delivery.event_id,
                    extra={"endpoint": self.endpoint.name, "attempt": attempts},
                )
                await asyncio.sleep(step.delay)
                if len(self._held_before) >= HELD_MEMORY:
                    self._held_before.pop(next(iter(self._held_before)))
                self._held_before[delivery.event_id] = (attempts, first_ms, history)
                await self._hand_back(message)
                return
            await asyncio.sleep(step.delay)

    # --- settling -------------------------------------------------------------------------------------------
    async def _ack(self, message: AbstractIncomingMessage, how: Settlement = "acked") -> None:
        try:
            if self._acks is not None:
                await self._acks.ack(message)
            else:
                await message.ack()
            self._settled(how)
        except CONNECTION_EXCEPTIONS:
            # The channel is gone; RabbitMQ redelivers the message (a duplicate the receiver drops by webhook-id).
            log.warning("ack lost with the channel; the message will be delivered again", exc_info=False)

    async def _hand_back(self, message: AbstractIncomingMessage) -> None:
        """Give the message back to RabbitMQ unsettled by us: it will be delivered again.

        A work queue message is nacked with requeue (a quorum queue puts it at the back; order does not matter
        there). A partition's message must go back to the *head*, so its channel is closed instead, and the
        partition consumed again on a fresh channel if this worker still serves it.
        """
        if self.ordered:
            name = self._tag_queue.get(message.consumer_tag or "")
            if name is not None and self._consumer_tags.get(name) == message.consumer_tag:
                await self._cancel(name)
                self._settled("handed-back")
                if self._accepting and self.paused_reason is None and name in self.assigned:
                    await self._consume(name)
            return
        with contextlib.suppress(*CONNECTION_EXCEPTIONS, aiormq.exceptions.AMQPError):
            await message.nack(requeue=True)
            if self._acks is not None:
                self._acks.settled(message)
            self._settled("handed-back")

    async def _publish_then_ack(
        self,
        message: AbstractIncomingMessage,
        exchange: AbstractExchange | None,
        routing_key: str,
        headers: dict[str, Any],
        how: Settlement,
    ) -> None:
        assert exchange is not None
        outgoing = wire.onward(message, headers)
        try:
            await exchange.publish(outgoing, routing_key=routing_key, mandatory=True)
        except MOVE_FAILURES as exc:
            log.error(
                "could not move %s to %s (%s); it stays in its queue and will be tried again",
                message.message_id,
                "the DLQ" if how == "dead-lettered" else "the delay chain",
                describe(exc),
                extra={"endpoint": self.endpoint.name},
            )
            await asyncio.sleep(MOVE_FAILURE_PAUSE)
            await self._hand_back(message)
            return
        await self._ack(message, how)

    async def _schedule_retry(
        self,
        message: AbstractIncomingMessage,
        delivery: Delivery,
        step: RetryIn,
        result: AttemptResult,
        attempt_ms: int,
    ) -> None:
        headers = retry_headers(
            message.headers or {},
            delivery,
            attempt_ms=attempt_ms,
            status=result.status_code,
            error=result.error or (f"HTTP {result.status}" if result.status else None),
            duration=result.duration,
        )
        key = delay_routing_key(step.delay, self.delay_levels, self.queue_names[0])
        await self._publish_then_ack(message, self._delay_exchange, key, headers, "retry-scheduled")

    async def _dead_letter(
        self,
        message: AbstractIncomingMessage,
        delivery: Delivery | None,
        reason: str,
        result: AttemptResult | None = None,
        attempt_ms: int | None = None,
    ) -> None:
        headers = dead_headers(
            message.headers or {},
            delivery,
            endpoint=self.endpoint.name,
            reason=reason,
            attempt_ms=attempt_ms,
            status=result.status_code if result else 0,
            error=(result.error or (f"HTTP {result.status}" if result.status else None)) if result else reason,
            duration=result.duration if result else 0.0,
            response=result.response_excerpt if result else "",
        )
        if result is None:
            log.warning("dead-lettering %s: %s", message.message_id, reason, extra={"endpoint": self.endpoint.name})
        await self._publish_then_ack(message, self._dead_exchange, self.endpoint.name, headers, "dead-lettered")

    async def _disable(self, reason: str) -> None:
        if self.paused_reason is None:
            log.error("endpoint %s disabled: %s", self.endpoint.name, reason, extra={"endpoint": self.endpoint.name})
            await self.pause(f"disabled: {reason}")
            for callback in self.hooks.on_disable:
                outcome = callback(self.endpoint.name, reason)
                if outcome is not None:
                    await outcome
