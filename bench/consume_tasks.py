"""The consumer's CPU per message with aio-pika's two tasks a message, and with one (issue 38, part 3;
warren/broker/amqp/direct_consumer.py): N messages published to a fresh quorum queue, then consumed by a callback
that acks each, in this process, its CPU time from the first message to the last. The two ways alternate, a
fresh queue each round; the medians are printed side by side. Only the consumer's side of what a worker does
per message: no HTTP, no Warren code but the one being compared.

    .venv/bin/python bench/consume_tasks.py [--count 20000] [--rounds 5]      # WARREN_BENCH_AMQP_URL: another node
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path

import aio_pika
from aio_pika.abc import AbstractIncomingMessage

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.run import AMQP
from warren.broker.amqp.direct_consumer import consume_directly

BODY = (
    b'{"id": "evt_00000001", "type": "bench.t0", "timestamp": "2026-12-07T00:00:00Z", "data": {"pad": "'
    + b"x" * 300
    + b'"}}'
)


async def one(connection: aio_pika.abc.AbstractRobustConnection, count: int, direct: bool) -> float:
    """CPU µs per message consumed (and acked), one round."""
    channel = await connection.channel()
    await channel.set_qos(prefetch_count=512)
    name = f"bench-consume-{uuid.uuid4().hex[:8]}"
    queue = await channel.declare_queue(name, durable=True, arguments={"x-queue-type": "quorum"})
    try:
        publisher = await connection.channel(publisher_confirms=True)
        for start in range(0, count, 500):
            await asyncio.gather(
                *(
                    publisher.default_exchange.publish(
                        aio_pika.Message(BODY, message_id=f"evt_{i}", headers={"warren-key": f"k{i % 64}"}),
                        routing_key=name,
                    )
                    for i in range(start, min(count, start + 500))
                )
            )
        await publisher.close()
        done = asyncio.Event()
        seen = 0
        began = 0.0

        async def on_message(message: AbstractIncomingMessage) -> None:
            nonlocal seen, began
            if seen == 0:
                began = time.process_time()
            seen += 1
            await message.ack()
            if seen == count:
                done.set()

        tag = await queue.consume(on_message, consumer_tag=f"{name}-c")
        if direct:
            await consume_directly(queue, tag, on_message)  # before the first delivery is read off the socket
        await asyncio.wait_for(done.wait(), 120)
        spent = (time.process_time() - began) / count * 1e6
        await queue.cancel(tag)
        return spent
    finally:
        await queue.delete(if_unused=False, if_empty=False)
        await channel.close()


async def main(count: int, rounds: int) -> None:
    connection = await aio_pika.connect_robust(AMQP)
    figures: dict[bool, list[float]] = {False: [], True: []}
    try:
        for _ in range(rounds):
            for direct in (False, True):
                figures[direct].append(await one(connection, count, direct))
    finally:
        await connection.close()
    two, one_task = statistics.median(figures[False]), statistics.median(figures[True])
    print(f"| consumer | CPU µs per message, median of {rounds} (per round) |")
    print("|---|---:|")
    print(f"| aio-pika's: two tasks a message | {two:.2f} ({', '.join(f'{v:.2f}' for v in figures[False])}) |")
    print(f"| consume_directly: one task | {one_task:.2f} ({', '.join(f'{v:.2f}' for v in figures[True])}) |")
    print(f"\none / two: {one_task / two:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    a = parser.parse_args()
    import uvloop

    uvloop.run(main(a.count, a.rounds))
