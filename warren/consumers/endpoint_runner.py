"""Delivery for one endpoint: consume its queues, attempt each message, and settle it exactly once.

The parts, each in its own module: this one keeps the consumers and channels and runs each message through an
attempt (``attempting``: the gates and the transport); ``decision`` decides what the attempt means for the
message (pure, the same for ordered and unordered endpoints); ``settling`` acks, moves into the delay chain or
the DLQ, or hands back. Any unexpected exception while handling a message counts as a failed attempt, so it is
retried within the normal budget and then dead-lettered with the exception's text; and every hand-back is
bounded by ``delivery.max_handbacks`` (docs/architecture.md).

An ordered message is retried holding it unacked in its key's lane (``key_lanes``), so that no later event of
the key overtakes it; the lane holds only this key, the partition's other keys flow. Every hold is bounded by
``delivery.ordered_hold_limit``, counted from the delivery (RabbitMQ's ``consumer_timeout``, 30 min by default,
counts from there): when the next retry would pass it, the whole partition is handed back (its unsettled
messages return to its head in order) and the runner remembers the attempts and when the next one is due
(``held_attempts``), so that the next delivery of the message continues the schedule. Another worker taking
it over starts from the headers' count; ``max_age`` bounds it either way. A message parked by the circuit, or
held by a gate, keeps the attempts it spent in place the same way (the parking one is not spent).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from functools import partial

from aio_pika.abc import AbstractIncomingMessage, AbstractRobustConnection

from warren.broker.amqp.ack_batcher import AckBatcher
from warren.consumers.admission import refused
from warren.consumers.attempting import Attempter
from warren.consumers.consuming import EndpointConsumers
from warren.consumers.decision import (
    ACK,
    Context,
    Decision,
    Disable,
    HandBack,
    Retry,
    decide,
)
from warren.consumers.delivery import (
    Delivery,
    MalformedMessage,
    delivery_count,
    history_record,
    parse_delivery,
)
from warren.consumers.held_attempts import Held, HeldAttempts
from warren.consumers.hooks import DeliveryHooks, EndpointBlocked
from warren.consumers.key_lanes import PartitionLanes
from warren.consumers.settling import MOVE_FAILURE_PAUSE, Settler
from warren.topology.config import DeliverySettings, Endpoint, RetryPolicy
from warren.transport.base import Outcome, SendResult, Transport, failed_result

__all__ = ["Clock", "EndpointRunner"]

log = logging.getLogger("warren.worker")

Clock = Callable[[], float]  # seconds since the epoch: the wall clock, injected so that tests can set it


class EndpointRunner(EndpointConsumers):
    """Consumes one endpoint's work queue (competing consumers) or partition queues (single active consumer)."""

    def __init__(
        self,
        endpoint: Endpoint,
        policy: RetryPolicy,
        delivery: DeliverySettings,
        *,
        queues: Sequence[str],
        prefix: str,
        delay_levels: int,
        transport: Transport,
        hooks: DeliveryHooks | None = None,
        clock: Clock = time.time,
        channel_acks: Callable[[AbstractIncomingMessage], AckBatcher | None] | None = None,  # a lane's (lanes.py)
    ) -> None:
        super().__init__(endpoint, queues)
        self.policy = policy
        self.delivery = delivery
        self.prefix = prefix
        self.transport = transport
        self.hooks = hooks or DeliveryHooks()
        self.clock = clock
        self.settler = Settler(
            endpoint.name,
            ordered=self.ordered,
            delay_levels=delay_levels,
            return_queue=self.queue_names[0],
            return_partition=self._return_partition,
            settled=lambda how: self.hooks.settled(endpoint.name, how),
            clock=clock,
            partition_acks=self._partition_acks if self.ordered else channel_acks,
        )
        self.attempter = Attempter(endpoint, transport, self.hooks, self.settler.now_ms)
        # Ordered messages that stopped being held mid-schedule (the hold limit, a hand-back).
        self.held = HeldAttempts()

    # --- lifecycle -----------------------------------------------------------------------------------------
    async def open(self, connection: AbstractRobustConnection) -> None:
        """Open this endpoint's channels (consume with per-consumer prefetch; publish with confirms)."""
        await self.open_consuming(connection)
        await self.settler.open(connection, self.prefix)

    async def drain(self, grace: float) -> int:
        """Wait up to ``grace`` seconds for in-flight deliveries; hand the rest back. Returns how many were."""
        still = await self.wait_in_flight(grace)
        if self.settler.acks is not None:
            await self.settler.acks.flush()  # before the channel closes, or finished deliveries would come back
        await self.flush_partition_acks()
        return still

    async def close(self) -> None:
        if self.settler.acks is not None:
            # Its last acks apply before the work queue's channel closes (SETTLE_PAUSE, warren/broker/amqp/channels.py):
            # an endpoint reconfigured or removed live, or a worker stopping, would see them delivered again.
            await self.settler.acks.close()
        await self.close_consuming()
        await self.settler.close()

    # --- per message ---------------------------------------------------------------------------------------
    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        task = asyncio.current_task()
        assert task is not None
        if self.settler.acks is not None:
            self.settler.acks.track(message)
        if not self.accepts(message):
            # Delivered after a pause or cancel began: back to RabbitMQ untouched (for a partition, by closing
            # its channel, which keeps the partition's order).
            await self._give_back(message, None, HandBack("delivered while the worker was not consuming"))
            return
        tag = self.began(message, task)
        try:
            await self._deliver(message)
        except EndpointBlocked as exc:
            # A gate refused the attempt (circuit open, paused, disabled): back to RabbitMQ, no attempt counted.
            await self._give_back(message, None, HandBack(f"the endpoint is held: {exc or 'blocked'}"))
        except asyncio.CancelledError:
            await self.settler.hand_back(message)
            raise
        except Exception as exc:
            await self._failed_handling(message, exc)
        finally:
            self.ended(tag, task)

    def _unstarted(self, message: AbstractIncomingMessage) -> None:
        # Its return (x-delivery-count + 1) is no hand-back of its own: not counted against delivery.max_handbacks.
        self.held.not_started(message.message_id)

    def _parse(self, message: AbstractIncomingMessage) -> Delivery:
        return parse_delivery(
            message.body,
            message.message_id,
            message.headers or {},
            self.settler.now_ms(),
            max_payload=self.delivery.max_payload,
        )

    async def _deliver(self, message: AbstractIncomingMessage) -> None:
        """Read the message once; one that is not a Warren envelope goes to the DLQ at once with the reason."""
        try:
            delivery = self._parse(message)
        except MalformedMessage as exc:
            await self.settler.dead_letter(message, None, f"malformed message: {exc}")
            return
        if await refused(self.endpoint, self.settler, message, delivery):  # another tenant's, or filtered out
            return
        if self.ordered:
            await self._deliver_in_place(message, delivery)
        else:
            await self._deliver_once(message, delivery)

    def _context(
        self,
        result: SendResult,
        attempt: int,
        delivery: Delivery,
        at_ms: int,
        message: AbstractIncomingMessage,
        held: float = 0.0,
    ) -> Context:
        return Context(
            attempt=attempt,
            age=delivery.age(at_ms),
            policy=self.policy,
            ordered=self.ordered,
            parks=result.outcome is Outcome.RETRY and self.hooks.parks(self.endpoint.name),
            held=held,
            hold_limit=self.delivery.ordered_hold_limit,
            # Its returns, but those that only waited for this attempt (held_attempts.py): no hand-backs.
            handbacks=max(
                0, delivery_count(message.headers or {}, message.redelivered) - self.held.waits(delivery.event_id)
            ),
            max_handbacks=self.delivery.max_handbacks,
        )

    async def _deliver_once(self, message: AbstractIncomingMessage, delivery: Delivery) -> None:
        """Unordered: one attempt, then ack, or move the message into the delay chain or the DLQ."""
        result, attempt_ms = await self.attempter.attempt(delivery)
        attempt = delivery.attempts_made + 1
        decision = decide(result, partial(self._context, result, attempt, delivery, attempt_ms, message))
        self.attempter.report(delivery, attempt, result, decision, attempt_ms)
        if decision is ACK:  # delivered: straight to the batched ack (what carry_out would do)
            await self.settler.ack(message)
            return
        await self._settle(message, delivery, decision, result, attempt_ms)

    async def _deliver_in_place(self, message: AbstractIncomingMessage, delivery: Delivery) -> None:
        """Ordered: retry in place, holding the message in its key's lane (the module's docstring says how)."""
        lanes = self.lanes_of(message)
        if lanes is None:  # its channel is gone: RabbitMQ has it back already
            return
        held_since = lanes.held_since(message)
        attempts, first_ms, history = self.held.recall(delivery)
        if not await self._wait_due(message, delivery, lanes, held_since):
            return
        while True:
            current = delivery.continued(attempts, first_ms, history)
            try:
                result, attempt_ms = await self.attempter.attempt(current)
            except EndpointBlocked:
                # Held (the circuit opened on an attempt of this lane or another, a pause): the attempts spent in
                # place are in no header, so remember them, as an unordered message's headers keep its count.
                self.held.keep_spent(delivery, (attempts, first_ms, history))
                raise
            attempts, first_ms = attempts + 1, first_ms or attempt_ms
            held = time.monotonic() - held_since
            decision = decide(result, partial(self._context, result, attempts, current, attempt_ms, message, held))
            try:
                self.attempter.report(current, attempts, result, decision, attempt_ms)
            except Exception as exc:  # an observer failed: this attempt counts as failed, and it continues
                await self._failed_handling(message, exc, (current.attempts_made, first_ms, history[:]))
                return
            if decision is ACK:  # delivered: straight to its partition's batched ack (what carry_out would do)
                self.held.forget(delivery.event_id)
                await self.settler.ack(message)
                return
            history.append(history_record(attempt_ms, result.status_code, result.error, result.duration))
            if isinstance(decision, Retry) or (isinstance(decision, HandBack) and decision.remember):
                delay = decision.delay if isinstance(decision, Retry) else decision.after
                due = time.monotonic() + delay
                if isinstance(decision, Retry) and not await lanes.wait(delay):
                    continue
                # The hold limit, or the partition is being handed back: keep the count and the due time.
                self.held.remember(delivery.event_id, (attempts, first_ms, history), due=due)
                if isinstance(decision, HandBack):
                    log.warning(
                        "hold limit reached; handing %s back to the head of its partition (next attempt in %.1fs)",
                        delivery.event_id,
                        delay,
                        extra={"endpoint": self.endpoint.name, "attempt": attempts},
                    )
                    await self.settler.hand_back(message)
                return
            if isinstance(decision, HandBack):  # parked by the circuit: this attempt is not spent, those before are
                self.held.keep_spent(delivery, (attempts - 1, first_ms, history[:-1]))
            else:
                self.held.forget(delivery.event_id)
            await self._settle(message, current, decision, result, attempt_ms)
            return

    async def _wait_due(
        self, message: AbstractIncomingMessage, delivery: Delivery, lanes: PartitionLanes, held_since: float
    ) -> bool:
        """Wait for a remembered message's next attempt, within the hold limit. False: do not attempt now."""
        due = self.held.due(delivery.event_id)
        if due is None:
            return True
        budget = self.delivery.ordered_hold_limit - (time.monotonic() - held_since)
        if await lanes.wait(min(due - time.monotonic(), budget)):
            return False  # the partition is being handed back; the memory stays
        if time.monotonic() + 0.001 >= due:
            return True
        # A delay past the hold limit: back to the head to wait on. Not an attempt's hand-back, so it is not counted
        # against delivery.max_handbacks (the due time bounds these returns); the hand-back is the settler's own.
        self.held.waited(delivery.event_id)
        await self.settler.hand_back(message)
        return False

    # --- settling -------------------------------------------------------------------------------------------
    async def _settle(
        self,
        message: AbstractIncomingMessage,
        delivery: Delivery,
        decision: Decision,
        result: SendResult,
        attempt_ms: int,
    ) -> None:
        """Carry a decision out: the settler's, but for disabling the endpoint, which is the runner's."""
        if isinstance(decision, Disable):
            await self._disable(decision.reason)
            decision = HandBack(f"the endpoint is disabled: {decision.reason}")
            await self._give_back(message, delivery, decision)
            return
        await self.settler.carry_out(message, delivery, decision, result, attempt_ms)

    async def _give_back(self, message: AbstractIncomingMessage, delivery: Delivery | None, why: HandBack) -> None:
        waits = self.held.waits(delivery.event_id) if delivery is not None else 0
        await self.settler.give_back(message, delivery, why, self.delivery.max_handbacks, waits)

    def _partition_acks(self, message: AbstractIncomingMessage) -> AckBatcher | None:
        lanes = self.lanes_of(message)
        return lanes.acks if lanes is not None else None

    async def _return_partition(self, message: AbstractIncomingMessage) -> None:
        if self.return_partition(message):
            self.hooks.settled(self.endpoint.name, "handed-back")

    async def _failed_handling(
        self, message: AbstractIncomingMessage, exc: Exception, held: Held | None = None
    ) -> None:
        """An exception escaped the handling (an observer, the settling): count it as a failed attempt.

        ``held`` is an ordered message's count before the attempt that failed so (its headers do not have it).
        """
        log.warning("handling a message of %s failed", self.endpoint.name, exc_info=exc)
        try:
            delivery = self._parse(message)
        except Exception as parse_exc:  # MalformedMessage was dead-lettered before; this is anything else
            await self.settler.dead_letter(message, None, f"cannot read the message: {failed_result(parse_exc).reason}")
            return
        try:
            await self._count_failure(message, delivery, failed_result(exc), held)
        except asyncio.CancelledError:
            raise
        except Exception:
            # Even settling the failure failed (the broker, most likely): hand back after a pause, bounded.
            log.exception("could not settle a failed message of %s; handing it back", self.endpoint.name)
            await asyncio.sleep(MOVE_FAILURE_PAUSE)
            await self._give_back(message, delivery, HandBack(f"failed: {failed_result(exc).reason}"))

    async def _count_failure(
        self, message: AbstractIncomingMessage, delivery: Delivery, result: SendResult, held: Held | None
    ) -> None:
        attempts, first_ms, history = held if held is not None else self.held.recall(delivery)
        attempt_ms = self.settler.now_ms()
        current = delivery.continued(attempts, first_ms, history)
        decision = decide(result, self._context(result, attempts + 1, current, attempt_ms, message))
        # Observers are not told: one of them may be what failed.
        self.attempter.report(current, attempts + 1, result, decision, attempt_ms, observers=False)
        if self.ordered and isinstance(decision, Retry | HandBack):
            # A partition's message cannot go through the delay chain: remember the attempt and when the next is
            # due, and hand the partition back (its next delivery waits for that).
            history = [*history, history_record(attempt_ms, 0, result.error, 0.0)]
            delay = decision.delay if isinstance(decision, Retry) else decision.after
            self.held.remember(
                delivery.event_id, (attempts + 1, first_ms or attempt_ms, history), due=time.monotonic() + delay
            )
            await self._give_back(message, current, HandBack(f"failed: {result.reason}"))
            return
        await self._settle(message, current, decision, result, attempt_ms)

    async def _disable(self, reason: str) -> None:
        if self.paused_reason is None:
            log.error("endpoint %s disabled: %s", self.endpoint.name, reason, extra={"endpoint": self.endpoint.name})
            await self.pause(f"disabled: {reason}")
            for callback in self.hooks.on_disable:
                outcome = callback(self.endpoint.name, reason)
                if outcome is not None:
                    await outcome
