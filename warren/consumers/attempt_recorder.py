"""The worker's side of the attempt log: every finished attempt becomes a record published on ``{prefix}.attempts``.

An observer of the delivery hooks (like the metrics): ``observe`` only appends the attempt and its end time to a
bounded buffer, so an attempt costs no await, no I/O and no new object but a pair (the record's fields are
laid out when its batch is encoded, in the background). A background task publishes the buffer in batches (the format of
warren/store/attempt_records.py), confirmed, on a channel of its own: as soon as ``worker.attempt_log_batch`` records
wait, and at the latest every ``worker.attempt_log_interval``. The writer in ``warren api`` stores them.

While RabbitMQ is away or refuses a batch, the records stay in the buffer and go out once it is back. The buffer
holds at most ``worker.attempt_log_buffer`` records: past that the oldest are dropped, counted
(``warren_attempt_records_dropped_total``) and reported in a warning at most once per interval, never silently.
On shutdown what is buffered is flushed within the grace period the worker has left.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import os
import socket
import time
from collections import deque
from collections.abc import Callable

import aiormq.exceptions
from aio_pika import DeliveryMode, Message
from aio_pika.abc import AbstractConnection

from warren.broker.amqp.confirm import LINK_ERRORS
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.consumers.hooks import AttemptRecord, DeliveryHooks
from warren.core.deadlines import within
from warren.core.errors import PublishError, describe
from warren.store.attempt_records import clip_error, encode_rows
from warren.topology import names

__all__ = ["AttemptRecorder", "worker_identity"]

log = logging.getLogger("warren.attempts")

# Seconds a batch may wait for its confirm before it counts as not sent (kept, sent again with the same ids): a
# link that stalls without breaking. Generous: a loaded broker took over 10 s to confirm in the benchmark.
PUBLISH_TIMEOUT = 30.0
MAX_BACKOFF = 5.0  # seconds between tries at most while RabbitMQ refuses batches or is away
# An attempt, when it ended (epoch seconds) and its number in this recorder: the record's id, fixed once, so that
# a batch sent again (its confirm never came) repeats the same ids and the writer stores each record once.
Pending = tuple[AttemptRecord, float, int]
_FAILURES: tuple[type[BaseException], ...] = (
    PublishError,
    aiormq.exceptions.AMQPError,
    *LINK_ERRORS,
)


def worker_identity() -> str:
    """``host:pid``: which worker made an attempt."""
    return f"{socket.gethostname()}:{os.getpid()}"


class AttemptRecorder:
    """``recorder.install(hooks)``; ``await recorder.start(connection)``; ``await recorder.close(timeout)``."""

    def __init__(
        self,
        prefix: str,
        *,
        batch: int = 200,
        interval: float = 0.25,
        capacity: int = 50_000,
        worker: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.exchange = names.attempts_exchange(prefix)
        self.batch = batch
        self.interval = interval
        self.capacity = capacity
        self.worker = worker or worker_identity()
        self._clock = clock
        self._buffer: deque[Pending] = deque()
        # Unique per record without a system call each: a random base per recorder, then a counter.
        self._id_base = os.urandom(8).hex()
        self._ids = itertools.count()
        self._wake = asyncio.Event()
        self._sending = 0
        self._channel: ConfirmChannel | None = None
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0  # records dropped because the buffer was full (warren_attempt_records_dropped_total)
        self.published = 0  # records RabbitMQ confirmed
        self.batches = 0  # batches RabbitMQ confirmed
        self._unreported_drops = 0
        self._last_warning: dict[str, float] = {}

    @property
    def buffered(self) -> int:
        """Records not yet confirmed: waiting in the buffer, or in the batch being published."""
        return len(self._buffer) + self._sending

    def install(self, hooks: DeliveryHooks) -> None:
        hooks.observers.append(self.observe)

    def observe(self, record: AttemptRecord) -> None:
        """One finished attempt: into the buffer (the oldest record goes when it is full)."""
        buffer = self._buffer
        if len(buffer) >= self.capacity:
            buffer.popleft()
            self.dropped += 1
            self._unreported_drops += 1
        buffer.append((record, self._clock(), next(self._ids)))
        if len(buffer) >= self.batch and not self._wake.is_set():
            self._wake.set()

    # --- the publishing side -------------------------------------------------------------------------------
    async def start(self, connection: AbstractConnection) -> None:
        """Open the recorder's own confirming channel and start publishing in the background."""
        self._channel = await ConfirmChannel(connection).open()
        self._task = asyncio.create_task(self._run(), name="attempt-recorder")

    async def _run(self) -> None:
        """Full batches as soon as they are; everything buffered once an interval has passed since the last time."""
        loop = asyncio.get_running_loop()
        tick = loop.time() + self.interval
        failures = 0
        while True:
            with contextlib.suppress(TimeoutError):
                await within(self._wake.wait(), max(tick - loop.time(), 0.0))
            self._wake.clear()
            everything = loop.time() >= tick
            if everything:
                tick = loop.time() + self.interval
            try:
                flushed = await self.flush(full_only=not everything)
            except Exception:  # a bug must not end recording for good: the records are kept, tried again
                log.exception("publishing attempt records failed unexpectedly")
                flushed = False
            if flushed:
                failures = 0
            else:
                failures += 1
                await asyncio.sleep(min(self.interval * 2**failures, MAX_BACKOFF))
            self._report_drops()

    async def flush(self, *, full_only: bool = False) -> bool:
        """Publish what is buffered, a batch at a time (``full_only``: only full batches). False when a batch was
        not confirmed: it is kept, in order, for the next try."""
        while len(self._buffer) >= (self.batch if full_only else 1):
            chunk = [self._buffer.popleft() for _ in range(min(self.batch, len(self._buffer)))]
            self._sending = len(chunk)
            try:
                await self._publish(chunk)
            except _FAILURES as exc:
                self._put_back(chunk)
                self._warn("unpublished", f"attempt records not published, kept for later: {describe(exc)}")
                return False
            except BaseException:
                self._put_back(chunk)  # cancelled mid-publish: kept for the final flush
                raise
            finally:
                self._sending = 0
            self.published += len(chunk)
            self.batches += 1
        return True

    def _row(self, pending: Pending) -> dict[str, object]:
        """One record as warren/store/attempt_records.py lays it out (``FIELDS``, in order)."""
        record, at, number = pending
        return {
            "id": f"{self._id_base}{number:x}",
            "event_id": record.event_id,
            "tenant": record.tenant,
            "endpoint": record.endpoint,
            "attempt": record.attempt,
            "at": at,
            "status": record.status,
            "duration_ms": round(record.duration * 1000, 3),
            "outcome": record.outcome,
            "error": clip_error(record.error),
            "next_delay_s": record.next_delay,
            "worker": self.worker,
            "response": record.response,
            "response_headers": dict(record.response_headers) if record.response is not None else None,
        }

    async def _publish(self, chunk: list[Pending]) -> None:
        assert self._channel is not None, "start() first"
        body = encode_rows(self._row(pending) for pending in chunk)
        message = Message(body, content_type="application/json", delivery_mode=DeliveryMode.PERSISTENT)
        publishing = self._channel.publish(
            self.exchange,
            message,
            "",
            what=f"a batch of {len(chunk)} attempt records",
            unroutable=f"{self.exchange} routes attempt records to no queue: run `warren setup`",
        )
        try:
            await within(publishing, PUBLISH_TIMEOUT)
        except TimeoutError:
            what = f"a batch of {len(chunk)} attempt records"
            raise PublishError(f"{what} not confirmed within {PUBLISH_TIMEOUT:g}s") from None

    def _put_back(self, chunk: list[Pending]) -> None:
        """Records that were not sent go back to the front, in order; past the capacity the oldest are dropped."""
        room = self.capacity - len(self._buffer)
        if room < len(chunk):
            lost = len(chunk) - max(room, 0)
            self.dropped += lost
            self._unreported_drops += lost
            chunk = chunk[lost:]
        self._buffer.extendleft(reversed(chunk))

    def _report_drops(self) -> None:
        if self._unreported_drops and self._warn(
            "drops", f"attempt log buffer full ({self.capacity} records): dropped the {self._unreported_drops} oldest"
        ):
            self._unreported_drops = 0

    def _warn(self, kind: str, text: str) -> bool:
        """Log ``text`` unless a warning of this kind went out less than an interval ago (True when logged)."""
        now = time.monotonic()
        if now - self._last_warning.get(kind, -math.inf) < self.interval:
            return False
        self._last_warning[kind] = now
        log.warning(text, extra={"dropped_total": self.dropped, "buffered": len(self._buffer)})
        return True

    async def close(self, timeout: float) -> None:
        """Stop the background task and publish what is buffered within ``timeout`` seconds, then close."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
        if self._channel is None:
            return
        if self._buffer:
            flushed = False
            with contextlib.suppress(TimeoutError):
                flushed = await within(self.flush(), max(timeout, 0.1))
            if not flushed:
                log.warning(
                    "shutdown: %d attempt record(s) not published (RabbitMQ did not take them in time)",
                    len(self._buffer),
                )
        if self._unreported_drops:
            log.warning("attempt log buffer was full: dropped the %d oldest record(s)", self._unreported_drops)
            self._unreported_drops = 0
        await self._channel.close()
        self._channel = None
