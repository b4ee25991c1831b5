"""The benchmark's publisher, in its own process as in production: publishes a workload with confirms.

As fast as the window of unconfirmed publishes allows, or with ``--rate`` at a fixed rate (events/s), each
event made at its due time, so that its envelope timestamp is when it was published. Prints one JSON line:
{"published", "seconds", "rate"}.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from warren.broker.amqp.connection import connect
from warren.broker.events import Event
from warren.broker.publisher import Publisher


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


async def main(url: str, prefix: str, count: int, keys: int, size: int, window: int, rate: float, types: int) -> None:
    connection = await connect(url, name="bench-publisher")
    publisher = await Publisher.open(connection, prefix)
    filler = "x" * max(0, size - 20)
    events: Iterable[Event] | AsyncIterator[Event] = (
        paced(count, keys, filler, rate, types) if rate else (event(i, keys, filler, types) for i in range(count))
    )
    started = time.monotonic()
    report = await publisher.publish_many(events, window=window)
    seconds = time.monotonic() - started
    await connection.close()
    print(
        orjson.dumps(
            {
                "published": len(report.confirmed),
                "failed": len(report.failed),
                "seconds": seconds,
                "rate": len(report.confirmed) / seconds,
                "started": time.time() - seconds,
            }
        ).decode()
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--size", type=int, default=300)
    parser.add_argument("--window", type=int, default=512)
    parser.add_argument("--rate", type=float, default=0, help="events/s; 0: as fast as confirms allow")
    parser.add_argument("--types", type=int, default=0, help="spread the events over bench.t0 ... (0: bench.event)")
    a = parser.parse_args()
    asyncio.run(main(a.url, a.prefix, a.count, a.keys, a.size, a.window, a.rate, a.types))
