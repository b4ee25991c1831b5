"""Warren across a network fault on the partition harness (scripts/partition): one mixed run per fault.

    scripts/partition up && eval "$(scripts/partition env)"
    .venv/bin/python bench/partition.py [--faults isolate-follower,isolate-leader,oneway,pause,lossy]
                                        [--events 2000] [--hold 20]

Per fault: a vhost with four endpoints (an unordered and an ordered one with 8 partitions, both dedicated; one on a
shared lane, ``[lanes] count = 2``; and a flaky one whose receiver answers 503 to every fourth request), their
quorum queue leaders all on the node ``warren setup`` connected to; two workers, one with a connection on the
faulted node; ``--events`` keyed events published in batches with ``Publisher.publish_many`` (deadline 30 s) while
the fault hits the faulted node a quarter of the way in, for ``--hold`` seconds, then is healed (``scripts/partition
fault``). Faulted node: the one holding the leaders (``isolate-leader``, ``oneway``, ``pause``, ``lossy``,
``linkdown``) or one holding none (``isolate-follower``). Prints per endpoint what of the confirmed events was
delivered, lost, duplicated, reordered (first deliveries per key) and delivered to two workers at once for one key
(the ordered endpoint); what the publish reported not stored; how long until the cluster was whole again and every
confirmed event delivered; what was left in the queues; whether the workers were alive throughout; the nodes'
RabbitMQ version. tests/partition/test_faults.py runs it and asserts on it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import (
    SECRET,
    Broker,
    Process,
    Receiver,
    Seen,
    _bases,
    bench_config,
    endpoint_figures,
    fresh_vhost,
    leaders,
)
from tests.support.processes import write_config
from warren.broker.amqp.connection import connect
from warren.broker.applier import apply_setup
from warren.broker.events import Event
from warren.broker.management import ManagementClient
from warren.broker.publisher import Publisher
from warren.topology.config import WarrenConfig

SCRIPT = os.environ.get("WARREN_TEST_PARTITION_SCRIPT", str(ROOT / "scripts" / "partition"))
URLS = json.loads(os.environ.get("WARREN_TEST_PARTITION_URLS", "[]") or "[]")
MGMT = json.loads(os.environ.get("WARREN_TEST_PARTITION_MANAGEMENT_URLS", "[]") or "[]")
BROKER = Broker("partition harness", URLS, MGMT)
ENDPOINTS = ("unordered", "ordered", "lane", "flaky")
FAULTS = ("isolate-follower", "isolate-leader", "oneway", "pause", "lossy", "linkdown")
KEYS = 50
BATCH = 100


class FaultReceiver(Receiver):
    """bench.cluster's receiver, plus: "flaky" answers 503 to every fourth request; on "ordered", a request that
    arrives while another of the same key is being answered is counted as an overlap (two workers, or two
    consumers, serving one key at once)."""

    def __init__(self) -> None:
        super().__init__()
        self.flaky_requests = 0
        self.busy: Counter[str] = Counter()
        self.overlaps = 0

    async def _hook(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name == "flaky":
            self.flaky_requests += 1
            if self.flaky_requests % 4 == 0:
                return web.Response(status=503, text="flaky")
        if name != "ordered":
            return await super()._hook(request)
        body = await request.json()
        key = str((body.get("data") or {}).get("key"))
        if self.busy[key]:
            self.overlaps += 1
        self.busy[key] += 1
        try:
            await asyncio.sleep(0.002)  # long enough for a second delivery of the key to overlap, if one comes
            return await super()._hook(request)
        finally:
            self.busy[key] -= 1


def fault_config(vhost: str, prefix: str, receiver: Receiver) -> WarrenConfig:
    common = {"secret": SECRET, "events": ["bench.#"], "timeout": "10s"}
    endpoints = [
        {**common, "name": "unordered", "url": receiver.url("unordered"), "concurrency": 32},
        {**common, "name": "ordered", "url": receiver.url("ordered"), "ordering": "key", "partitions": 8},
        {**common, "name": "lane", "url": receiver.url("lane"), "concurrency": 32, "home": "lane"},
        {**common, "name": "flaky", "url": receiver.url("flaky"), "concurrency": 32},
    ]
    retry = {"base": "100ms", "cap": "1s", "max_attempts": 30}
    return bench_config(BROKER, vhost, prefix, endpoints, lanes={"count": 2}, retry=retry)


async def harness(*args: str, timeout: float = 400) -> str:
    process = await asyncio.create_subprocess_exec(
        SCRIPT, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        out, _ = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()  # the fault command heals on the way out (its trap)
        await process.wait()
        raise
    if process.returncode:
        raise RuntimeError(f"scripts/partition {' '.join(args)} failed: {out.decode(errors='replace')[-1500:]}")
    return out.decode(errors="replace")


def node_number(node: str) -> int:
    return int(node.split("@")[0].removeprefix("warren"))


async def nodes_of(pid: int) -> set[int]:
    """The nodes (1..3) a process has AMQP connections to, from its sockets (``ss``): the management API's
    connection list can miss a node's connections for a while after that node restarted."""
    process = await asyncio.create_subprocess_exec("ss", "-Htnp", stdout=asyncio.subprocess.PIPE)
    out, _ = await process.communicate()
    nodes: set[int] = set()
    for line in out.decode(errors="replace").splitlines():
        fields = line.split()
        if f"pid={pid}," in line and len(fields) >= 5 and fields[4].endswith(":5672"):
            host = fields[4].rsplit(":", 1)[0]
            if host in {urlsplit(url).hostname for url in BROKER.urls}:
                nodes.add([urlsplit(url).hostname for url in BROKER.urls].index(host) + 1)
    return nodes


