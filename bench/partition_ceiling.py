"""What bare RabbitMQ + aio-pika reach through one quorum queue versus N behind a consistent-hash exchange.

    .venv/bin/python bench/partition_ceiling.py [--partitions 1,4,32] [--count 20000] [--runs 3] [--keys 1000]
                                                [--prefetch 512] [--amqp-url URL] [--loop uvloop|asyncio]
                                                [--acks each|batch]

No Warren code: the ceiling an ordered endpoint with N partitions is held to on this machine. Per variant and run:
fresh durable quorum queues named ``ceiling-<id>-<n>``; N = 1 is one queue fed through the default exchange, N > 1
is N queues bound with weight "1" to an ``x-consistent-hash`` exchange (plugin rabbitmq_consistent_hash_exchange),
routing key ``str(i % keys)``. A publisher in its own process (this script, ``--role publish``) sends ``--count``
300-byte persistent messages with confirms and ``mandatory``, 256 unconfirmed at once, at full speed, while this
process consumes every queue: one channel each, prefetch ``max(16, prefetch // N)`` per queue (``--prefetch`` is the
endpoint's total), one ``await message.ack()`` per message (``--acks batch``: one ``multiple`` ack per queue every 5
ms, as a consumer that batches its acks sends, Warren's among them). The rate is count / (first publish -> last
message consumed, CLOCK_MONOTONIC, shared by both processes); CPU seconds per 1,000 messages are the consumer's, the
publisher's (its own, first publish -> last confirm), the broker's (beam.smp) and the whole machine's, over the
publish-and-consume window. Queues and exchange are deleted after each run, also on failure. Variants are rotated
per run (run r starts at variant r % len); ratios to N = 1 are taken run by run. Prints a table per run, the
medians, and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage
from pamqp.commands import Basic

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cpu import broker_pid, machine_busy_seconds, process_seconds

BODY = b"x" * 300
WINDOW = 256  # unconfirmed publishes at once
TIMEOUT = 120.0  # bound on every wait of a run
ACK_EVERY = 0.005  # --acks batch: seconds between a queue's multiple acks
DEFAULT_URL = os.environ.get("WARREN_BENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")


class RunError(Exception):
    """A run that could not finish: a channel closed, the publisher failed, a wait timed out."""


# --- the publisher (its own process) -------------------------------------------------------------------------


async def publish(url: str, exchange_name: str, queue_name: str, count: int, keys: int) -> dict[str, Any]:
    """Connects, says "ready" on stdout, waits for "go" on stdin, publishes; returns its figures."""
    connection = await asyncio.wait_for(aio_pika.connect(url), TIMEOUT)
    try:
        channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        exchange = (
            channel.default_exchange if not exchange_name else await channel.get_exchange(exchange_name, ensure=False)
        )
        slots = asyncio.Semaphore(WINDOW)
        failed = 0

        async def one(i: int) -> None:
            nonlocal failed
            try:
                confirm = await exchange.publish(
                    aio_pika.Message(BODY, message_id=str(i), delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                    routing_key=queue_name or str(i % keys),
                    mandatory=True,
                )
                if not isinstance(confirm, Basic.Ack):
                    failed += 1
            except Exception:  # a return (unroutable), a nack raised, a closed channel
                failed += 1
            finally:
                slots.release()

        print("ready", flush=True)
        loop = asyncio.get_running_loop()
        line = await asyncio.wait_for(loop.run_in_executor(None, sys.stdin.readline), TIMEOUT)
        if line.strip() != "go":
            raise RunError(f"publisher: expected 'go', read {line!r}")

        me = os.getpid()
        cpu_start = process_seconds(me) or 0.0
        first_publish = time.monotonic()
        tasks = []
        for i in range(count):
            await asyncio.wait_for(slots.acquire(), TIMEOUT)
            tasks.append(asyncio.create_task(one(i)))
        await asyncio.wait_for(asyncio.gather(*tasks), TIMEOUT)
        last_confirm = time.monotonic()
        cpu_end = process_seconds(me) or 0.0
    finally:
        await asyncio.wait_for(connection.close(), 30)
    return {
        "published": count - failed,
        "failed": failed,
        "first_publish": first_publish,
        "last_confirm": last_confirm,
        "publish_rate": (count - failed) / (last_confirm - first_publish),
        "cpu_s": cpu_end - cpu_start,
    }


def publisher_main(a: argparse.Namespace) -> None:
    result = run_loop(a.loop, publish(a.amqp_url, a.exchange, a.queue, a.count, a.keys))
    print(json.dumps(result), flush=True)


# --- the consumer and the run (this process) -----------------------------------------------------------------


async def declare(connection: AbstractConnection, tag: str, partitions: int) -> tuple[str, list[str]]:
    """The run's exchange ("" for the default) and quorum queues."""
    channel = await connection.channel()
    try:
        names = [f"ceiling-{tag}-{n}" for n in range(partitions)]
        queues = [
            await channel.declare_queue(name, durable=True, arguments={"x-queue-type": "quorum"}) for name in names
        ]
        if partitions == 1:
            return "", names
        exchange_name = f"ceiling-{tag}-x"
        exchange = await channel.declare_exchange(exchange_name, aio_pika.ExchangeType.X_CONSISTENT_HASH, durable=True)
        for queue in queues:
            await queue.bind(exchange, routing_key="1")  # the weight
        return exchange_name, names
    finally:
        await channel.close()


