"""Lane endpoints created one by one through the admin API, with a worker running (issue 34, part 6).

A real ``warren api`` and ``warren worker`` (processes of their own, ``[lanes] count`` lanes, a SQLite store) on
a prefix of the run's own. ``count`` creates, one at a time, each its own tenant; for every ``sample``-th one,
as soon as its create is answered, an event of its tenant is published (again every 100 ms until one arrives:
an event published before a worker's router has heard of the endpoint is not routed to it) and the first
delivery at the local receiver is timed from the create's answer. Before and after: the node's queues (all,
and the prefix's) and its ``mem_used``; after: the worker's RSS and its open files. Everything of the prefix is
deleted at the end, whatever happened.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

from bench.lane_support import (
    ADMIN_TOKEN,
    SECRET,
    FirstArrivals,
    cleanup,
    free_port,
    lane_config,
    node_api,
    node_figures,
    quantile,
    rss_mib,
    run_warren,
    stop,
    wait_for_line,
    warren,
)
from tests.support.processes import write_config
from warren.broker.amqp.connection import connect
from warren.broker.events import Event
from warren.broker.publisher import Publisher

SERVED_WAIT = 10.0  # seconds a sampled endpoint may take to be served before it counts as not served
REPUBLISH = 0.1  # seconds between the probe events of one sampled endpoint


async def _served_after(
    publisher: Publisher, receiver: FirstArrivals, name: str, tenant: str, answered: float
) -> float | None:
    """Seconds from the create's answer to the endpoint's first delivery (None: not within SERVED_WAIT)."""
    arrived = receiver.wait_for(name)
    while time.monotonic() - answered < SERVED_WAIT:
        await publisher.publish(Event(type="scale.created", tenant=tenant, data={"probe": name}))
        try:
            await asyncio.wait_for(arrived.wait(), REPUBLISH)
        except TimeoutError:
            continue
        return receiver.first[name] - answered
    return None


async def measure(
    count: int, lanes: int, sample: int, out: dict[str, Any], store_url: str | None = None, budget: float = 480
) -> None:
    """``count`` creates with ``[lanes] count = lanes``; the figures into ``out`` (SQLite unless ``store_url``)."""
    prefix = f"lc{uuid.uuid4().hex[:8]}"
    out["prefix"] = prefix
    workdir = Path(tempfile.mkdtemp(prefix="warren-lane-creates-"))
    port = free_port()
    config = lane_config(prefix, store_url or f"sqlite:///{workdir / 'store.sqlite3'}", port, lanes)
    path = write_config(workdir, config)
    log = workdir / "warren.log"
    worker = api_process = None
    tasks: list[asyncio.Task[float | None]] = []
    try:
        async with node_api() as api:
            out["node_before_setup"] = await node_figures(api, prefix, settle=False)
            await run_warren("setup", "--config", str(path), log=log)
            await run_warren("store", "migrate", "--config", str(path), log=log)
            worker_log = workdir / "worker.log"
            worker = await warren("worker", "--config", str(path), log=worker_log)
            out["worker_start_s"] = await wait_for_line(worker, worker_log, b"worker consuming", 120)
            api_log = workdir / "api.log"
            api_process = await warren("api", "--config", str(path), log=api_log)
            latencies: list[float] = []
            statuses: dict[int, int] = {}
            headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            async with (
                FirstArrivals() as receiver,
                aiohttp.ClientSession(headers=headers, timeout=aiohttp.ClientTimeout(total=30)) as http,
            ):
                await _api_ready(http, port)
                # The API's first state read follows the state stream (an exclusive queue of its own): before
                # the figures, so that they count what the creates add.
                async with http.get(f"http://127.0.0.1:{port}/v1/endpoints") as reply:
                    assert reply.status == 200, await reply.text()
                before = await node_figures(api, prefix)
                out["before"] = before
                connection = await connect(config.broker.urls, name="bench-lane-creates")
                try:
                    publisher = await Publisher.open(connection, prefix)
                    started = time.monotonic()
                    for i in range(count):
                        if time.monotonic() - started > budget:
                            out["stopped"] = f"after {i:,} creates: the budget of {budget:.0f} s was spent"
                            break
                        if i and i % 1000 == 0:
                            print(f"  {i:,} created, {time.monotonic() - started:.0f} s", flush=True)
                        name, tenant = f"e{i}", f"t{i}"
                        body = {
                            "name": name, "tenant": tenant, "url": f"{receiver.url}/{name}", "events": ["scale.*"],
                            "secret": SECRET, "home": "lane",
                        }  # fmt: skip
                        sent = time.monotonic()
                        async with http.post(f"http://127.0.0.1:{port}/v1/endpoints", json=body) as reply:
                            await reply.read()
                            answered = time.monotonic()
                            statuses[reply.status] = statuses.get(reply.status, 0) + 1
                        latencies.append(answered - sent)
                        if i % sample == 0 and reply.status == 201:
                            tasks.append(
                                asyncio.create_task(_served_after(publisher, receiver, name, tenant, answered))
                            )
                    out["creates_s"] = time.monotonic() - started
                    served = await asyncio.gather(*tasks)
                finally:
                    await connection.close()
            out["statuses"] = statuses
            out["p50_ms"] = quantile(latencies, 0.5) * 1000
            out["p99_ms"] = quantile(latencies, 0.99) * 1000
            out["max_ms"] = max(latencies) * 1000
            times = [s for s in served if s is not None]
            out["served"] = f"{len(times)}/{len(served)}"
            out["served_p50_ms"] = quantile(times, 0.5) * 1000
            out["served_p99_ms"] = quantile(times, 0.99) * 1000
            out["served_max_ms"] = max(times, default=float("nan")) * 1000
            out["served_over_1s"] = sum(1 for s in times if s > 1.0)
            out["worker_rss_mib"] = rss_mib(worker.pid)
            out["worker_open_files"] = len(list(Path(f"/proc/{worker.pid}/fd").iterdir()))
            after = await node_figures(api, prefix)
            out["after"] = after
            out["queues_added"] = after["prefix_queues"] - before["prefix_queues"]
            out["node_queues_delta"] = after["queues"] - before["queues"]
            out["node_mem_growth_mib"] = after["mem_used_mib"] - before["mem_used_mib"]
            out["worker_errors"] = worker_log.read_bytes().count(b" ERROR ") + worker_log.read_bytes().count(
                b'"level": "error"'
            )
    finally:
        for task in tasks:
            task.cancel()
        await stop(api_process)
        await stop(worker)
        out["cleanup"] = await cleanup(prefix)
        out["logs"] = str(workdir)


async def _api_ready(http: aiohttp.ClientSession, port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            async with http.get(f"http://127.0.0.1:{port}/healthz") as reply:
                if reply.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.1)
    raise RuntimeError("the API did not answer /healthz within 30 s")
