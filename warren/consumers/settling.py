"""Settling a message exactly once: ack (batched), move it into the delay chain or the DLQ, or hand it back.

One rule: a message is acked only after its fate is safe elsewhere — delivered, or its next attempt confirmed
into the delay chain, or its dead letter confirmed into the DLQ. A move that fails leaves it unacked and
hands it back after a pause, so RabbitMQ delivers it again (at-least-once, never at-most-once).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiormq.exceptions
from aio_pika.abc import AbstractIncomingMessage, AbstractRobustConnection

from warren.broker import wire
from warren.broker.amqp.ack_batcher import AckBatcher
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.broker.amqp.connection import CONNECTION_EXCEPTIONS
from warren.consumers.decision import Ack, DeadLetter, HandBack, Retry, bounded_hand_back
from warren.consumers.delivery import Delivery, dead_headers, delivery_count, retry_headers
from warren.consumers.hooks import Settlement
from warren.core.errors import PublishError, describe
from warren.topology import names
from warren.topology.delays import delay_routing_key, reach
from warren.transport.base import SendResult

__all__ = ["MOVE_FAILURE_PAUSE", "Settler"]

log = logging.getLogger("warren.worker")

MOVE_FAILURE_PAUSE = 1.0  # seconds before a message whose move failed is handed back to RabbitMQ


class Settler:
    """Settles one endpoint's messages. ``return_partition`` hands an ordered message back to its head."""

    def __init__(
        self,
        endpoint: str,
        *,
        ordered: bool,
        delay_levels: int,
        return_queue: str,
        return_partition: Callable[[AbstractIncomingMessage], Awaitable[None]],
        settled: Callable[[Settlement], None],
        clock: Callable[[], float],
        partition_acks: Callable[[AbstractIncomingMessage], AckBatcher | None] | None = None,
        dead_key: str | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.ordered = ordered
        self.delay_levels = delay_levels
        self.return_queue = return_queue  # where the delay chain brings a retry back (the work queue)
        self._return_partition = return_partition
        self._settled = settled
        self._clock = clock
        # Acks are batched per consumer channel: the work queue's here; each partition's in its lanes, each
        # shared lane's in its lane (``partition_acks`` finds them; None when the channel is gone: ack on its own).
        self.acks: AckBatcher | None = None if ordered or partition_acks is not None else AckBatcher()
        self.dead_key = dead_key or endpoint  # the DLQ's key on the dead exchange: the endpoint's, or its lane's
        self._partition_acks = partition_acks
        self._channel: ConfirmChannel | None = None
        self._owned = True  # the channel is this settler's own, closed with it
        self._delay_exchange = ""
        self._dead_exchange = ""

    async def open(self, connection: AbstractRobustConnection, prefix: str) -> None:
        """The publishing channel, with confirms and returns raised, and the two exchanges it moves into."""
        self.share(await ConfirmChannel(connection).open(), prefix)
        self._owned = True

    def share(self, channel: ConfirmChannel, prefix: str) -> None:
        """Publish on ``channel``, which other endpoints publish on too and ``close`` leaves open: the lane
        endpoints' (warren/consumers/lane_stage.py; a channel each stopped a worker at RabbitMQ's channel_max,
        2047, near 2,000 of them)."""
        self._channel, self._owned = channel, False
        self._delay_exchange = names.delay_exchange(prefix, self.delay_levels - 1)
        self._dead_exchange = names.dead_exchange(prefix)

    async def close(self) -> None:
        if self._channel is not None and self._owned:
            await self._channel.close()

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _batcher(self, message: AbstractIncomingMessage) -> AckBatcher | None:
        return self.acks if self._partition_acks is None else self._partition_acks(message)

    async def ack(self, message: AbstractIncomingMessage, how: Settlement = "acked") -> None:
        try:
            batcher = self._batcher(message)
            if batcher is not None:
                await batcher.ack(message)
            else:
                await message.ack()
            self._settled(how)
        except CONNECTION_EXCEPTIONS:
            # The channel is gone; RabbitMQ redelivers the message (a duplicate the receiver drops by webhook-id).
            log.warning("ack lost with the channel; the message will be delivered again", exc_info=False)

    async def discard(self, message: AbstractIncomingMessage, why: str) -> None:
        """Ack without delivering or dead-lettering: logged with ``why``, counted as ``discarded``."""
        log.warning("discarded %s: %s", message.message_id, why, extra={"endpoint": self.endpoint})
        await self.ack(message, "discarded")

    async def hand_back(self, message: AbstractIncomingMessage) -> None:
        """Give the message back to RabbitMQ unsettled by us: it will be delivered again.

        A work queue message is nacked with requeue (order does not matter there). A partition's message must
        go back to the *head*, which ``return_partition`` does by closing the partition's channel.
        """
        if self.ordered:
            await self._return_partition(message)
            return
        with contextlib.suppress(*CONNECTION_EXCEPTIONS, aiormq.exceptions.AMQPError):
            await message.nack(requeue=True)
            if (batcher := self._batcher(message)) is not None:
                batcher.settled(message)
            self._settled("handed-back")

    async def retry(
        self, message: AbstractIncomingMessage, delivery: Delivery, delay: float, result: SendResult, attempt_ms: int
    ) -> None:
        """Move the message into the delay chain, back to ``return_queue`` after ``delay`` seconds."""
        headers = retry_headers(
            message.headers or {},
            delivery,
            attempt_ms=attempt_ms,
            status=result.status_code,
            error=result.failure,
            duration=result.duration,
        )
        key = delay_routing_key(delay, self.delay_levels, self.return_queue)
        await self._move(message, self._delay_exchange, key, headers, "retry-scheduled")

    async def dead_letter(
        self,
        message: AbstractIncomingMessage,
        delivery: Delivery | None,
        reason: str,
        result: SendResult | None = None,
        attempt_ms: int | None = None,
    ) -> None:
        """Move the message to the endpoint's DLQ with ``reason`` and its story in the headers."""
        headers = dead_headers(
            message.headers or {},
            delivery,
            endpoint=self.endpoint,
            reason=reason,
            attempt_ms=attempt_ms,
            status=result.status_code if result else 0,
            error=result.failure if result else reason,
            duration=result.duration if result else 0.0,
            response=result.excerpt if result else "",
            dead_ms=self.now_ms(),
        )
        if result is None:
            log.warning("dead-lettering %s: %s", message.message_id, reason, extra={"endpoint": self.endpoint})
        await self._move(message, self._dead_exchange, self.dead_key, headers, "dead-lettered")

    async def park(
        self,
        message: AbstractIncomingMessage,
        delay: float,
        extra: Mapping[str, Any] | None = None,
        *,
        return_queue: str | None = None,
        until_ms: int | None = None,
    ) -> None:
        """Move the message through the delay chain back to ``return_queue`` untouched: no attempt is counted.

        A shared lane's way of letting its head move past an endpoint that holds more than its share. ``extra``
        headers are added; ``return_queue`` replaces the settler's own. A park longer than the chain reaches
        (an open circuit's wait for a probe minutes away) comes back early: it carries when it ends
        (``warren-park-until``, ``until_ms`` when that is already known), and the lane parks it again for the rest.
        """
        headers = {**wire.untouched_headers(message), **(extra or {})}
        headers.pop(wire.H_PARK_UNTIL, None)
        if delay > reach(self.delay_levels):
            headers[wire.H_PARK_UNTIL] = until_ms if until_ms is not None else self.now_ms() + round(delay * 1000)
        key = delay_routing_key(delay, self.delay_levels, return_queue or self.return_queue)
        await self._move(message, self._delay_exchange, key, headers, "parked")

    async def forward(self, message: AbstractIncomingMessage, exchange: str, routing_key: str | None = None) -> None:
        """Move the message untouched (its attempt count kept) into ``exchange``, confirmed, then ack it: a lane
        endpoint's copy following the endpoint to the queues of its own it was promoted to (or an ordered lane
        endpoint's, replayed into its lane, to its key's ordered lane: ``routing_key``)."""
        key = message.routing_key or "" if routing_key is None else routing_key
        await self._move(message, exchange, key, wire.untouched_headers(message), "parked")

    async def _move(
        self,
        message: AbstractIncomingMessage,
        exchange: str,
        routing_key: str,
        headers: Mapping[str, Any],
        how: Settlement,
    ) -> None:
        assert self._channel is not None, "Settler.open() first"
        where = "the DLQ" if how == "dead-lettered" else "the delay chain"
        try:
            await self._channel.publish(
                exchange, wire.onward(message, headers), routing_key, what=f"{message.message_id} into {where}"
            )
        except PublishError as exc:
            log.error(
                "could not move %s to %s (%s); it stays in its queue and will be tried again",
                message.message_id,
                where,
                describe(exc),
                extra={"endpoint": self.endpoint},
            )
            await asyncio.sleep(MOVE_FAILURE_PAUSE)
            await self.hand_back(message)
            return
        await self.ack(message, how)

    async def carry_out(
        self,
        message: AbstractIncomingMessage,
        delivery: Delivery,
        decision: Ack | Retry | DeadLetter | HandBack,
        result: SendResult,
        attempt_ms: int,
    ) -> None:
        """Carry a decision about the message out (consumers/decision.py): ack, retry, dead-letter, or hand back
        after its pause."""
        if isinstance(decision, Ack):
            await self.ack(message)
        elif isinstance(decision, Retry):
            await self.retry(message, delivery, decision.delay, result, attempt_ms)
        elif isinstance(decision, DeadLetter):
            await self.dead_letter(message, delivery, decision.reason, result, attempt_ms)
        else:
            await asyncio.sleep(decision.after)
            await self.hand_back(message)

    async def give_back(
        self,
        message: AbstractIncomingMessage,
        delivery: Delivery | None,
        why: HandBack,
        max_handbacks: int,
        waits: int = 0,
    ) -> None:
        """Hand the message back, unless it has been handed back ``max_handbacks`` times: then the DLQ. ``waits``
        of its returns were no hand-backs (an ordered message's wait for its next attempt: held_attempts.py)."""
        handbacks = max(0, delivery_count(message.headers or {}, message.redelivered) - waits)
        decision = bounded_hand_back(why, handbacks, max_handbacks)
        if isinstance(decision, DeadLetter):
            await self.dead_letter(message, delivery, decision.reason)
        else:
            await self.hand_back(message)