async def clean_up(url: str, exchange_name: str, names: list[str]) -> None:
    """Deletes the run's queues and exchange on a connection of its own (the run's may be broken)."""
    connection = await asyncio.wait_for(aio_pika.connect(url), 30)
    try:
        channel = await connection.channel()
        for name in names:
            await asyncio.wait_for(channel.queue_delete(name), 30)
        if exchange_name:
            await asyncio.wait_for(channel.exchange_delete(exchange_name), 30)
    finally:
        await asyncio.wait_for(connection.close(), 30)


async def start_publisher(a: argparse.Namespace, exchange_name: str, queue_name: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--role",
        "publish",
        "--amqp-url",
        a.amqp_url,
        "--exchange",
        exchange_name,
        "--queue",
        queue_name,
        "--count",
        str(a.count),
        "--keys",
        str(a.keys),
        "--loop",
        a.loop,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )


def publisher_result(process: asyncio.subprocess.Process, out: bytes) -> dict[str, Any]:
    """The publisher's figures; RunError when it failed or had publishes not confirmed."""
    if process.returncode != 0:
        raise RunError(f"publisher exited with {process.returncode}")
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    if result["failed"]:
        raise RunError(f"publisher: {result['failed']} of {result['failed'] + result['published']} not confirmed")
    return result


