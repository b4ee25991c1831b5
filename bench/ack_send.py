"""How long the work queue's ack batcher holds the prefetch window while it sends a window's stragglers (issue 38).

    .venv/bin/python bench/ack_send.py [--baseline DIR] [--runs 5] [--stragglers 400] [--busy 20]

A quorum queue with a window (prefetch 512) of deliveries, the head still in flight and ``--stragglers`` acked
behind it: once they are stale the batcher acks each on its own. The figure is the time from the acks' going
stale (``straggler_after`` after they were acked) until the last of them is written, while ``--busy`` other
callbacks (50 µs of work each, as a loaded worker's deliveries) share the event loop each turn: RabbitMQ sends
nothing new to the window until those acks arrive. ``--baseline DIR``: another checkout's ``warren`` (main,
exported with ``git archive``) run the same way, in a fresh process each, runs interleaved.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

AMQP = os.environ.get("WARREN_BENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")


async def one(stragglers: int, busy: int) -> float:
    import aio_pika

    from warren.broker.amqp.ack_batcher import AckBatcher

    connection = await aio_pika.connect(AMQP)
    name = f"bench-acksend-{uuid.uuid4().hex[:6]}"
    try:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=512)
        queue = await channel.declare_queue(name, durable=True, arguments={"x-queue-type": "quorum"})
        for i in range(stragglers + 1):
            await channel.default_exchange.publish(aio_pika.Message(str(i).encode()), routing_key=name)
        batcher = AckBatcher(max_delay=0.002, straggler_after=0.05)
        delivered: list[aio_pika.abc.AbstractIncomingMessage] = []

        async def take(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            batcher.track(message)
            delivered.append(message)

        await queue.consume(take)
        while len(delivered) < stragglers + 1:
            await asyncio.sleep(0.01)
        stop = False

        def work() -> None:  # a loaded worker: other callbacks take their turn between the writer's passes
            end = time.perf_counter() + 0.00005
            while time.perf_counter() < end:
                pass
            if not stop:
                asyncio.get_running_loop().call_soon(work)

        for _ in range(busy):
            asyncio.get_running_loop().call_soon(work)
        for message in delivered[1:]:  # the head (delivered[0]) is still in flight
            await batcher.ack(message)
        started = time.perf_counter()
        while batcher._acked or (batcher._flushing is not None and not batcher._flushing.done()):
            await asyncio.sleep(0.001)  # stale after straggler_after, then each acked on its own
        took = time.perf_counter() - started - batcher.straggler_after
        stop = True
        await batcher.ack(delivered[0])
        await batcher.close()
        await channel.queue_delete(name)
        return took
    finally:
        await connection.close()


def run_in(source: str | None, stragglers: int, busy: int) -> float:
    """One measurement in a fresh process, on ``source``'s warren (None: this checkout's)."""
    env = {**os.environ, "ACK_SEND_SOURCE": source or str(Path(__file__).resolve().parent.parent)}
    out = subprocess.run(
        [sys.executable, __file__, "--one", "--stragglers", str(stragglers), "--busy", str(busy)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", help="another checkout's directory holding warren/ (main's export)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--stragglers", type=int, default=400)
    parser.add_argument("--busy", type=int, default=20, help="other callbacks of 50 µs each on the loop")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.one:
        sys.path.insert(0, os.environ["ACK_SEND_SOURCE"])
        import uvloop

        print(uvloop.run(one(a.stragglers, a.busy)))
        return
    sides = {"this checkout": None} | ({"baseline": a.baseline} if a.baseline else {})
    results: dict[str, list[float]] = {side: [] for side in sides}
    for run in range(a.runs):
        for side, source in list(sides.items())[:: 1 if run % 2 == 0 else -1]:
            results[side].append(run_in(source, a.stragglers, a.busy))
    print(f"| side | ms to send {a.stragglers} stragglers, {a.busy} busy callbacks (median) | per run |")
    print("|---|---:|---|")
    for side, values in results.items():
        each = ", ".join(f"{v * 1000:.1f}" for v in values)
        print(f"| {side} | {statistics.median(values) * 1000:.1f} | {each} |")


if __name__ == "__main__":
    main()