async def place_workers(path: Path, workdir: Path, prefix: str, victim: int) -> list[Process]:
    """Two workers, the first with a connection on the faulted node (a worker that has none there is started
    again, 12 times at most: each connection picks a node at random)."""
    workers: list[Process] = []
    for _ in range(12):
        log = workdir / f"{prefix}-worker-{len(workers)}-{uuid.uuid4().hex[:4]}.log"
        process = await Process(["worker", "--config", str(path)], log).start(b"worker consuming", timeout=90)
        if workers or victim in await nodes_of(process.pid):
            workers.append(process)
            if len(workers) == 2:
                return workers
        else:
            await process.stop()
    for process in workers:
        await process.stop()
    raise RuntimeError(f"no worker landed on warren{victim} in 12 starts")


async def publish(config: WarrenConfig, events: int, progress: list[int]) -> dict[str, Any]:
    """``events`` keyed events in batches of BATCH, each batch through publish_many; what was confirmed."""
    connection = await connect(config.broker.urls, name="bench-partition-publisher")
    confirmed: set[str] = set()
    failed: list[str] = []
    try:
        publisher = await Publisher.open(connection, config.broker.prefix)
        for start in range(0, events, BATCH):
            batch = [
                Event(type="bench.event", id=f"e-{n}", key=f"k{n % KEYS}", data={"n": n, "key": f"k{n % KEYS}"})
                for n in range(start, min(events, start + BATCH))
            ]
            report = await publisher.publish_many(batch, deadline=30)
            confirmed.update(report.confirmed)
            failed.extend(f"{event_id}: {error}" for event_id, error in report.failed)
            progress[0] = start + len(batch)
            await asyncio.sleep(0.3)
    finally:
        await connection.close()
    return {"confirmed": confirmed, "not_stored": len(failed), "not_stored_sample": failed[:3]}


async def queued(api: ManagementClient) -> dict[str, int]:
    """Messages in the vhost's queues (ready, unacked, or held by a quorum queue's dead-letter worker), per queue
    holding any; streams (the endpoint records and state logs) keep what they hold and are left out."""
    out: dict[str, int] = {}
    for queue in await api.queues():
        if queue.get("type") == "stream":
            continue
        count = int(queue.get("messages") or 0)  # ready, unacked and (quorum) messages_dlx
        if count:
            out[str(queue["name"])] = count
    return out


