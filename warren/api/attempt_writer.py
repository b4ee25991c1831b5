"""The attempt-log writer: takes record batches off ``{prefix}.attempts`` and stores them (docs/endpoints.md).

It runs inside ``warren api`` whenever a store is configured. Workers publish batches of attempt records
(``warren/store/attempt_records.py``); the writer consumes them with a prefetch window, stores the records of up to
``batch_messages`` messages in one transaction and then acks those messages with one multiple ack. So:

- **Nothing is acked before its commit.** The writer dying between the two makes RabbitMQ deliver the
  messages again, and the store keeps each record id once.
- **The store down:** the batch stays unacked in the writer's hands and is tried again with backoff
  (``backoff`` doubles up to its cap); nothing more is taken meanwhile (the prefetch window is full), and
  consuming goes on once the store answers. Meanwhile RabbitMQ keeps what workers publish.
- **A malformed batch** (not a batch of records, or one the store refuses for its content) is never dropped
  silently: it is logged with the reason and moved, with the reason in the header ``x-warren-rejected``, to
  ``{prefix}.attempts.rejected`` (bounded, declared by ``warren setup``), then acked. Only if that queue does
  not exist is the batch dropped, logged as an error and counted in ``stats.dropped``.
- **Retention:** every ``purge_interval`` seconds, records older than ``store.attempt_retention`` are deleted,
  a bounded batch of rows per transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

import aiormq.exceptions
from aio_pika import DeliveryMode, Message
from aio_pika.abc import AbstractIncomingMessage, AbstractQueue, AbstractRobustConnection
from aiohttp import web
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from warren.broker.amqp.confirm import LINK_ERRORS
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.broker.amqp.connection import connect
from warren.broker.amqp.probe import existing_queue
from warren.core.deadlines import within
from warren.core.errors import PublishError, UnroutableError, WarrenError, describe
from warren.store.attempt_records import AttemptEntry, MalformedBatch, decode_batch
from warren.store.attempts import AttemptLog
from warren.store.repository import UNREACHABLE
from warren.topology import names
from warren.topology.config import WarrenConfig

__all__ = ["REJECTED_HEADER", "WRITER", "AttemptWriter", "WriterStats", "add_attempt_writer"]

log = logging.getLogger("warren.attempts")

REJECTED_HEADER = "x-warren-rejected"  # the reason a batch was moved to the rejected queue
EXCERPT = 200  # bytes of a rejected body quoted in the log

# RabbitMQ or the link failed: reconnect and go on (what was not acked is delivered again).
_RABBIT_ERRORS: tuple[type[Exception], ...] = (*LINK_ERRORS, aiormq.exceptions.AMQPError)
_RECONNECT: tuple[type[Exception], ...] = (WarrenError, *_RABBIT_ERRORS)


@dataclass
class WriterStats:
    """What the writer did since it started (for logs and tests)."""

    stored: int = 0  # records new to the store
    duplicates: int = 0  # records stored already (a batch delivered again)
    messages: int = 0  # messages acked after their records were stored
    rejected: int = 0  # malformed messages moved to the rejected queue
    dropped: int = 0  # malformed messages dropped because the rejected queue does not exist
    store_failures: int = 0  # tries of a batch that failed because the store was unreachable
    purged: int = 0  # records deleted by retention


class _Poison(WarrenError):
    """The store refuses this message's records for their content (not because it is unreachable)."""


def _store_unreachable(exc: BaseException) -> bool:
    """Whether trying again later can succeed: the link to the database, not what was sent."""
    return isinstance(exc, UNREACHABLE) or (isinstance(exc, DBAPIError) and exc.connection_invalidated)


def _channel_of(message: AbstractIncomingMessage) -> object | None:
    try:
        return message.channel
    except aiormq.exceptions.ChannelInvalidStateError:
        return None


