"""What thousands of endpoints cost: setup time, RabbitMQ memory and handles, worker memory, delivery.

    .venv/bin/python bench/endpoints_scale.py [--endpoints 1,100,1000,3000] [--types quorum,classic]
                                              [--events 3] [--one-channel 1000] [--budget 2400]
    .venv/bin/python bench/endpoints_scale.py --lane-creates 10000 --lane-store 100000 [--lanes 16] [--runs 3]
                                              [--stores sqlite,postgresql] [--sample 50] [--baseline 10]

With ``--lane-creates`` or ``--lane-store`` it measures issue 34's scale figures for lane endpoints instead
(bench/lane_figures.py), on the node's default vhost under a prefix of its own.

Run it against a node of its own (WARREN_BENCH_AMQP_URL and WARREN_BENCH_MANAGEMENT_URL; the path of the AMQP
URL is ignored): each row gets a vhost of its own, deleted at the end of the row whatever happens. Per row
(queue type x endpoint count, every endpoint unordered and subscribed to the same event type):

- ``warren setup`` through its applier (the capacity check included), timed; with ``--one-channel N`` the rows
  of N endpoints are also set up declaring on one channel, for the ratio of the pipelined declares.
- A second setup of the same plan (nothing to create), timed.
- RabbitMQ's memory before and after setup, and with the worker connected: the node's RSS, and what the
  queues hold (their processes, Raft tables, metadata, metrics: less noisy), from its memory breakdown; the
  file-handle cache's handles the quorum queues hold (3.10).
- One ``warren worker`` serving every endpoint: time to start consuming, resident memory (VmRSS).
- ``--events`` events published, each delivered to every endpoint: deliveries/s and the time to the last one.
- The time RabbitMQ takes to delete the vhost.

The machine's ceilings are printed first (cores, load, the node's open-files limit and memory limit). Every
stage is bounded in time; a stage that fails ends its row with the reason, and the next row runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.processes import write_config
from warren.broker import applier, declare
from warren.broker.amqp.connection import connect
from warren.broker.capacity import HANDLES_PER_QUORUM_QUEUE, read_nodes
from warren.broker.events import Event
from warren.broker.management import ManagementClient
from warren.broker.publisher import Publisher
from warren.topology.config import WarrenConfig
from warren.topology.planner import plan_topology

AMQP = os.environ.get("WARREN_BENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
MGMT = os.environ.get("WARREN_BENCH_MANAGEMENT_URL", "http://guest:guest@127.0.0.1:15672")
PORT = 18093
DECLARE_CHANNELS = declare.DECLARE_CHANNELS
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
STATS_INTERVAL = 5.5  # the management API refreshes node figures every 5 s


def vhost_url(vhost: str) -> str:
    parts = urlsplit(AMQP)
    return urlunsplit((parts.scheme, parts.netloc, "/" + quote(vhost, safe=""), "", ""))


def config_for(vhost: str, count: int, queue_type: str) -> WarrenConfig:
    endpoints = [
        {"name": f"e{i}", "url": f"http://127.0.0.1:{PORT}/hook/e{i}", "secret": SECRET, "events": ["scale.event"]}
        for i in range(count)
    ]
    return WarrenConfig(
        broker={"url": vhost_url(vhost), "management_url": MGMT, "prefix": "scale", "queue_type": queue_type},
        retry={"base": "100ms", "cap": "1s"},
        delivery={"allow_private_networks": True},
        endpoints=endpoints,
    )


class Receiver:
    """Counts distinct (endpoint, event) deliveries, in this process."""

    def __init__(self) -> None:
        self.seen: set[tuple[str, str]] = set()
        self.last = 0.0

    async def hook(self, request: web.Request) -> web.Response:
        await request.read()
        key = (request.match_info["name"], request.headers.get("webhook-id", ""))
        if key not in self.seen:
            self.seen.add(key)
            self.last = time.monotonic()
        return web.Response(text="ok")


def node_api(vhost: str = "/") -> ManagementClient:
    parts = urlsplit(MGMT)
    return ManagementClient(
        f"{parts.scheme}://{parts.hostname}:{parts.port}", parts.username or "guest", parts.password or "guest", vhost,
        timeout=600,
    )  # fmt: skip


QUEUE_MEMORY = ("queue_procs", "quorum_queue_procs", "quorum_queue_dlx_procs", "quorum_ets", "mnesia", "metrics")


async def node_memory(api: ManagementClient) -> tuple[float, float]:
    """The node's memory in MiB, as (RSS, what queues hold: their processes, Raft tables, metadata, metrics).

    Read from the node's memory breakdown, after a garbage collection has had time to run (the statistics
    interval): the RSS moves with the allocator, the queues' share much less."""
    await asyncio.sleep(STATS_INTERVAL)
    name = (await api.request("GET", "nodes?columns=name"))[0]["name"]
    memory = (await api.request("GET", f"nodes/{quote(name, safe='')}?memory=true"))["memory"]
    return memory["total"]["rss"] / 2**20, sum(int(memory.get(k) or 0) for k in QUEUE_MEMORY) / 2**20


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def ceilings() -> None:
    async with node_api() as api:
        overview = await api.overview()
        node = (await api.request("GET", "nodes?columns=name,fd_total,mem_limit,sockets_total"))[0]
        handles = await read_nodes(api)
    print(
        f"# endpoints_scale · {platform.node()} · {os.cpu_count()} cores · load {os.getloadavg()[0]:.1f} · "
        f"Python {platform.python_version()} · {time.strftime('%Y-%m-%d %H:%M')}"
    )
    print(
        f"# RabbitMQ {overview['rabbitmq_version']} · node {node['name']} · open files {node['fd_total']} · "
        f"file-handle cache limit {handles[0].limit} · memory limit {node['mem_limit'] / 2**30:.1f} GiB"
    )


