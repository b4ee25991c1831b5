"""Payload filters measured (issue 36): what filters cost the routing stage, side by side with none.

    .venv/bin/python bench/filters.py [--runs 5] [--events 3000] [--endpoints 8]

Each run: a fresh prefix, ``[lanes] count = 2`` and ``--endpoints`` lane endpoints subscribed to every event. The
events are published into ``{prefix}.route`` first (no router running); then one ``LaneRouter``
(warren/consumers/lane_router.py) routes them all: events/s from its start to the last event routed, and the
process's CPU time per event meanwhile (steadier than events/s on a shared machine). Variants, interleaved run by
run, each first in turn: *none* (no filters), *pass* (every endpoint has a two-condition filter every event
passes: the same copies, plus one parse per event and one evaluation per endpoint), *half* (the filter passes
half the events: half the copies). Then the pure costs, in µs (best of 5). The broker is ``WARREN_BENCH_AMQP_URL`` or
127.0.0.1:5672. A benchmark reports, it does not gate.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import timeit
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import orjson

from bench.topology_teardown import teardown
from warren.broker.amqp.connection import connect, connect_once
from warren.broker.applier import declare_plan
from warren.broker.events import Event
from warren.broker.publisher import Publisher
from warren.consumers.admission import wanted
from warren.consumers.lane_index import SubscriptionIndex
from warren.consumers.lane_router import LaneRouter
from warren.core.filters import EventFilter, event_data
from warren.topology.config import WarrenConfig
from warren.topology.planner import delay_levels, plan_topology

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
FILTERS: dict[str, dict[str, Any] | None] = {
    "none": None,
    "pass": {"amount": {"$gte": 0}, "region": {"$in": ["eu", "us"]}},
    "half": {"amount": {"$gte": 500}, "region": {"$in": ["eu", "us"]}},
}


def order(i: int) -> dict[str, Any]:
    return {
        "amount": i % 1000,
        "region": "eu" if i % 2 else "us",
        "customer": {"tier": "gold", "address": {"country": "FR"}},
        "items": [{"sku": f"s{j}", "qty": j} for j in range(20)],
        "note": "x" * 300,
    }


def config_for(variant: str, run: int, endpoints: int) -> WarrenConfig:
    url = os.environ.get("WARREN_BENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
    eps = [
        {
            "name": f"lane-{i}",
            "url": "https://hooks.example/h",
            "secret": SECRET,
            "events": ["#"],
            "home": "lane",
            **({"filter": FILTERS[variant]} if FILTERS[variant] else {}),
        }
        for i in range(endpoints)
    ]
    prefix = f"bf{os.getpid() % 10000}{variant[0]}{run}"
    return WarrenConfig(broker={"url": url, "prefix": prefix}, lanes={"count": 2}, endpoints=eps)


async def one_run(variant: str, run: int, events: int, endpoints: int) -> tuple[float, float]:
    """Events/s, and the process's CPU ms per event, while the router routes them."""
    config = config_for(variant, run, endpoints)
    connection = await connect_once(config.broker.url, name="bench-filters-declare")
    await declare_plan(connection, plan_topology(config))
    await connection.close()
    try:
        connection = await connect(config.broker.url)
        publisher = await Publisher.open(connection, config.broker.prefix)
        report = await publisher.publish_many([Event(type="order.paid", data=order(i)) for i in range(events)])
        assert not report.failed
        router = LaneRouter(
            config.broker.prefix, 2, 256, SubscriptionIndex(config.endpoints), delay_levels=delay_levels(config)
        )
        started, cpu = time.perf_counter(), time.process_time()
        await router.start(connection)
        while router.routed < events:
            await asyncio.sleep(0.005)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        await router.stop()
        await router.close(5)
        await connection.close()
        return events / elapsed, cpu / events * 1000
    finally:
        await teardown(config)


def pure_costs() -> list[tuple[str, float]]:
    data = order(700)
    body = orjson.dumps({"id": "evt_1", "type": "order.paid", "timestamp": "2026-01-01T00:00:00Z", "data": data})
    simple = EventFilter({"amount": {"$gt": 100}, "region": "eu"})
    nested = EventFilter(
        {
            "$or": [
                {"region": {"$in": ["ca", "mx"]}},
                {"$and": [{"customer.address.country": {"$in": ["FR", "DE"]}}, {"amount": {"$gte": 100, "$lt": 900}}]},
            ]
        }
    )
    plain = [e for e in config_for("none", 0, 3).endpoints]
    filtered = [e for e in config_for("pass", 0, 3).endpoints]

    def best(call: Any) -> float:
        return min(timeit.repeat(call, number=20_000, repeat=5)) / 20_000 * 1e6

    return [
        (f"event_data: parse a {len(body)}-byte event", best(lambda: event_data(body))),
        ("matches: 2 conditions", best(lambda: simple.matches(data))),
        ("matches: $or of $in and an $and of 3", best(lambda: nested.matches(data))),
        ("wanted: 3 targets, none with a filter", best(lambda: wanted(plain, body, lambda *a: None))),
        ("wanted: 3 targets with filters (one parse)", best(lambda: wanted(filtered, body, lambda *a: None))),
    ]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--endpoints", type=int, default=8)
    args = parser.parse_args()
    rates: dict[str, list[float]] = {v: [] for v in FILTERS}
    cpus: dict[str, list[float]] = {v: [] for v in FILTERS}
    for run in range(args.runs):
        order = list(FILTERS)[run % len(FILTERS) :] + list(FILTERS)[: run % len(FILTERS)]  # each goes first in turn
        for variant in order:
            rate, cpu = await one_run(variant, run, args.events, args.endpoints)
            rates[variant].append(rate)
            cpus[variant].append(cpu)
        print(f"run {run + 1}: " + ", ".join(f"{v} {rates[v][-1]:.0f}/s {cpus[v][-1]:.3f} ms" for v in FILTERS))
    print(f"\nrouting {args.events} events to {args.endpoints} lane endpoints, {args.runs} runs:")
    print("| variant | events/s median (min-max) | ratio to none | CPU ms/event median | ratio to none |")
    print("|---|---:|---:|---:|---:|")
    for variant in FILTERS:
        ratio = statistics.median(r / n for r, n in zip(rates[variant], rates["none"], strict=True))
        cpu_ratio = statistics.median(c / n for c, n in zip(cpus[variant], cpus["none"], strict=True))
        values = rates[variant]
        print(
            f"| {variant} | {statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f}) | {ratio:.3f} "
            f"| {statistics.median(cpus[variant]):.3f} | {cpu_ratio:.3f} |"
        )
    print("\npure costs, µs (best of 5 runs of 20,000):")
    for what, micros in pure_costs():
        print(f"- {what}: {micros:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
