"""Warren's end-to-end demo: a local receiver, the topology, a worker, real events, and what happened.

Run it with ``scripts/demo`` (which prepares RabbitMQ first). It uses examples/demo.toml (prefix ``demo``):
  acme     unordered, answers 503 to a quarter of first attempts (retried through the delay chain) and 500 to
           "poison" messages (exhausted after 4 attempts -> DLQ);
  billing  ordered per key (8 partitions), answers 422 to an invalid order (dead-lettered at once) and checks
           that every key's sequence arrives in order;
  audit    subscribed to everything;
  tail     on a shared lane (no queue of its own: the workers' routing stage fans events out to it).
Every request's Standard Webhooks signature is verified with the receiving toolkit.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import aio_pika
import orjson
from aiohttp import web
from rich.console import Console
from rich.table import Table

from warren.receiving.errors import VerificationError
from warren.receiving.signatures import verify_standard_webhook
from warren.topology import names
from warren.topology.config import load_config
from warren.topology.planner import plan_topology

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "examples" / "demo.toml"
WARREN = [sys.executable, "-m", "warren"]
console = Console()


class DemoReceiver:
    """The customers' side: four webhook endpoints on 127.0.0.1:8089 that verify, record and misbehave a bit."""

    def __init__(self) -> None:
        config = load_config(CONFIG)
        self.secrets = {e.name: list(e.secret) for e in config.endpoints}
        self.requests: dict[str, int] = defaultdict(int)
        self.delivered: dict[str, set[str]] = defaultdict(set)
        self.failures_sent: dict[str, int] = defaultdict(int)
        self.bad_signatures = 0
        self.last_sequence: dict[str, int] = {}
        self.order_violations = 0
        self.first_seen: set[str] = set()
        self.rng = random.Random(42)

    async def handle(self, request: web.Request) -> web.Response:
        endpoint = request.match_info["endpoint"]
        body = await request.read()
        self.requests[endpoint] += 1
        try:
            event_id = verify_standard_webhook(self.secrets[endpoint], request.headers, body)
        except (VerificationError, KeyError):
            self.bad_signatures += 1
            return web.json_response({"error": "bad signature"}, status=401)
        event = orjson.loads(body)
        status = self.decide(endpoint, event_id, event)
        if status >= 300:
            self.failures_sent[endpoint] += 1
            return web.json_response({"error": "demo failure"}, status=status)
        if endpoint == "billing" and event_id not in self.delivered[endpoint]:
            key, sequence = event["key"], event["sequence"]
            if sequence <= self.last_sequence.get(key, -1):
                self.order_violations += 1
            self.last_sequence[key] = sequence
        self.delivered[endpoint].add(event_id)
        return web.json_response({"ok": True})

    def decide(self, endpoint: str, event_id: str, event: dict[str, object]) -> int:
        data = event.get("data")
        if endpoint == "acme":
            if isinstance(data, dict) and data.get("poison"):
                return 500
            first = (endpoint, event_id) not in self.first_seen  # type: ignore[comparison-overlap]
            self.first_seen.add((endpoint, event_id))  # type: ignore[arg-type]
            if first and self.rng.random() < 0.25:
                return 503
        if endpoint == "billing" and isinstance(data, dict) and data.get("invalid"):
            return 422
        return 200


def demo_events() -> list[dict[str, object]]:
    events: list[dict[str, object]] = []
    for i in range(60):
        events.append({"type": random.choice(["message.sent", "message.delivered"]), "data": {"message": i}})
    for i in range(40):
        key = f"order-{i % 5}"
        events.append(
            {
                "type": "order.paid" if i % 4 else "order.refunded",
                "data": {"amount": 10 + i},
                "key": key,
                "sequence": i // 5,
            }
        )
    events.append({"type": "message.failed", "data": {"poison": True, "note": "acme always answers 500"}})
    events.append({"type": "message.failed", "data": {"poison": True, "note": "acme always answers 500"}})
    events.append({"type": "order.paid", "data": {"invalid": True}, "key": "order-x", "sequence": 0})
    return events


async def run(command: list[str], **kwargs: object) -> int:
    # Wide enough for the commands' tables even when the demo's output is not a terminal.
    env = {**os.environ, "COLUMNS": str(max(console.width, 150))}
    process = await asyncio.create_subprocess_exec(*command, env=env, **kwargs)  # type: ignore[arg-type]
    return await process.wait()


async def queue_depth(channel: aio_pika.abc.AbstractChannel, name: str) -> int:
    queue = await channel.declare_queue(name, passive=True)
    return int(queue.declaration_result.message_count or 0)


