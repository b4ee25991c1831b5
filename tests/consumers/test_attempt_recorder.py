"""The worker's attempt records on ``{prefix}.attempts``, read back from real RabbitMQ and decoded.

Every test consumes the attempts queue itself, as the writer in ``warren api`` would, and checks what came:
the records of each attempt, when the batches went, that records outlive a lost link, that an overflow is
counted, and that nothing is published with the attempt log off.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest
from aio_pika.abc import AbstractIncomingMessage

from tests.consumers.test_metrics import scrape, value
from tests.support.health import message_count, wait_until
from tests.support.receiver import Receiver, Reply
from tests.support.tcp_proxy import TcpProxy, through
from warren.broker.amqp.connection import connect
from warren.broker.events import Event
from warren.consumers.attempt_recorder import AttemptRecorder
from warren.consumers.hooks import AttemptRecord
from warren.consumers.worker import Worker
from warren.store.attempt_records import AttemptEntry, decode_batch, encode_rows
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(120)


@dataclass
class Batch:
    at: float  # time.monotonic() when the test's consumer got it
    entries: list[AttemptEntry]


@dataclass
class AttemptsQueue:
    batches: list[Batch] = field(default_factory=list)

    @property
    def entries(self) -> list[AttemptEntry]:
        return [e for b in self.batches for e in b.entries]

    def of(self, event_id: str) -> list[AttemptEntry]:
        return [e for e in self.entries if e.event_id == event_id]


@pytest.fixture
async def attempts_consumer() -> AsyncIterator[Callable[[WarrenConfig], Any]]:
    """``queue = await attempts_consumer(config)``: every batch on ``{prefix}.attempts``, decoded, as it comes."""
    connections = []

    async def consume(config: WarrenConfig) -> AttemptsQueue:
        connection = await connect(config.broker.url)
        connections.append(connection)
        channel = await connection.channel()
        queue = await channel.declare_queue(names.attempts_queue(config.broker.prefix), passive=True)
        seen = AttemptsQueue()

        async def take(message: AbstractIncomingMessage) -> None:
            seen.batches.append(Batch(time.monotonic(), list(decode_batch(message.body))))
            await message.ack()

        await queue.consume(take)
        return seen

    yield consume
    for connection in connections:
        await connection.close()


def attempt_log(**settings: Any) -> dict[str, Any]:
    return {"attempt_log": True, **settings}


async def test_a_retried_event_has_a_record_per_attempt_in_order(
    endpoint_config: Any, receiver: Receiver, publish: Any, attempts_consumer: Any
) -> None:
    # Given an endpoint that fails twice (503, then a 500), then accepts, and a worker recording attempts
    answers = iter([503, 500])
    receiver.behaviour = lambda r, request, body: Reply(next(answers, 200))
    config = await endpoint_config(
        [{"name": "shop", "tenant": "acme"}],
        retry={"base": "10ms", "cap": "20ms"},
        worker=attempt_log(attempt_log_batch=50, attempt_log_interval="50ms"),
    )
    queue = await attempts_consumer(config)
    async with Worker(config) as worker:
        # When an event of tenant acme is published
        await publish(config, [Event(type="order.paid", data={}, id="evt-1", tenant="acme")])
        await receiver.wait_for(lambda r: "evt-1" in r.ok_ids(), 15)
        await wait_until(lambda: len(queue.of("evt-1")) >= 3, 10, "three attempt records")
        worker_id = worker.recorder.worker if worker.recorder else ""
    # Then attempts 1, 2 and 3 were recorded in order, with their outcomes, statuses and the tenant
    records = queue.of("evt-1")
    assert [r.attempt for r in records] == [1, 2, 3]
    assert [r.outcome for r in records] == ["retry", "retry", "delivered"]
    assert [r.status for r in records] == [503, 500, 200]
    assert {r.tenant for r in records} == {"acme"}
    assert {r.endpoint for r in records} == {"shop"}
    assert [r.next_delay_s is not None for r in records] == [True, True, False]
    assert records[0].at <= records[1].at <= records[2].at
    assert all(r.duration_ms >= 0 for r in records)
    assert len({r.id for r in records}) == 3
    assert worker_id.endswith(f":{__import__('os').getpid()}") and {r.worker for r in records} == {worker_id}


async def test_full_batches_go_at_once_and_the_rest_at_the_interval(
    endpoint_config: Any, receiver: Receiver, publish: Any, attempts_consumer: Any
) -> None:
    # Given batches of 5 and an interval of 5 s
    config = await endpoint_config(
        [{"name": "shop"}], worker=attempt_log(attempt_log_batch=5, attempt_log_interval="5s")
    )
    queue = await attempts_consumer(config)
    async with Worker(config):
        # When 12 events are delivered at once
        await publish(config, [Event(type="x.y", data={}, id=f"e{i}") for i in range(12)])
        await receiver.wait_for(lambda r: len(r.ok_ids()) == 12, 15)
        delivered = time.monotonic()
        await wait_until(lambda: len(queue.entries) >= 12, 15, "twelve records")
    # Then two full batches went as soon as they were full, and the last two records at the interval
    assert [len(b.entries) for b in queue.batches] == [5, 5, 2]
    assert queue.batches[1].at - delivered < 2.0
    assert queue.batches[2].at - delivered > 1.0  # the interval (5 s from the worker's start), not the deliveries
    assert sorted(e.event_id for e in queue.entries) == sorted(f"e{i}" for i in range(12))


async def test_records_wait_at_most_an_interval(
    endpoint_config: Any, receiver: Receiver, publish: Any, attempts_consumer: Any
) -> None:
    # Given a batch larger than the traffic and an interval of 300 ms
    config = await endpoint_config(
        [{"name": "shop"}], worker=attempt_log(attempt_log_batch=1000, attempt_log_interval="300ms")
    )
    queue = await attempts_consumer(config)
    async with Worker(config):
        for i in range(3):
            # When one event is delivered at a time
            await publish(config, [Event(type="x.y", data={}, id=f"e{i}")])
            await receiver.wait_for(lambda r, i=i: f"e{i}" in r.ok_ids(), 15)
            delivered = time.monotonic()
            # Then its record comes within the interval (plus a loaded machine's slack)
            await wait_until(lambda i=i: bool(queue.of(f"e{i}")), 10, f"the record of e{i}")
            assert time.monotonic() - delivered < 0.3 + 2.0


async def test_shutdown_publishes_what_is_buffered(
    endpoint_config: Any, receiver: Receiver, publish: Any, attempts_consumer: Any
) -> None:
    # Given an interval far longer than the test
    config = await endpoint_config(
        [{"name": "shop"}],
        worker=attempt_log(attempt_log_batch=1000, attempt_log_interval="60s"),
        delivery={"grace_period": "2s"},
    )
    queue = await attempts_consumer(config)
    async with Worker(config) as worker:
        await publish(config, [Event(type="x.y", data={}, id=f"e{i}") for i in range(3)])
        await receiver.wait_for(lambda r: len(r.ok_ids()) == 3, 15)
        assert worker.recorder is not None and worker.recorder.batches == 0
        # When the worker stops
        stopping = time.monotonic()
    # Then the records went out in one batch, within the grace period
    assert time.monotonic() - stopping < 2.0 + 3.0
    await wait_until(lambda: len(queue.entries) == 3, 10, "the three records")
    assert [len(b.entries) for b in queue.batches] == [3]


async def test_records_outlive_a_lost_link(
    endpoint_config: Any,
    receiver: Receiver,
    publish: Any,
    attempts_consumer: Any,
    amqp_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a worker reaching RabbitMQ through a proxy, recording every 2 s
    config = await endpoint_config(
        [{"name": "shop"}], worker=attempt_log(attempt_log_batch=1000, attempt_log_interval="2s")
    )
    queue = await attempts_consumer(config)
    caplog.set_level(logging.WARNING, "warren.attempts")
    async with TcpProxy(urlsplit(amqp_url).port or 5672) as proxy:
        proxied = config.model_copy(
            update={"broker": config.broker.model_copy(update={"url": through(config.broker.url, proxy.port)})}
        )
        async with Worker(proxied) as worker:
            assert worker.recorder is not None
            recorder = worker.recorder
            await publish(config, [Event(type="x.y", data={}, id=f"e{i}") for i in range(3)])
            await receiver.wait_for(lambda r: len(r.ok_ids()) == 3, 15)
            # (the receiver answers before the worker reads the reply and records the attempt)
            await wait_until(lambda: recorder.buffered >= 3, 5, "three recorded attempts")
            # When the link is lost before the records went out, and stays lost past the interval
            await proxy.cut()
            assert recorder.batches == 0 and recorder.buffered >= 3
            await wait_until(lambda: "attempt records not published" in caplog.text, 15, "a failed publish")
            assert recorder.buffered >= 3 and not queue.batches
            # And it comes back
            await proxy.restore()
            # Then the kept records are published
            await wait_until(lambda: {e.event_id for e in queue.entries} >= {"e0", "e1", "e2"}, 30, "the records")
    for event_id in ("e0", "e1", "e2"):
        assert queue.of(event_id)[0].attempt == 1
        assert queue.of(event_id)[0].outcome == "delivered"


def record(i: int) -> AttemptRecord:
    return AttemptRecord("shop", f"e{i}", 1, 200, None, 0.01, "delivered", None, 0.1, None, "acme")


def test_a_full_buffer_drops_the_oldest_and_counts_them() -> None:
    # Given a recorder keeping at most 5 records (not started: RabbitMQ away)
    recorder = AttemptRecorder("p", batch=100, interval=0.25, capacity=5, worker="h:1")
    # When 8 attempts finish
    for i in range(8):
        recorder.observe(record(i))
    # Then the 5 newest are kept and 3 dropped
    assert recorder.dropped == 3 and recorder.buffered == 5
    rows = [recorder._row(pending) for pending in recorder._buffer]
    assert [row["event_id"] for row in rows] == [f"e{i}" for i in range(3, 8)]
    assert len({row["id"] for row in rows}) == 5
    assert {row["tenant"] for row in rows} == {"acme"}
    assert [recorder._row(pending)["id"] for pending in recorder._buffer] == [row["id"] for row in rows]  # fixed
    assert [e.event_id for e in decode_batch(encode_rows(rows))] == [f"e{i}" for i in range(3, 8)]


def test_records_that_could_not_be_sent_go_back_in_front() -> None:
    recorder = AttemptRecorder("p", batch=2, interval=0.25, capacity=4, worker="h:1")
    for i in range(4):
        recorder.observe(record(i))
    chunk = [recorder._buffer.popleft() for _ in range(2)]
    recorder.observe(record(4))
    recorder.observe(record(5))  # the buffer is full again: one of the two sent records no longer fits
    recorder._put_back(chunk)
    assert [pending[0].event_id for pending in recorder._buffer] == ["e2", "e3", "e4", "e5"]
    assert recorder.dropped == 2


async def test_an_overflow_is_counted_in_the_metrics_and_logged(
    endpoint_config: Any, receiver: Receiver, publish: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a worker whose buffer holds 4 records and whose link to the attempts exchange is refused
    config = await endpoint_config(
        [{"name": "shop"}],
        worker=attempt_log(attempt_log_batch=1000, attempt_log_interval="200ms", attempt_log_buffer=4, metrics_port=0),
    )
    connection = await connect(config.broker.url)
    try:
        channel = await connection.channel()
        await channel.exchange_delete(names.attempts_exchange(config.broker.prefix))
    finally:
        await connection.close()
    caplog.set_level(logging.WARNING, "warren.attempts")
    async with Worker(config) as worker:
        assert worker.metrics_server is not None
        # When 10 events are delivered
        await publish(config, [Event(type="x.y", data={}, id=f"e{i}") for i in range(10)])
        await receiver.wait_for(lambda r: len(r.ok_ids()) == 10, 15)
        # Then the 6 records that did not fit are counted and a warning says so
        await wait_until(lambda: "dropped the" in caplog.text, 10, "the drop warning")
        samples = await scrape(worker.metrics_server.port)
    assert value(samples, "warren_attempt_records_dropped_total") == 6
    assert value(samples, "warren_attempt_records_buffered") == 4


async def test_off_publishes_nothing(
    endpoint_config: Any, receiver: Receiver, publish: Any, make_config: Callable[..., WarrenConfig]
) -> None:
    # Given attempt_log = false (and, by default, no store)
    config = await endpoint_config([{"name": "shop"}], worker={"attempt_log": False})
    assert not make_config().attempt_log  # the default without [store] url
    async with Worker(config) as worker:
        assert worker.recorder is None
        # When an event fails once then is delivered
        answers = iter([503])
        receiver.behaviour = lambda r, request, body: Reply(next(answers, 200))
        await publish(config, [Event(type="x.y", data={}, id="e1")])
        await receiver.wait_for(lambda r: "e1" in r.ok_ids(), 15)
        await asyncio.sleep(0.5)
    # Then the attempts queue is empty
    assert await message_count(config, names.attempts_queue(config.broker.prefix)) == 0


def test_the_default_follows_the_store(make_config: Callable[..., WarrenConfig], tmp_path: Any) -> None:
    with_store = make_config(store={"url": f"sqlite:///{tmp_path}/s.db", "keys": ["env:X"]})
    assert with_store.attempt_log
    assert not make_config().attempt_log
    off = make_config(store={"url": f"sqlite:///{tmp_path}/s.db"}, worker={"attempt_log": False})
    assert not off.attempt_log
    on = make_config(worker={"attempt_log": True})
    assert on.attempt_log
