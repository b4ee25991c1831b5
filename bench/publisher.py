"""The benchmark's publisher, in its own process as in production: publishes a workload with confirms.

``--kind warren`` (the default) publishes through Warren's ``Publisher.publish_many``; ``--kind bare`` through
plain aio-pika the way a user would write it with the same guarantees: a confirming channel, ``mandatory``,
persistent messages, the same envelope as the body, ``--window`` publishes awaiting their confirms at once (a
semaphore and a task each), to the same exchange and routing key, so the same quorum queue. The bare one keeps
no per-key order and sends nothing again: it is the floor Warren's publisher is held to.

As fast as the window of unconfirmed publishes allows, or with ``--rate`` at a fixed rate (events/s), each
event made at its due time, so that its envelope timestamp is when it was published. Prints one JSON line:
{"published", "failed", "seconds", "rate", "started", "first_publish", "publish_rate", "cpu_s"}: ``started``
is before the connection opens (``rate`` counts ``seconds`` from there), ``first_publish`` after it (wall
clock, as ``started``); ``publish_rate`` is confirmed events per second from the first publish to the last
confirm, and ``cpu_s`` this process's CPU time (user + system) over the same span.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Iterable
from datetime import UTC, datetime
from pathlib import Path

import aio_pika
import orjson

# WARREN_BENCH_CODE: another checkout's warren to publish with (bench/publish_compare.py --baseline).
sys.path.insert(0, os.environ.get("WARREN_BENCH_CODE") or str(Path(__file__).resolve().parent.parent))

from warren.broker.amqp.connection import connect
from warren.broker.events import Event, new_event_id
from warren.broker.publisher import Publisher
from warren.topology import names
from warren.topology.headers import H_KEY

# When the first publish went out (the connection open) and the last confirm came: wall clock, CPU time.
FIRST = {"wall": 0.0, "cpu": 0.0, "done": 0.0, "done_cpu": 0.0}


def first_publish() -> None:
    FIRST["wall"], FIRST["cpu"] = time.time(), time.process_time()


def last_confirm() -> None:
    FIRST["done"], FIRST["done_cpu"] = time.time(), time.process_time()


def event(i: int, keys: int, filler: str, types: int) -> Event:
    """Event ``i``: of type ``bench.event``, or with ``types`` > 0 of ``bench.t<i mod types>`` (one per endpoint)."""
    kind = f"bench.t{i % types}" if types else "bench.event"
    return Event(type=kind, data={"n": i, "pad": filler}, key=f"key-{i % keys}")


async def paced(count: int, keys: int, filler: str, rate: float, types: int) -> AsyncIterator[Event]:
    """``count`` events at ``rate`` per second, each made when it is due (behind schedule: at once)."""
    started = time.monotonic()
    for i in range(count):
        wait = started + i / rate - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        yield event(i, keys, filler, types)


async def warren(
    url: str, prefix: str, count: int, keys: int, filler: str, window: int, rate: float, types: int
) -> int:
    """Through Warren's Publisher; returns how many were confirmed."""
    connection = await connect(url, name="bench-publisher")
    publisher = await Publisher.open(connection, prefix)
    events: Iterable[Event] | AsyncIterator[Event] = (
        paced(count, keys, filler, rate, types) if rate else (event(i, keys, filler, types) for i in range(count))
    )
    first_publish()
    try:
        report = await publisher.publish_many(events, window=window)
        last_confirm()
    finally:
        await connection.close()
    return len(report.confirmed)


async def bare(url: str, prefix: str, count: int, keys: int, filler: str, window: int, types: int) -> int:
    """Plain aio-pika with the same guarantees but order and re-sends (module docstring); returns confirmed."""
    connection = await aio_pika.connect(url)
    channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
    exchange = await channel.get_exchange(names.events_exchange(prefix), ensure=False)
    first_publish()
    confirmed = await publish_bare(exchange, count, keys, filler, window, types)
    last_confirm()
    await connection.close()
    return confirmed


async def publish_bare(
    exchange: aio_pika.abc.AbstractExchange, count: int, keys: int, filler: str, window: int, types: int
) -> int:
    """The bare loop (module docstring): event ``i`` built and published as a user would, ``window`` awaiting their
    confirms at once (a semaphore and a task each); returns how many were confirmed. bench/publish_overhead.py runs
    it on a stand-in channel."""
    slots = asyncio.Semaphore(window)
    confirmed = 0

    async def one(i: int) -> None:
        nonlocal confirmed
        try:
            kind = f"bench.t{i % types}" if types else "bench.event"
            event_id = new_event_id()
            stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            body = orjson.dumps({"id": event_id, "type": kind, "timestamp": stamp, "data": {"n": i, "pad": filler}})
            message = aio_pika.Message(
                body,
                message_id=event_id,
                type=kind,
                content_type="application/json",
                delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                headers={H_KEY: f"key-{i % keys}"},  # as Warren's: the ordered endpoints hash it
            )
            await exchange.publish(message, routing_key=kind, mandatory=True)
            confirmed += 1
        except Exception as exc:  # counted as not confirmed, as Warren's report does
            print(f"not confirmed: {exc!r}", file=sys.stderr)
        finally:
            slots.release()

    tasks: set[asyncio.Task[None]] = set()
    for i in range(count):
        await slots.acquire()
        task = asyncio.create_task(one(i))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    await asyncio.gather(*tasks)
    return confirmed


async def main(
    kind: str, url: str, prefix: str, count: int, keys: int, size: int, window: int, rate: float, types: int
) -> None:
    filler = "x" * max(0, size - 20)
    started = time.monotonic()
    if kind == "bare":
        confirmed = await bare(url, prefix, count, keys, filler, window, types)
    else:
        confirmed = await warren(url, prefix, count, keys, filler, window, rate, types)
    seconds = time.monotonic() - started
    print(
        orjson.dumps(
            {
                "published": confirmed,
                "failed": count - confirmed,
                "seconds": seconds,
                "rate": confirmed / seconds,
                "started": time.time() - seconds,
                "first_publish": FIRST["wall"],
                "publish_rate": confirmed / max(1e-9, FIRST["done"] - FIRST["wall"]),
                "cpu_s": FIRST["done_cpu"] - FIRST["cpu"],
            }
        ).decode()
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--kind", choices=["warren", "bare"], default="warren")
    parser.add_argument("--url", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--size", type=int, default=300)
    parser.add_argument("--window", type=int, default=512)
    parser.add_argument("--rate", type=float, default=0, help="events/s; 0: as fast as confirms allow (warren only)")
    parser.add_argument("--types", type=int, default=0, help="spread the events over bench.t0 ... (0: bench.event)")
    a = parser.parse_args()
    if a.rate and a.kind == "bare":
        parser.error("--rate is for --kind warren (the latency workloads)")
    asyncio.run(main(a.kind, a.url, a.prefix, a.count, a.keys, a.size, a.window, a.rate, a.types))
