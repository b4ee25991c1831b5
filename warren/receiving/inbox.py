"""``warren inbox``: consume the inbound queues and call each source's handler exactly once per event.

Per message: the idempotent consumer runs the handler inside the store's transaction (duplicates and
stale sequences are acknowledged without calling it). A handler that raises is retried through the delay
chain — the message is republished (confirmed) with ``warren-attempt`` raised and RabbitMQ's ``x-death``
headers stripped, then acknowledged — and dead-lettered once the retry policy is exhausted. A message is
acknowledged only after its outcome is durable: committed in the store, or republished and confirmed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aio_pika import Message
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage, AbstractQueue

from warren.broker import wire
from warren.broker.amqp.channels import close_channel
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.broker.amqp.connection import connect
from warren.broker.amqp.probe import existing_queue
from warren.core.errors import PublishError
from warren.receiving.errors import NonRetryable
from warren.receiving.handlers import Handler, load_handler
from warren.receiving.idempotency import IdempotentConsumer, Outcome
from warren.receiving.messages import InboundEvent, decode_inbound
from warren.receiving.retrying import dead_letter_route, failure_step, retry_route
from warren.receiving.stores.base import Store, Transaction
from warren.topology import names
from warren.topology.backoff import RetryIn
from warren.topology.config import ConfigError, InboundSource, WarrenConfig
from warren.topology.planner import delay_levels

__all__ = ["Inbox"]

log = logging.getLogger("warren.inbox")

_ERROR_TEXT_LIMIT = 500


@dataclass
class _Source:
    config: InboundSource
    queue_name: str
    handler: Handler
    consumer: IdempotentConsumer
    queue: AbstractQueue | None = None
    tag: str | None = None


def _now_ms(clock: Callable[[], float]) -> int:
    return int(clock() * 1000)


class Inbox:
    """Consumes every configured inbound source (or the ones named) until stopped.

    ``handlers`` maps source names to callables and replaces the configured ``module:function`` (tests,
    embedding); ``stats`` counts outcomes (applied, duplicate, stale, retried, dead).
    """

    def __init__(
        self,
        config: WarrenConfig,
        store: Store,
        *,
        sources: list[str] | None = None,
        handlers: Mapping[str, Handler] | None = None,
        connection: AbstractConnection | None = None,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.stats: Counter[str] = Counter()
        self._connection = connection
        self._owns_connection = connection is None
        self._clock = clock
        self._rng = rng
        self._levels = delay_levels(config)
        self._sources: list[_Source] = []
        self._channels: list[AbstractChannel] = []
        self._publish_channel: ConfirmChannel | None = None
        self._in_flight: set[asyncio.Task[Any]] = set()
        self._purger: asyncio.Task[None] | None = None
        chosen = set(sources) if sources else None
        for source in config.inbound:
            if chosen is not None and source.name not in chosen:
                continue
            handler = (handlers or {}).get(source.name) or load_handler(source.handler)
            consumer = IdempotentConsumer(store, source.name, retention=config.inbox.retention, clock=clock)
            self._sources.append(
                _Source(source, names.inbound_queue(config.broker.prefix, source.name), handler, consumer)
            )
        if chosen is not None and (unknown := chosen - {s.config.name for s in self._sources}):
            raise ConfigError("sources", [f"no inbound source named {', '.join(sorted(unknown))} in the configuration"])

    # --- lifecycle ---------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Open the store, connect, and start consuming; TopologyError if an inbound queue is missing."""
        try:
            await self._start()
        except BaseException:
            await self.stop(grace=0)
            raise

    async def _start(self) -> None:
        await self.store.open()
        if self._connection is None:
            self._connection = await connect(self.config.broker.urls, name="warren-inbox")
        self._publish_channel = await ConfirmChannel(self._connection).open()
        for source in self._sources:
            channel = await self._connection.channel()
            self._channels.append(channel)
            await channel.set_qos(prefetch_count=self.config.inbox.concurrency)
            source.queue = await existing_queue(channel, source.queue_name, "inbound queue")
            source.tag = await source.queue.consume(self._callback(source))
        self._purger = asyncio.create_task(self._purge_loop(), name="warren-inbox-purge")
        log.info("inbox consuming %s", ", ".join(s.queue_name for s in self._sources) or "nothing")

    async def stop(self, grace: float = 10.0) -> None:
        """Stop taking messages, let the ones in hand finish (up to ``grace`` seconds), then close."""
        for source in self._sources:
            if source.queue is not None and source.tag is not None:
                with contextlib.suppress(Exception):
                    await source.queue.cancel(source.tag)
        if self._in_flight:
            await asyncio.wait(set(self._in_flight), timeout=grace)
        if self._purger is not None:
            self._purger.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._purger
        for channel in self._channels:
            with contextlib.suppress(Exception):
                await close_channel(channel)
        if self._publish_channel is not None:
            await self._publish_channel.close()
        self._channels.clear()
        if self._owns_connection and self._connection is not None:
            await self._connection.close()
            self._connection = None
        await self.store.close()

    async def __aenter__(self) -> Inbox:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- one message --------------------------------------------------------------------------------------
    def _callback(self, source: _Source) -> Callable[[AbstractIncomingMessage], Any]:
        async def on_message(message: AbstractIncomingMessage) -> None:
            task = asyncio.current_task()
            if task is not None:
                self._in_flight.add(task)
            try:
                await self.handle(source, message)
            finally:
                if task is not None:
                    self._in_flight.discard(task)

        return on_message

    async def handle(self, source: _Source, message: AbstractIncomingMessage) -> None:
        event = decode_inbound(message, source.config.name)
        if not event.id:
            # Without an id there is nothing to deduplicate on: every such message would be "the same event".
            await self._failed(source, message, event, NonRetryable("the message has no message_id (the event id)"))
            return

        def effect(tx: Transaction) -> Any:
            return source.handler(event, tx)

        try:
            outcome = await source.consumer.process(event.id, effect, key=event.key, sequence=event.sequence)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self._failed(source, message, event, exc)
            return
        await message.ack()
        self.stats[outcome.value] += 1
        level = logging.DEBUG if outcome is Outcome.APPLIED else logging.INFO
        log.log(level, "inbound %s: event %s %s", source.config.name, event.id, outcome.value)

    async def _failed(
        self, source: _Source, message: AbstractIncomingMessage, event: InboundEvent, error: Exception
    ) -> None:
        headers = dict(message.headers or {})
        replayed = bool(headers.get(wire.H_REPLAYED))
        now_ms = _now_ms(self._clock)
        first_ms = headers.get(wire.H_FIRST_ATTEMPT)
        if replayed or not isinstance(first_ms, int):
            first_ms = now_ms
        attempts = event.attempt + 1
        policy = source.config.retry_policy(self.config.retry)
        step = failure_step(attempts, (now_ms - first_ms) / 1000, policy, error, self._rng)
        for name in (*wire.RABBITMQ_DEATH_HEADERS, wire.H_REPLAYED):
            headers.pop(name, None)
        headers.update(
            {
                wire.H_ATTEMPT: attempts,
                wire.H_FIRST_ATTEMPT: first_ms,
                wire.H_LAST_ATTEMPT: now_ms,
                wire.H_LAST_ERROR: f"{type(error).__name__}: {error}"[:_ERROR_TEXT_LIMIT],
            }
        )
        prefix = self.config.broker.prefix
        if isinstance(step, RetryIn):
            exchange, routing_key = retry_route(prefix, self._levels, source.queue_name, step.delay)
            what = f"retry {attempts} in {step.delay:.3f}s"
        else:
            exchange, routing_key = dead_letter_route(prefix, source.config.name)
            headers[wire.H_DEAD_REASON] = step.reason
            headers[wire.H_DEAD_AT] = now_ms
            what = f"dead-lettered ({step.reason})"
        copy = wire.onward(message, headers)
        try:
            await self._publish(exchange, routing_key, copy)
        except PublishError as exc:
            # Not republished, so not acknowledged either: RabbitMQ gives the message back, nothing is lost.
            log.error("inbound %s: event %s failed and could not be requeued: %s", source.config.name, event.id, exc)
            with contextlib.suppress(Exception):
                await message.nack(requeue=True)
            return
        await message.ack()
        self.stats["retried" if isinstance(step, RetryIn) else "dead"] += 1
        log.warning("inbound %s: event %s failed (%s): %s", source.config.name, event.id, error, what)

    async def _publish(self, exchange_name: str, routing_key: str, message: Message) -> None:
        assert self._publish_channel is not None
        await self._publish_channel.publish(exchange_name, message, routing_key, what=f"the message on {exchange_name}")

    # --- retention ------------------------------------------------------------------------------------------
    async def purge_once(self) -> int:
        """Delete expired ids now, in bounded batches."""
        if not self._sources:
            return 0
        return await self._sources[0].consumer.purge_expired(batch=self.config.inbox.purge_batch)

    async def _purge_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.inbox.purge_interval)
            try:
                deleted = await self.purge_once()
            except Exception as exc:  # a failed purge must not stop consumption; the next round tries again
                log.warning("inbox purge failed: %s", exc)
                continue
            self.stats["purged"] += deleted
            if deleted:
                log.info("inbox purge: %d expired ids deleted", deleted)
