"""An ordered dedicated endpoint's outage with two workers sharing its partitions: every partition is served
again once the endpoint is back, whichever worker's probe closed the circuit.

Found by a long run (bench/long_run.py): during a 30 s outage the steady worker's probes failed, the other worker's
succeeded and closed the circuit, and the steady worker said it consumed again but never attempted its
partition's head again: 2,297 events stayed in that partition until the worker stopped.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import defaultdict
from typing import Any

import pytest

from tests.support.receiver import Receiver, Reply
from warren.broker.events import Event
from warren.consumers.worker import Worker

pytestmark = pytest.mark.timeout(150)

CIRCUIT = {"consecutive_failures": 3, "failure_ratio": None, "cooldown": "300ms", "cooldown_max": "600ms"}
KEYS = 24


async def test_every_partition_is_served_after_an_outage_closed_by_another_workers_probe(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    down = {"on": False}
    receiver.behaviour = lambda r, request, body: Reply(503, delay=0.01) if down["on"] else Reply(200)
    config = await endpoint_config(
        [{"name": "keyed", "events": ["keyed.*"], "ordering": "key", "partitions": 4, "circuit": CIRCUIT}],
        retry={"base": "50ms", "cap": "300ms", "max_attempts": 1000},
        worker={"rebalance_interval": "500ms"},
    )
    sequence = itertools.count()
    published: list[Event] = []

    async def produce(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            batch = [Event(type="keyed.x", data={}, key=f"k{i % KEYS}", sequence=next(sequence)) for i in range(KEYS)]
            await publish(config, batch)
            published.extend(batch)
            await asyncio.sleep(0.1)

    async with Worker(config), Worker(config):
        for _ in range(2):
            producing = asyncio.create_task(produce(6.0))
            await asyncio.sleep(1.0)
            down["on"] = True
            await asyncio.sleep(3.0)
            down["on"] = False
            await producing
            expected = {e.id for e in published}
            await receiver.wait_for(lambda r, e=expected: e <= r.ok_ids(), 30)
    sequences: dict[str, list[int]] = defaultdict(list)
    for request in receiver.received:
        body = request.json
        if request.status == 200:
            sequences[body["key"]].append(body["sequence"])
    firsts = {k: list(dict.fromkeys(s)) for k, s in sequences.items()}
    assert all(a < b for s in firsts.values() for a, b in itertools.pairwise(s))