async def main() -> int:
    config = load_config(CONFIG)
    prefix = config.broker.prefix
    console.rule("[bold]1. warren setup: declare the topology")
    if await run([*WARREN, "setup", "--config", str(CONFIG)]) != 0:
        return 1
    connection = await aio_pika.connect(config.broker.url)
    channel = await connection.channel()
    # A fresh start: what an earlier, interrupted demo left in its queues would blur the counts. The demo owns
    # the prefix "demo", so it empties every queue of it (the state stream aside: streams are not purged).
    for queue in plan_topology(config).queues:
        if queue.arguments.get("x-queue-type") != "stream":
            await (await channel.get_queue(queue.name)).purge()

    console.rule("[bold]2. a local receiver on 127.0.0.1:8089, and a worker")
    receiver = DemoReceiver()
    app = web.Application()
    app.router.add_post("/{endpoint}", receiver.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 8089).start()
    log_file = Path(tempfile.gettempdir()) / "warren-demo-worker.log"
    with log_file.open("wb") as log:
        worker = await asyncio.create_subprocess_exec(
            *WARREN, "worker", "--config", str(CONFIG), "--log-format", "json", stdout=log, stderr=log
        )
    console.print(f"worker pid {worker.pid}, its attempt log: {log_file}")
    try:
        deadline = time.monotonic() + 20
        while b"worker consuming" not in log_file.read_bytes():
            if time.monotonic() > deadline or worker.returncode is not None:
                console.print(log_file.read_text()[-2000:])
                return 1
            await asyncio.sleep(0.1)

        console.rule("[bold]3. warren publish: 103 events from a JSON-lines file")
        events = demo_events()
        events_file = Path(tempfile.gettempdir()) / "warren-demo-events.jsonl"
        events_file.write_bytes(b"\n".join(orjson.dumps(e) for e in events) + b"\n")
        if await run([*WARREN, "publish", "--config", str(CONFIG), "--file", str(events_file)]) != 0:
            return 1

        console.rule("[bold]4. delivery, retries and dead letters")
        expected = {"acme": 60, "billing": 40, "audit": 103, "tail": 62}
        expected_dead = {"acme": 2, "billing": 1, "audit": 0, "tail": 0}
        lanes = config.lanes.count
        dlqs = {  # a lane endpoint's dead letters would be in its lane's DLQ (the demo's only lane endpoint: tail)
            e.name: names.lane_dlq(prefix, names.lane_of(e.name, lanes))
            if e.home == "lane"
            else names.dlq(prefix, e.name)
            for e in config.endpoints
        }
        deadline = time.monotonic() + 60
        dead: dict[str, int] = {}
        while time.monotonic() < deadline:
            dead = {e: await queue_depth(channel, dlqs[e]) for e in expected}
            if all(len(receiver.delivered[e]) >= n for e, n in expected.items()) and dead == expected_dead:
                break
            await asyncio.sleep(0.25)
        table = Table(title="What the receiver saw")
        for column in ("endpoint", "ordering", "requests", "events delivered", "failures answered", "in DLQ"):
            table.add_column(column, justify="right" if column not in ("endpoint", "ordering") else "left")
        for endpoint in config.endpoints:
            name = endpoint.name
            table.add_row(
                name,
                endpoint.ordering if endpoint.home == "dedicated" else f"{endpoint.ordering} (lane)",
                str(receiver.requests[name]),
                f"{len(receiver.delivered[name])}/{expected[name]}",
                str(receiver.failures_sent[name]),
                str(dead.get(name, 0)),
            )
        console.print(table)
        console.print(
            f"bad signatures: {receiver.bad_signatures}   per-key order violations (billing): "
            f"{receiver.order_violations}"
        )
        ok = (
            all(len(receiver.delivered[e]) == n for e, n in expected.items())
            and dead == expected_dead
            and receiver.bad_signatures == 0
            and receiver.order_violations == 0
        )
        console.rule("[bold]one retried event's attempt log (JSON lines from the worker)")
        lines = [orjson.loads(x) for x in log_file.read_bytes().splitlines() if b'"attempt"' in x]
        retried = next((x["event_id"] for x in lines if x.get("outcome") == "retry" and x["endpoint"] == "acme"), None)
        for line in (x for x in lines if x.get("event_id") == retried and x["endpoint"] == "acme"):
            console.print(
                {
                    k: line[k]
                    for k in ("endpoint", "event_id", "attempt", "status", "outcome", "duration_ms", "next_delay_s")
                    if k in line
                }
            )
        extra = [["status"], ["dlq", "list", "acme"]]
        for args in extra:
            console.rule(f"[bold]warren {' '.join(args)}")
            await run([*WARREN, *args, "--config", str(CONFIG)])
        console.rule("[bold green]demo passed" if ok else "[bold red]demo failed: see the table above")
        return 0 if ok else 1
    finally:
        if worker.returncode is None:
            worker.send_signal(signal.SIGTERM)
            await asyncio.wait_for(worker.wait(), 30)
        await runner.cleanup()
        await connection.close()


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(asyncio.run(main()))