async def fault_run(fault: str, events: int = 2000, hold: int = 20, workdir: Path | None = None) -> dict[str, Any]:
    """One run of the module docstring's scenario under ``fault``; returns its figures."""
    assert BROKER.urls, "no partition harness: scripts/partition up; eval $(scripts/partition env)"
    workdir = workdir or Path(tempfile.mkdtemp(prefix="warren-partition-"))
    receiver = await FaultReceiver().start()
    workers: list[Process] = []
    figures: dict[str, Any] = {"fault": fault, "events": events, "hold_s": hold, "phases": {}}
    loop = asyncio.get_running_loop()
    begun = loop.time()

    def phase(name: str) -> None:
        """When each step ended, seconds from the start: a run that overruns its bound says where (stderr, -s)."""
        figures["phases"][name] = round(loop.time() - begun, 1)
        print(f"[partition-run] {fault}: {name} at {figures['phases'][name]} s", file=sys.stderr, flush=True)

    try:
        async with fresh_vhost(BROKER) as vhost:
            prefix = f"f{uuid.uuid4().hex[:6]}"
            config = fault_config(vhost, prefix, receiver)
            await apply_setup(config)
            path = write_config(workdir, config, f"{prefix}.toml")
            async with ManagementClient(_bases(BROKER.management), "guest", "guest", vhost, timeout=60) as api:
                figures["rabbitmq_version"] = str((await api.overview()).get("rabbitmq_version", ""))
                spread = await leaders(api)
                figures["leaders"] = dict(spread)
                leader = node_number(spread.most_common(1)[0][0])
                victim = leader if fault != "isolate-follower" else next(n for n in (1, 2, 3) if n != leader)
                kind = fault.removeprefix("isolate-") if fault.startswith("isolate-") else fault
                kind = "isolate" if fault.startswith("isolate-") else kind
                figures["faulted"] = f"warren{victim} ({'leaders' if victim == leader else 'no leaders'})"
                phase("topology")
                workers = await place_workers(path, workdir, prefix, victim)
                phase("workers placed")
                progress = [0]
                started = loop.time()
                publishing = asyncio.create_task(publish(config, events, progress))
                while progress[0] < events // 4 and not publishing.done():
                    await asyncio.sleep(0.05)
                figures["published_before_fault"] = progress[0]
                faulted_at = loop.time()
                phase("fault applied")
                await harness("fault", kind, str(victim), str(hold))
                healed_at = loop.time()
                phase("healed")
                figures["restarted_by_harness"] = [
                    line for line in (await harness("await")).splitlines() if line.startswith("restarted")
                ]
                figures["whole_after_heal_s"] = round(loop.time() - healed_at, 1)
                phase("whole")
                outcome = await asyncio.wait_for(publishing, 300)
                phase("published")
                confirmed: set[str] = outcome["confirmed"]
                figures["confirmed"] = len(confirmed)
                figures["not_stored"] = outcome["not_stored"]
                figures["not_stored_sample"] = outcome["not_stored_sample"]
                deadline = loop.time() + 240
                missing = dict.fromkeys(ENDPOINTS, len(confirmed))
                while loop.time() < deadline:
                    missing = {p: len(confirmed - receiver.paths.get(p, Seen()).ok) for p in ENDPOINTS}
                    if not any(missing.values()):
                        break
                    await asyncio.sleep(0.2)
                figures["delivered_after_heal_s"] = round(loop.time() - healed_at, 1)
                phase("delivered" if not any(missing.values()) else "delivery wait ended")
                figures["fault_to_delivered_s"] = round(loop.time() - faulted_at, 1)
                await asyncio.sleep(1.0)  # late duplicates, if any, are counted too
                for name in ENDPOINTS:
                    seen = receiver.paths.get(name, Seen())
                    figures[name] = endpoint_figures(seen, confirmed, ordered=name == "ordered")
                figures["ordered"]["overlaps"] = receiver.overlaps
                left: dict[str, int] = {}
                for _ in range(60):  # management statistics lag a few seconds
                    left = await queued(api)
                    if not left:
                        break
                    await asyncio.sleep(1)
                figures["left_in_queues"] = left
                phase("queues checked")
                figures["workers_alive"] = all(w.alive for w in workers)
                figures["seconds"] = round(loop.time() - started, 1)
                figures["workdir"] = str(workdir)
            for worker in workers:
                await worker.stop()
            workers.clear()
    finally:
        for worker in workers:
            await worker.stop()
        await receiver.stop()
        await harness("heal", timeout=60)
    return figures


