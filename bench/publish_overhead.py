"""Each publisher's own Python work per event, in-process, with the broker left out (issue 38).

    .venv/bin/python bench/publish_overhead.py --kind warren|bare [--count 20000] [--runs 5]
    WARREN_BENCH_CODE=/path/to/other/checkout .venv/bin/python bench/publish_overhead.py --kind warren

The channel under both is a stand-in whose aiormq ``basic_publish`` returns at once, as if confirmed: what is
left is what each side does per event above aiormq (the event and its envelope, the message and its
properties, the window, per-key order, re-send bookkeeping, tracing's check), measured as CPU time (µs per
event, median of ``--runs`` after one warm-up) and free of the broker's and the machine's noise.
``--kind bare`` is ``bench/publisher.py --kind bare``'s loop (its ``publish_bare``); ``--kind warren`` is
``publish_many`` through a ``ConfirmChannel``, with the events ``bench/publisher.py`` makes. AMQP framing and the
socket, the same for both, are left out: see ``bench/publish_compare.py`` for the whole.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import aio_pika

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # bench/
sys.path.insert(0, os.environ.get("WARREN_BENCH_CODE") or str(ROOT))  # the warren measured

from bench.publisher import event, publish_bare
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.broker.publisher import Publisher

FILLER = "x" * 280  # bench/publisher.py's 300-byte data
KEYS = 1000  # bench/publisher.py's default --keys
WINDOW = 512  # and its default --window


class Underlay:
    """aiormq's channel, answering every publish at once."""

    async def basic_publish(self, body: bytes, **_: Any) -> None:
        return None


class Channel:
    """aio-pika's channel, as far as either publisher reaches into it."""

    is_closed = False

    def __init__(self) -> None:
        self.underlay = Underlay()

    async def get_underlay_channel(self) -> Underlay:
        return self.underlay

    async def get_exchange(self, name: str, ensure: bool = False) -> Any:
        return aio_pika.Exchange(self, name)  # type: ignore[arg-type]


class Connection:
    async def channel(self, **_: Any) -> Channel:
        return Channel()


async def warren(count: int) -> float:
    channel = await ConfirmChannel(Connection()).open()  # type: ignore[arg-type]
    publisher = Publisher(channel, "events", None)
    events = (event(i, KEYS, FILLER, 0) for i in range(count))
    started = time.process_time()
    report = await publisher.publish_many(events, window=WINDOW)
    spent = time.process_time() - started
    assert len(report.confirmed) == count, report.failed[:1]
    return spent / count * 1e6


async def bare(count: int) -> float:
    exchange = aio_pika.Exchange(Channel(), "events")  # type: ignore[arg-type]
    started = time.process_time()
    confirmed = await publish_bare(exchange, count, KEYS, FILLER, WINDOW, 0)
    spent = time.process_time() - started
    assert confirmed == count
    return spent / count * 1e6


async def main(kind: str, count: int, runs: int) -> None:
    side = warren if kind == "warren" else bare
    await side(count)  # warm-up
    results = [await side(count) for _ in range(runs)]
    code = os.environ.get("WARREN_BENCH_CODE") or "this checkout"
    shown = ", ".join(f"{r:.1f}" for r in results)
    print(f"{kind} ({code}): {statistics.median(results):.1f} µs of CPU per event (runs: {shown})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--kind", choices=["warren", "bare"], required=True)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    a = parser.parse_args()
    asyncio.run(main(a.kind, a.count, a.runs))
