"""The bare-loop baseline: the simplest possible consumer. Consume one queue, POST the body, ack.

No signing, no classification, no retries, no logs: the floor of work per message, to compare Warren with.
``--loop`` picks the event loop (uvloop by default, as Warren's worker uses when it is installed).
"""

from __future__ import annotations

import argparse
import asyncio
import signal

import aio_pika
import aiohttp


async def main(url: str, queue_name: str, target: str, prefetch: int) -> None:
    connection = await aio_pika.connect(url)
    channel = await connection.channel()
    await channel.set_qos(prefetch_count=prefetch)
    queue = await channel.get_queue(queue_name)
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))

    async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
        async with session.post(target, data=message.body, headers={"webhook-id": message.message_id or ""}) as r:
            await r.read()
        await message.ack()

    await queue.consume(on_message)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print(f"bare loop consuming on {type(asyncio.get_running_loop()).__module__.partition('.')[0]}", flush=True)
    await stop.wait()
    await session.close()
    await connection.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--queue", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--prefetch", type=int, default=512)
    parser.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    a = parser.parse_args()
    factory = None
    if a.loop == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main(a.url, a.queue, a.target, a.prefetch))
