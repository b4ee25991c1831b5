"""The benchmark's receiver: a separate process that answers webhooks and measures what arrives.

GET /stats returns counts and publish-to-delivery latencies (from the envelope's timestamp); POST /reset
sets the behaviour for the next workload: ``delay_ms`` before answering, ``fail_first`` ratio of first
attempts answered 503; ``hang`` (endpoint names) answered after ``hang_ms``, ``refuse`` (endpoint names)
answered 503 always: both left out of the counts (bench/lanes.py's misbehaving endpoints).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time
from datetime import datetime
from pathlib import Path

import orjson
from aiohttp import web


class Stats:
    def __init__(self) -> None:
        self.reset({})

    def reset(self, settings: dict[str, float]) -> None:
        self.delay = float(settings.get("delay_ms", 0)) / 1000
        self.fail_first = float(settings.get("fail_first", 0))
        self.hang = {f"/hook/{name}" for name in settings.get("hang", ())}
        self.hang_delay = float(settings.get("hang_ms", 0)) / 1000
        self.refuse = {f"/hook/{name}" for name in settings.get("refuse", ())}
        self.misbehaved = 0  # requests to those
        self.rng = random.Random(int(settings.get("seed", 1)))
        self.requests = 0
        self.failed = 0
        self.seen: set[str] = set()
        self.ok: set[str] = set()
        self.latencies: list[float] = []
        self.arrivals: list[float] = []  # when each latency was measured, in the same order
        self.paths: list[str] = []  # and to which endpoint (WARREN_BENCH_LATENCY_DUMP)
        self.ids: list[str] = []  # and which event (its webhook-id)
        self.first_ok = 0.0
        self.last_ok = 0.0


stats = Stats()


async def hook(request: web.Request) -> web.Response:
    body = await request.read()
    if request.path in stats.refuse or request.path in stats.hang:
        stats.misbehaved += 1
        if request.path in stats.hang:
            await asyncio.sleep(stats.hang_delay)
            return web.Response(status=200, text="late")
        return web.Response(status=503)
    stats.requests += 1
    event_id = request.headers.get("webhook-id") or orjson.loads(body).get("id", "")
    if stats.delay:
        await asyncio.sleep(stats.delay)
    if event_id not in stats.seen:
        stats.seen.add(event_id)
        if stats.fail_first and stats.rng.random() < stats.fail_first:
            stats.failed += 1
            return web.Response(status=503)
    now = time.time()
    if event_id not in stats.ok:
        stats.ok.add(event_id)
        stamp = orjson.loads(body).get("timestamp")
        if isinstance(stamp, str):
            stats.latencies.append(now - datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())
            stats.arrivals.append(now)
            stats.paths.append(request.path)
            stats.ids.append(event_id)
        stats.first_ok = stats.first_ok or now
        stats.last_ok = now
    return web.Response(status=200, text="ok")


async def get_stats(_: web.Request) -> web.Response:
    lat = sorted(stats.latencies)

    def pct(p: float) -> float | None:
        return lat[min(len(lat) - 1, int(p * len(lat)))] if lat else None

    return web.json_response(
        {
            "requests": stats.requests,
            "misbehaved": stats.misbehaved,
            "failed": stats.failed,
            "distinct_ok": len(stats.ok),
            "first_ok": stats.first_ok,
            "last_ok": stats.last_ok,
            "p50": pct(0.5),
            "p99": pct(0.99),
        }
    )


async def get_latencies(_: web.Request) -> web.Response:
    """Every first delivery as [arrival time, publish-to-delivery seconds], in arrival order."""
    return web.json_response(list(zip(stats.arrivals, stats.latencies, strict=True)))


DUMP = os.environ.get("WARREN_BENCH_LATENCY_DUMP")  # a directory: each run's first deliveries, one file a run


def dump() -> None:
    """The run's first deliveries as [arrival, publish-to-delivery seconds, path, event id], to a file of DUMP's."""
    rows = list(zip(stats.arrivals, stats.latencies, stats.paths, stats.ids, strict=True))
    path = Path(DUMP or ".") / f"run-{time.time():.3f}.json"
    path.write_bytes(orjson.dumps({"misbehaved": stats.misbehaved, "rows": rows}))


async def reset(request: web.Request) -> web.Response:
    if DUMP and stats.latencies:
        dump()
    stats.reset(await request.json())
    return web.json_response({"ok": True})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = web.Application()
    app.router.add_post("/hook/{tail:.*}", hook)
    app.router.add_get("/stats", get_stats)
    app.router.add_get("/latencies", get_latencies)
    app.router.add_post("/reset", reset)
    web.run_app(app, host="127.0.0.1", port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