async def start_worker(path: Path, log: Path, timeout: float) -> tuple[asyncio.subprocess.Process, float]:
    started = time.monotonic()
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "warren", "worker", "--config", str(path), stdout=out, stderr=out
        )
    while b"worker consuming" not in log.read_bytes():
        if process.returncode is not None or time.monotonic() - started > timeout:
            tail = log.read_text(errors="replace")[-600:].replace("\n", " | ")
            if process.returncode is None:
                process.kill()
            raise RuntimeError(f"worker did not start: {tail}")
        await asyncio.sleep(0.2)
    return process, time.monotonic() - started


async def one_row(
    queue_type: str, count: int, events: int, one_channel: bool, workdir: Path, receiver: Receiver
) -> dict[str, Any]:
    vhost = f"warren-scale-{uuid.uuid4().hex[:8]}"
    row: dict[str, Any] = {"type": queue_type, "endpoints": count, "channels": 1 if one_channel else DECLARE_CHANNELS}
    api = node_api(vhost)
    worker: asyncio.subprocess.Process | None = None
    async with api:
        await api.create_vhost(vhost, urlsplit(MGMT).username or "guest")
        try:
            config = config_for(vhost, count, queue_type)
            plan = plan_topology(config)
            row["objects"] = len(plan.exchanges) + len(plan.queues) + len(plan.bindings)
            row["queues"] = len(plan.queues)
            before = await node_memory(api)
            declare.DECLARE_CHANNELS = 1 if one_channel else DECLARE_CHANNELS
            started = time.monotonic()
            await asyncio.wait_for(applier.apply_setup(config), 900)
            row["setup_s"] = time.monotonic() - started
            started = time.monotonic()
            await asyncio.wait_for(applier.apply_setup(config), 600)
            row["again_s"] = time.monotonic() - started
            after = await node_memory(api)
            row["broker_rss_mib"] = after[0] - before[0]
            row["queues_mib"] = after[1] - before[1]
            row["queues_kib_per_endpoint"] = (after[1] - before[1]) * 1024 / count
            quorum = sum(1 for q in plan.queues if q.arguments["x-queue-type"] == "quorum")
            row["handles"] = HANDLES_PER_QUORUM_QUEUE * quorum if (await read_nodes(api))[0].limit else 0
            if one_channel:
                return row
            path = write_config(workdir, config, f"{vhost}.toml")
            worker, row["worker_start_s"] = await start_worker(path, workdir / f"{vhost}.log", 600)
            row["worker_rss_mib"] = rss_mib(worker.pid)
            row["broker_rss_with_worker_mib"] = (await node_memory(api))[0] - before[0]
            connection = await connect(vhost_url(vhost), name="bench-endpoints-scale")
            try:
                publisher = await Publisher.open(connection, "scale")
                started = time.monotonic()
                await publisher.publish_many(Event(type="scale.event", data={"n": i}) for i in range(events))
                wanted = events * count
                deadline = started + 600
                while len(receiver.seen) < wanted and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                row["delivered"] = f"{len(receiver.seen)}/{wanted}"
                row["deliveries_per_s"] = len(receiver.seen) / max(1e-9, receiver.last - started)
                row["last_delivery_s"] = receiver.last - started
            finally:
                await connection.close()
            row["worker_rss_after_mib"] = rss_mib(worker.pid)
            # Attempts that failed and were retried (a receiver too slow for the burst times out, for example)
            row["retries"] = (workdir / f"{vhost}.log").read_bytes().count(b"outcome=retry")
        except Exception as exc:  # a row that fails says why; the next row runs
            row["failed"] = f"{type(exc).__name__}: {exc}"[:300]
        finally:
            if worker is not None and worker.returncode is None:
                worker.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(worker.wait(), 60)
                except TimeoutError:
                    worker.kill()
            started = time.monotonic()
            try:
                await api.delete_vhost(vhost)
                row["delete_vhost_s"] = time.monotonic() - started
            except Exception as exc:
                row["failed"] = f"{row.get('failed', '')}; vhost {vhost} NOT deleted: {exc}"[:400]
    return row