class AttemptWriter:
    """``await AttemptWriter(config, open_log).run()`` until cancelled; ``open_log`` gives the store's log
    (tried again with backoff while it fails), and ``close_log`` (if given) closes it when the writer stops."""

    def __init__(
        self,
        config: WarrenConfig,
        open_log: Callable[[], Awaitable[AttemptLog]],
        *,
        close_log: Callable[[AttemptLog], Awaitable[None]] | None = None,
        prefetch: int = 64,
        batch_messages: int = 64,
        linger: float = 0.02,
        backoff: tuple[float, float] = (0.5, 30.0),
        purge_interval: float = 300.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self._open_log = open_log
        self._close_log = close_log
        self.prefetch = prefetch
        self.batch_messages = batch_messages
        self.linger = linger
        self.backoff = backoff
        self.purge_interval = purge_interval
        self._clock = clock
        self.stats = WriterStats()
        self.consuming = asyncio.Event()  # set while a consumer is on the queue
        self._log: AttemptLog | None = None
        self._inbox: asyncio.Queue[AbstractIncomingMessage] = asyncio.Queue()
        self._acked: dict[int, int] = {}  # id(channel) -> the highest delivery tag acked on it
        prefix = config.broker.prefix
        self.queue = names.attempts_queue(prefix)
        self.rejected_queue = names.attempts_rejected_queue(prefix)

    # -- running ---------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Open the log, then consume and purge until cancelled."""
        try:
            attempt_log = await self._with_backoff("the attempt log's store", self._open_log)
            self._log = attempt_log
            purging = asyncio.create_task(self._purge_forever(attempt_log), name="warren-attempts-purge")
            try:
                await self._consume_forever(attempt_log)
            finally:
                purging.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await purging
        finally:
            if self._log is not None and self._close_log is not None:
                await self._close_log(self._log)

    async def _with_backoff(self, what: str, action: Callable[[], Awaitable[AttemptLog]]) -> AttemptLog:
        delay = self.backoff[0]
        while True:
            try:
                return await action()
            except (WarrenError, DBAPIError, *UNREACHABLE) as exc:
                log.warning("%s is unavailable (%s); trying again in %.1fs", what, exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.backoff[1])

    async def _consume_forever(self, attempt_log: AttemptLog) -> None:
        delay = self.backoff[0]
        while True:
            connection: AbstractRobustConnection | None = None
            try:
                connection = await connect(self.config.broker.urls, name="warren attempt-log writer")
                queue, rejects = await self._open(connection)
                delay = self.backoff[0]
                await self._drain(attempt_log, queue, rejects)
            except _RECONNECT as exc:
                log.warning("attempt-log writer: %s; trying again in %.1fs", describe(exc), delay)
            except Exception:  # a bug must not end the log: said loudly, then the same as a lost link
                log.exception("attempt-log writer failed; trying again in %.1fs", delay)
            finally:
                self.consuming.clear()
                if connection is not None:
                    with contextlib.suppress(Exception):
                        await connection.close()
                self._inbox = asyncio.Queue()  # deliveries of a closed connection are RabbitMQ's again
                self._acked.clear()
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.backoff[1])

    async def _open(self, connection: AbstractRobustConnection) -> tuple[AbstractQueue, ConfirmChannel]:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=self.prefetch)
        queue = await existing_queue(channel, self.queue, "attempts queue")
        rejects = await ConfirmChannel(connection).open()

        async def arrived(message: AbstractIncomingMessage) -> None:
            self._inbox.put_nowait(message)

        await queue.consume(arrived)
        self.consuming.set()
        log.info("attempt-log writer consuming %s", self.queue)
        return queue, rejects

    async def _drain(self, attempt_log: AttemptLog, queue: AbstractQueue, rejects: ConfirmChannel) -> None:
        while True:
            batch = await self._next_batch()
            await self._handle(attempt_log, rejects, batch)

    async def _next_batch(self) -> list[AbstractIncomingMessage]:
        """The next message, with those that arrive within ``linger`` of it, up to ``batch_messages``."""
        batch = [await self._inbox.get()]
        deadline = asyncio.get_running_loop().time() + self.linger
        while len(batch) < self.batch_messages:
            if self._inbox.empty():
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    break
                try:
                    batch.append(await within(self._inbox.get(), remaining))
                except TimeoutError:
                    break
            else:
                batch.append(self._inbox.get_nowait())
        return batch

    # -- one batch -------------------------------------------------------------------------------------------

    async def _handle(
        self, attempt_log: AttemptLog, rejects: ConfirmChannel, batch: list[AbstractIncomingMessage]
    ) -> None:
        decoded: list[tuple[AbstractIncomingMessage, Sequence[AttemptEntry]]] = []
        for message in batch:
            try:
                decoded.append((message, decode_batch(message.body)))
            except MalformedBatch as exc:
                await self._reject(rejects, message, str(exc))
            except Exception as exc:  # a reader's bug must not make a message come back for ever
                log.exception("attempt batch unreadable")
                await self._reject(rejects, message, f"unreadable: {describe(exc)}")
        await self._store(attempt_log, rejects, decoded)
        await self._ack(batch)

    async def _store(
        self,
        attempt_log: AttemptLog,
        rejects: ConfirmChannel,
        decoded: list[tuple[AbstractIncomingMessage, Sequence[AttemptEntry]]],
    ) -> None:
        """Store every record of ``decoded`` in one transaction, trying again while the store is unreachable.

        If the store refuses the records for what they hold, each message is stored on its own, and the ones
        it still refuses are rejected like malformed batches.
        """
        try:
            await self._store_together(attempt_log, [entry for _, entries in decoded for entry in entries])
        except _Poison as poison:
            if len(decoded) == 1:
                await self._reject(rejects, decoded[0][0], f"the store refused its records: {poison}")
                return
            for one in decoded:
                await self._store(attempt_log, rejects, [one])

    async def _store_together(self, attempt_log: AttemptLog, entries: list[AttemptEntry]) -> None:
        if not entries:
            return
        delay = self.backoff[0]
        while True:
            try:
                new = await attempt_log.add_many(entries)
            except Exception as exc:
                if not _store_unreachable(exc):
                    if isinstance(exc, DBAPIError):
                        raise _Poison(describe(exc.orig or exc)) from exc
                    raise
                self.stats.store_failures += 1
                log.warning(
                    "attempt log: the store is unreachable (%s); %d records wait, unacked, %.1fs",
                    describe(exc),
                    len(entries),
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.backoff[1])
                continue
            self.stats.stored += new
            self.stats.duplicates += len(entries) - new
            return

    async def _reject(self, rejects: ConfirmChannel, message: AbstractIncomingMessage, reason: str) -> None:
        """Move ``message`` to the rejected queue with ``reason`` (it is acked with its batch afterwards)."""
        excerpt = message.body[:EXCERPT].decode("utf-8", "replace")
        moved = Message(
            message.body,
            content_type=message.content_type,
            message_id=message.message_id,
            headers={**(message.headers or {}), REJECTED_HEADER: reason[:1000]},
            delivery_mode=DeliveryMode.PERSISTENT,
        )
        try:
            await rejects.publish("", moved, self.rejected_queue, what="a rejected attempt batch")
        except UnroutableError:
            self.stats.dropped += 1
            log.error(
                "attempt batch dropped: %s; %s does not exist to keep it (run `warren setup`); it began %r",
                reason,
                self.rejected_queue,
                excerpt,
            )
            return
        except PublishError:
            raise  # the link: the batch stays unacked and comes back after the reconnect
        self.stats.rejected += 1
        log.error("attempt batch rejected: %s; moved to %s; it began %r", reason, self.rejected_queue, excerpt)

    async def _ack(self, batch: list[AbstractIncomingMessage]) -> None:
        """Ack the batch: one multiple ack per channel when its tags follow the last ack without a gap."""
        by_channel: dict[int, tuple[object, list[AbstractIncomingMessage]]] = {}
        for message in batch:
            channel = _channel_of(message)
            if channel is None or message.delivery_tag is None:
                continue  # its channel is gone: RabbitMQ delivers the message again, and it is stored once
            by_channel.setdefault(id(channel), (channel, []))[1].append(message)
        for key, (_, messages) in by_channel.items():
            tags = sorted(m.delivery_tag or 0 for m in messages)
            first = self._acked.get(key, 0) + 1
            try:
                if tags == list(range(first, first + len(tags))):
                    last = max(messages, key=lambda m: m.delivery_tag or 0)
                    await last.ack(multiple=True)
                else:
                    for message in messages:
                        await message.ack()
            except _RABBIT_ERRORS as exc:
                log.info("attempt-log acks lost with their channel (%s): the batch comes again", describe(exc))
                continue
            self._acked[key] = max(tags[-1], self._acked.get(key, 0))
            self.stats.messages += len(messages)

    # -- retention -------------------------------------------------------------------------------------------

    async def purge_once(self) -> int:
        """Delete the records older than ``store.attempt_retention`` now; how many."""
        assert self._log is not None, "run() first"
        purged = await self._log.purge_older_than(self._clock() - self.config.store.attempt_retention)
        self.stats.purged += purged
        if purged:
            log.info("attempt log: %d records older than the retention purged", purged)
        return purged

    async def _purge_forever(self, attempt_log: AttemptLog) -> None:
        while True:
            try:
                await self.purge_once()
            except Exception as exc:
                if not _store_unreachable(exc):
                    log.exception("attempt log: purge failed")
                else:
                    log.warning("attempt log: purge put off, the store is unreachable (%s)", describe(exc))
            await asyncio.sleep(self.purge_interval)


WRITER = web.AppKey("attempt_writer", AttemptWriter)


def add_attempt_writer(
    app: web.Application, config: WarrenConfig, shared: Callable[[], Awaitable[AsyncEngine]] | None = None
) -> None:
    """Run the writer beside ``warren api``'s routes (``store.url`` is set). ``shared`` gives the admin API's
    store engine when the admin API is on (opened and migrated once); else it opens its own. Stopped on the
    app's cleanup."""
    if shared is not None:
        engine = shared

        async def from_admin() -> AttemptLog:
            return AttemptLog(await engine())

        writer = AttemptWriter(config, from_admin)
    else:

        async def own() -> AttemptLog:
            return await AttemptLog.open(config.store)

        writer = AttemptWriter(config, own, close_log=AttemptLog.close)
    app[WRITER] = writer

    async def writing(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(writer.run(), name="warren-attempt-writer")
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app.cleanup_ctx.append(writing)
