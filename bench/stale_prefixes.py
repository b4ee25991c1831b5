"""A benchmark run's prefix held alive while it runs, and the sweep of prefixes whose run is gone.

A run stopped mid-way (killed, timed out) leaves its quorum queues on the node, and on a node with 1,024 open
files a few such prefixes (about 60 queues each) fill the room the next runs and the test suite need. So each run
of ``bench/run.py`` holds an exclusive queue ``{prefix}-alive`` on a connection of its own while it lives:
RabbitMQ deletes that queue when the connection closes, however the process ended. At start ``sweep`` deletes the
queues and exchanges of every benchmark prefix on the node that has no such queue and no consumer on any of its
queues, twice over, ``settle`` seconds apart: a run from before this marker shows no consumer in the seconds
between its setup and its workers' consume, and RabbitMQ 3.10 counts a quorum queue's consumers only after its
first statistics (every 5 s).
"""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from urllib.parse import quote, urlsplit

import aio_pika

from warren.broker.management import ManagementClient

BENCH_PREFIX = re.compile(r"^bench[a-z]?[0-9a-f]{6}$")  # bench/run.py's, publish_compare's, publish_process's
ALIVE = "-alive"


def alive_queue(prefix: str) -> str:
    return prefix + ALIVE  # outside ``{prefix}.``: setup never sees it as a leftover of the plan


def stale_prefixes(queues: list[dict[str, object]]) -> list[str]:
    """The benchmark prefixes among ``queues`` (management API rows: name, consumers) whose run is gone."""
    consumers: dict[str, int] = defaultdict(int)
    alive: set[str] = set()
    for queue in queues:
        name = str(queue["name"])
        if name.endswith(ALIVE) and BENCH_PREFIX.match(name.removesuffix(ALIVE)):
            alive.add(name.removesuffix(ALIVE))
            continue
        prefix = name.split(".", 1)[0]
        if "." in name and BENCH_PREFIX.match(prefix):
            count = queue.get("consumers")
            consumers[prefix] += count if isinstance(count, int) else 0
    return sorted(p for p, n in consumers.items() if n == 0 and p not in alive)


@asynccontextmanager
async def held_alive(amqp_url: str, prefix: str) -> AsyncIterator[None]:
    """Hold ``{prefix}-alive`` for as long as the block runs (and, if the process dies, no longer)."""
    connection = await aio_pika.connect(amqp_url, client_properties={"connection_name": f"{prefix} alive"})
    try:
        channel = await connection.channel()
        await channel.declare_queue(alive_queue(prefix), exclusive=True)
        yield
    finally:
        await connection.close()


async def sweep(management_url: str, vhost: str = "/", settle: float = 20.0) -> list[str]:
    """Delete every benchmark prefix's queues and exchanges in ``vhost`` that is stale in two looks ``settle``
    seconds apart; the prefixes deleted."""
    parts = urlsplit(management_url)
    base, where = f"{parts.scheme}://{parts.hostname}:{parts.port}", quote(vhost, safe="")
    async with ManagementClient(base, parts.username or "guest", parts.password or "guest", vhost, timeout=60) as api:
        columns = f"queues/{where}?columns=name,consumers"
        stale = stale_prefixes(await api.request("GET", columns))
        if stale:
            await asyncio.sleep(settle)
            queues = await api.request("GET", columns)
            stale = sorted(set(stale) & set(stale_prefixes(queues)))
        if not stale:
            return []
        exchanges = await api.request("GET", f"exchanges/{where}?columns=name")
        for kind, rows in (("queues", queues), ("exchanges", exchanges)):
            for row in rows:
                if row["name"].split(".", 1)[0] in stale and "." in row["name"]:
                    with suppress(Exception):  # gone already, or another sweep took it
                        await api.request("DELETE", f"{kind}/{where}/{quote(row['name'], safe='')}", allow_404=True)
    return stale