def broken_promises(figures: dict[str, Any]) -> list[str]:
    """What of the run's promises did not hold, each named with its figure: every event accounted for, none
    confirmed lost, duplicates bounded, keys in order and never served twice at once, queues empty, workers up."""
    broken = []
    if figures["confirmed"] + figures["not_stored"] != figures["events"]:
        broken.append(f"confirmed {figures['confirmed']} + not stored {figures['not_stored']} != {figures['events']}")
    for endpoint in ENDPOINTS:
        if figures[endpoint]["lost"]:
            broken.append(f"{endpoint}: {figures[endpoint]['lost']} confirmed events never delivered")
        bound = duplicate_bound(endpoint, figures)
        if figures[endpoint]["duplicates"] > bound:
            broken.append(f"{endpoint}: {figures[endpoint]['duplicates']} duplicates (> {bound})")
    for figure in ("order_violations", "overlaps"):
        if figures["ordered"][figure]:
            broken.append(f"ordered: {figures['ordered'][figure]} {figure}")
    if figures["left_in_queues"]:
        broken.append(f"left in queues: {figures['left_in_queues']}")
    if not figures["workers_alive"]:
        broken.append("a worker died")
    return broken


DUPLICATES = 600  # the deliveries in flight when a link went, by the prefetch windows, over a run's reconnects
# The endpoint whose deliveries are being retried (503 to every fourth request): its work queue takes the retries
# back from the delay chain's dead-letter workers as well as the publisher's events.
RETRYING = "flaky"


def duplicate_bound(endpoint: str, figures: dict[str, Any]) -> int:
    """The duplicates an endpoint may see in the run: DUPLICATES, except where RabbitMQ 4.0 is known to exceed it.

    On RabbitMQ 4.0.5, a one-way fault on the node holding the leaders sometimes ends with the retrying endpoint's
    work queue offering again nearly every message the other worker had settled during the fault, for about as long
    as the fault lasted after the heal: 2,849, 3,300 and 3,326 duplicates of 2,000 events (a CI run; 2 of 6 runs
    here, 2026-12-07), 32 on the unordered endpoint in those runs, none in 6 runs with the 503s turned off, none on
    3.10.8 (docs/cluster.md, "One-way faults on 4.0.5"). Nothing was lost and order held.
    There the bound is one more copy of each event and of each of its retries (the copies meet 503s in their turn):
    twice the events, which still fails a queue that goes on repeating itself.
    """
    version = str(figures.get("rabbitmq_version", ""))
    if endpoint == RETRYING and figures.get("fault") == "oneway" and version.startswith("4.0."):
        return 2 * int(figures["events"])
    return DUPLICATES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--faults", default=",".join(FAULTS[:5]))
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--hold", type=int, default=20)
    args = parser.parse_args()
    for fault in args.faults.split(","):
        started = time.monotonic()
        figures = asyncio.run(fault_run(fault, args.events, args.hold))
        print(json.dumps(figures, indent=2), f"\n# {fault}: {time.monotonic() - started:.0f} s", flush=True)
        print(f"# {fault}: broken promises: {broken_promises(figures) or 'none'}", flush=True)


if __name__ == "__main__":
    main()