async def serve(receiver_box: list[Receiver]) -> web.AppRunner:
    async def hook(request: web.Request) -> web.Response:
        return await receiver_box[0].hook(request)

    app = web.Application()
    app.router.add_post("/hook/{name}", hook)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", PORT).start()
    return runner


COLUMNS = (
    "type", "endpoints", "channels", "objects", "queues", "setup_s", "again_s", "broker_rss_mib", "queues_mib",
    "queues_kib_per_endpoint", "handles", "worker_start_s", "worker_rss_mib", "broker_rss_with_worker_mib",
    "delivered", "retries", "deliveries_per_s", "last_delivery_s", "worker_rss_after_mib", "delete_vhost_s", "failed",
)  # fmt: skip


def cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"
    return "" if value is None else str(value)


async def main(counts: list[int], types: list[str], events: int, one_channel: set[int], budget: float) -> None:
    await ceilings()
    workdir = Path(tempfile.mkdtemp(prefix="warren-scale-"))
    box = [Receiver()]
    runner = await serve(box)
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    deadline = time.monotonic() + budget
    try:
        for count in counts:
            for queue_type in types:
                for single in (False, True) if count in one_channel else (False,):
                    if time.monotonic() > deadline:
                        print(f"| {queue_type} | {count} | budget of {budget:.0f} s spent: not run |")
                        continue
                    box[0] = Receiver()
                    row = await one_row(queue_type, count, events, single, workdir, box[0])
                    print("| " + " | ".join(cell(row.get(c)) for c in COLUMNS) + " |", flush=True)
    finally:
        await runner.cleanup()


def lane_figures(args: argparse.Namespace) -> None:
    """Issue 34's scale figures for lane endpoints (bench/lane_figures.py), instead of the dedicated rows."""
    from bench.lane_figures import run_lane_figures

    asyncio.run(run_lane_figures(args))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--lane-creates", type=int, default=0, help="lane endpoints created through the admin API")
    parser.add_argument("--lane-store", type=int, default=0, help="lane endpoints in the store and the stream")
    parser.add_argument("--lanes", type=int, default=16, help="[lanes] count for the lane figures")
    parser.add_argument("--sample", type=int, default=50, help="every Nth created endpoint is timed to its delivery")
    parser.add_argument("--stores", default="sqlite,postgresql", help="stores the creates and the fill use")
    parser.add_argument("--baseline", type=int, default=10, help="endpoints of the route rate's baseline")
    parser.add_argument("--route-events", type=int, default=1000, help="events of one tenant per route run")
    parser.add_argument("--runs", type=int, default=3, help="runs of each lane figure (medians)")
    parser.add_argument("--create-budget", type=float, default=480, help="seconds of creates, at most, per store")
    parser.add_argument("--endpoints", default="1,100,1000,3000")
    parser.add_argument("--types", default="quorum,classic")
    parser.add_argument("--events", type=int, default=3, help="events published; each goes to every endpoint")
    parser.add_argument("--one-channel", default="1000", help="endpoint counts also set up on one channel")
    parser.add_argument("--budget", type=float, default=2400, help="seconds; no row starts after it")
    a = parser.parse_args()
    if a.lane_creates or a.lane_store:
        lane_figures(a)
        sys.exit(0)
    asyncio.run(
        main(
            [int(x) for x in a.endpoints.split(",")],
            a.types.split(","),
            a.events,
            {int(x) for x in a.one_channel.split(",") if x},
            a.budget,
        )
    )