async def one_run(a: argparse.Namespace, partitions: int, broker: int | None) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    prefetch = max(16, a.prefetch // partitions)
    connection = await asyncio.wait_for(aio_pika.connect(a.amqp_url), TIMEOUT)
    exchange_name, names = "", [f"ceiling-{tag}-{n}" for n in range(partitions)]
    publisher: asyncio.subprocess.Process | None = None
    acking: asyncio.Task[None] | None = None
    channels: list[AbstractChannel] = []
    try:
        exchange_name, names = await declare(connection, tag, partitions)
        done = asyncio.Event()
        failure: list[str] = []
        seen: Counter[str] = Counter()
        per_queue = [0] * partitions
        last_consumed = 0.0
        closing = False

        def on_close(index: int) -> Any:
            def closed(_sender: Any, exc: BaseException | None = None) -> None:
                if not closing:
                    failure.append(f"consumer channel {index} closed: {exc!r}")
                    done.set()

            return closed

        # --acks batch: the highest tag received per queue, acked with multiple=True every ACK_EVERY seconds by
        # one task (a delivery needs no work here, so every lower tag of its channel is done with too).
        highest = [0] * partitions
        underlay: list[Any] = [None] * partitions

        def on_message(index: int) -> Any:
            async def handle(message: AbstractIncomingMessage) -> None:
                nonlocal last_consumed
                if a.acks == "batch":
                    underlay[index] = message.channel
                    highest[index] = max(highest[index], message.delivery_tag or 0)
                else:
                    try:
                        await message.ack()
                    except Exception as exc:  # the channel closed under us: report it, do not hang
                        failure.append(f"ack on queue {index} failed: {exc!r}")
                        done.set()
                        return
                seen[message.message_id or ""] += 1
                per_queue[index] += 1
                if len(seen) >= a.count and not done.is_set():
                    last_consumed = time.monotonic()
                    done.set()

            return handle

        for index, name in enumerate(names):
            channel = await connection.channel()
            channel.close_callbacks.add(on_close(index))
            await channel.set_qos(prefetch_count=prefetch)
            queue = await channel.get_queue(name, ensure=False)
            await queue.consume(on_message(index))
            channels.append(channel)

        async def ack_batches() -> None:
            sent = [0] * partitions
            while not done.is_set():
                await asyncio.sleep(ACK_EVERY)
                for index, tag in enumerate(highest):
                    if tag > sent[index]:
                        sent[index] = tag
                        try:
                            await underlay[index].basic_ack(tag, multiple=True)
                        except Exception as exc:
                            failure.append(f"ack on queue {index} failed: {exc!r}")
                            done.set()

        acking = asyncio.create_task(ack_batches()) if a.acks == "batch" else None
        publisher = await start_publisher(a, exchange_name, names[0] if partitions == 1 else "")
        assert publisher.stdin is not None and publisher.stdout is not None
        ready = await asyncio.wait_for(publisher.stdout.readline(), TIMEOUT)
        if ready.strip() != b"ready":
            raise RunError(f"publisher did not start: {ready!r}")
        me = os.getpid()
        consumer_cpu, broker_cpu, machine_cpu = (
            process_seconds(me) or 0.0,
            process_seconds(broker),
            machine_busy_seconds(),
        )
        publisher.stdin.write(b"go\n")
        await publisher.stdin.drain()

        publisher_exit = asyncio.create_task(publisher.communicate())
        consumed = asyncio.create_task(done.wait())
        finished, _ = await asyncio.wait({publisher_exit, consumed}, timeout=TIMEOUT, return_when="FIRST_COMPLETED")
        if publisher_exit in finished:
            try:  # the publisher is done first: a failed one means the consumer would wait for nothing
                publisher_result(publisher, publisher_exit.result()[0])
            except RunError:
                consumed.cancel()
                raise
        try:
            await asyncio.wait_for(consumed, TIMEOUT)
        except TimeoutError:
            raise RunError(f"timed out after {TIMEOUT:.0f} s with {len(seen)} of {a.count} consumed") from None
        if failure:
            raise RunError("; ".join(failure))
        consumer_cpu = (process_seconds(me) or 0.0) - consumer_cpu
        broker_used = None if broker_cpu is None else (process_seconds(broker) or 0.0) - broker_cpu
        machine_cpu = machine_busy_seconds() - machine_cpu

        out, _ = await asyncio.wait_for(publisher_exit, TIMEOUT)
        published = publisher_result(publisher, out)
        await asyncio.sleep(0.2)  # let a late redelivery show as a duplicate
        closing = True
    finally:
        closing = True
        if acking is not None:
            acking.cancel()
        if publisher is not None and publisher.returncode is None:
            publisher.kill()
            await asyncio.wait_for(publisher.wait(), 30)
        for channel in channels:
            if not channel.is_closed:
                await asyncio.wait_for(channel.close(), 30)
        await asyncio.wait_for(connection.close(), 30)
        await clean_up(a.amqp_url, exchange_name, names)

    per_k = 1000 / a.count
    return {
        "partitions": partitions,
        "prefetch_per_queue": prefetch,
        "published": published["published"],
        "publish_failed": published["failed"],
        "consumed": len(seen),
        "duplicates": sum(seen.values()) - len(seen),
        "rate": a.count / (last_consumed - published["first_publish"]),
        "publish_rate": published["publish_rate"],
        "consumer_cpu_per_k": consumer_cpu * per_k,
        "publisher_cpu_per_k": published["cpu_s"] * per_k,
        "broker_cpu_per_k": None if broker_used is None else broker_used * per_k,
        "machine_cpu_per_k": machine_cpu * per_k,
        "queue_min": min(per_queue),
        "queue_max": max(per_queue),
    }


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


HEADER = (
    "| N | prefetch/queue | rate/s | publish/s | consumer CPU-s/1k | publisher CPU-s/1k | broker CPU-s/1k "
    "| machine CPU-s/1k | per queue min-max | dup |\n|---|---|---|---|---|---|---|---|---|---|"
)


def row(r: dict[str, Any]) -> str:
    return (
        f"| {r['partitions']} | {r['prefetch_per_queue']} | {r['rate']:,.0f} | {r['publish_rate']:,.0f} "
        f"| {r['consumer_cpu_per_k']:.3f} | {r['publisher_cpu_per_k']:.3f} | {fmt(r['broker_cpu_per_k'], '.3f')} "
        f"| {r['machine_cpu_per_k']:.3f} | {r['queue_min']}-{r['queue_max']} | {r['duplicates']} |"
    )


def median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


async def main(a: argparse.Namespace) -> None:
    variants: list[int] = a.partitions
    broker = broker_pid(a.amqp_url)
    print(
        f"count {a.count}, keys {a.keys}, prefetch {a.prefetch} in total, window {WINDOW}, loop {a.loop}, "
        f"acks {a.acks}, "
        f"broker pid {broker}, cpus {os.cpu_count()}"
    )
    print("prefetch per queue: " + ", ".join(f"N={n}: {max(16, a.prefetch // n)}" for n in variants))
    results: dict[int, list[dict[str, Any]]] = {n: [] for n in variants}
    for run in range(a.runs):
        order = variants[run % len(variants) :] + variants[: run % len(variants)]
        print(f"\nrun {run + 1} of {a.runs} (order {', '.join(map(str, order))})\n{HEADER}")
        for n in order:
            r = await one_run(a, n, broker)
            assert r["publish_failed"] == 0, f"N={n}: {r['publish_failed']} publishes not confirmed"
            assert r["consumed"] == r["published"] == a.count, (
                f"N={n}: published {r['published']}, consumed {r['consumed']} of {a.count}"
            )
            results[n].append(r)
            print(row(r), flush=True)

    base = variants[0] if 1 not in variants else 1
    summary: dict[str, Any] = {"count": a.count, "runs": a.runs, "keys": a.keys, "prefetch": a.prefetch}
    print(f"\nmedians over {a.runs} run(s); ratio = rate / rate at N={base}, median of per-run ratios")
    print(
        "| N | rate/s | ratio | publish/s | consumer CPU-s/1k | publisher CPU-s/1k | broker CPU-s/1k "
        "| machine CPU-s/1k | dup |\n|---|---|---|---|---|---|---|---|---|"
    )
    for n in variants:
        rs = results[n]
        ratio = statistics.median(r["rate"] / b["rate"] for r, b in zip(rs, results[base], strict=True))
        m = {
            key: median([r[key] for r in rs])
            for key in (
                "rate",
                "publish_rate",
                "consumer_cpu_per_k",
                "publisher_cpu_per_k",
                "broker_cpu_per_k",
                "machine_cpu_per_k",
            )
        }
        dup = sum(r["duplicates"] for r in rs)
        summary[f"n{n}"] = {**m, "ratio": ratio, "duplicates": dup, "rates": [r["rate"] for r in rs]}
        print(
            f"| {n} | {fmt(m['rate'], ',.0f')} | {ratio:.2f} | {fmt(m['publish_rate'], ',.0f')} "
            f"| {fmt(m['consumer_cpu_per_k'], '.3f')} | {fmt(m['publisher_cpu_per_k'], '.3f')} "
            f"| {fmt(m['broker_cpu_per_k'], '.3f')} | {fmt(m['machine_cpu_per_k'], '.3f')} | {dup} |"
        )
    print(json.dumps(summary))


def run_loop(loop: str, coroutine: Any) -> Any:
    if loop == "uvloop":
        import uvloop

        return uvloop.run(coroutine)
    return asyncio.run(coroutine)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4, 32])
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--prefetch", type=int, default=512, help="the endpoint's total, split across its queues")
    parser.add_argument("--amqp-url", default=DEFAULT_URL)
    parser.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    parser.add_argument(
        "--acks", choices=["each", "batch"], default="each", help="one ack per message, or multiple acks every 5 ms"
    )
    parser.add_argument("--role", choices=["consume", "publish"], default="consume", help=argparse.SUPPRESS)
    parser.add_argument("--exchange", default="", help=argparse.SUPPRESS)
    parser.add_argument("--queue", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "publish":
        publisher_main(args)
    else:
        run_loop(args.loop, main(args))
