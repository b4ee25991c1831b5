"""The machine's ceilings, measured in the same run as the workloads: what aio-pika and aiohttp alone reach.

- publish: aio-pika publishes with confirms to a quorum queue, ``window`` unconfirmed at once;
- consume: aio-pika consumes that queue with acks, prefetch 512;
- post: aiohttp POSTs 300-byte bodies to the benchmark receiver, 256 at once.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import aio_pika
import aiohttp
import orjson


async def publish_and_consume(url: str, queue_name: str, count: int, window: int) -> dict[str, float]:
    connection = await aio_pika.connect(url)
    channel = await connection.channel(publisher_confirms=True)
    queue = await channel.declare_queue(queue_name, durable=True, arguments={"x-queue-type": "quorum"})
    body = b"x" * 300
    slots = asyncio.Semaphore(window)

    async def one(i: int) -> None:
        try:
            await channel.default_exchange.publish(
                aio_pika.Message(body, message_id=str(i), delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                routing_key=queue_name,
            )
        finally:
            slots.release()

    started = time.monotonic()
    tasks = []
    for i in range(count):
        await slots.acquire()
        tasks.append(asyncio.create_task(one(i)))
    await asyncio.gather(*tasks)
    publish_rate = count / (time.monotonic() - started)

    consume_channel = await connection.channel()
    await consume_channel.set_qos(prefetch_count=512)
    consume_queue = await consume_channel.get_queue(queue_name)
    done = asyncio.Event()
    received = 0

    async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
        nonlocal received
        await message.ack()
        received += 1
        if received >= count:
            done.set()

    started = time.monotonic()
    tag = await consume_queue.consume(on_message)
    await asyncio.wait_for(done.wait(), 120)
    consume_rate = count / (time.monotonic() - started)
    await consume_queue.cancel(tag)
    await queue.delete(if_unused=False, if_empty=False)
    await connection.close()
    return {"publish_confirmed_per_s": publish_rate, "consume_ack_per_s": consume_rate}


async def post_rate(target: str, count: int, concurrency: int) -> float:
    body = orjson.dumps({"id": "x", "type": "t", "timestamp": "2026-01-01T00:00:00Z", "data": {"p": "x" * 250}})
    slots = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one(i: int) -> None:
            try:
                async with session.post(target, data=body, headers={"webhook-id": f"ceiling-{i}"}) as r:
                    await r.read()
            finally:
                slots.release()

        started = time.monotonic()
        tasks = []
        for i in range(count):
            await slots.acquire()
            tasks.append(asyncio.create_task(one(i)))
        await asyncio.gather(*tasks)
        return count / (time.monotonic() - started)


async def main(url: str, queue: str, target: str, count: int) -> None:
    result = await publish_and_consume(url, queue, count, 512)
    result["aiohttp_post_per_s"] = await post_rate(target, count // 2, 256)
    print(orjson.dumps(result).decode())


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--queue", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--count", type=int, default=20000)
    a = parser.parse_args()
    asyncio.run(main(a.url, a.queue, a.target, a.count))
