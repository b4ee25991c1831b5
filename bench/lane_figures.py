"""Issue 34's scale figures for lane endpoints, in one run: ``bench/endpoints_scale.py --lane-creates N
--lane-store M`` (docs/deployment.md, "How far one deployment goes").

Prints the machine's ceilings, then each figure beside its target. A benchmark reports; it does not gate.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.lane_creates import measure
from bench.lane_store import drop_database, endpoints, fill_store, index_micro, one_deployment, with_database
from bench.lane_support import FirstArrivals, node_api

PG = os.environ.get("WARREN_BENCH_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


async def ceilings() -> None:
    async with node_api() as api:
        overview = await api.overview()
        node = (await api.request("GET", "nodes?columns=name,fd_total,mem_limit,mem_used"))[0]
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"# lane figures · {platform.node()} · {os.cpu_count()} cores · load {load} · Python "
        f"{platform.python_version()} · {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    print(
        f"# RabbitMQ {overview['rabbitmq_version']} · node {node['name']} · open files {node['fd_total']} · "
        f"memory limit {node['mem_limit'] / 2**30:.1f} GiB · mem_used now {node['mem_used'] / 2**20:.0f} MiB",
        flush=True,
    )


async def _store_url(store: str, workdir: Path) -> tuple[str, str | None]:
    if store == "sqlite":
        return f"sqlite:///{workdir / f'store-{time.monotonic_ns()}.sqlite3'}", None
    url, name = await with_database(PG)
    return url, name


async def creates(args: argparse.Namespace, workdir: Path) -> None:
    for store in args.stores.split(","):
        url, database = await _store_url(store, workdir)
        out: dict[str, Any] = {}
        try:
            await measure(args.lane_creates, args.lanes, args.sample, out, url, args.create_budget)
        except Exception as exc:  # a figure that fails says why; the next one runs
            out["failed"] = f"{type(exc).__name__}: {exc}"[:400]
        finally:
            if database is not None:
                await drop_database(PG, database)
        print(f"\n## {args.lane_creates:,} lane endpoints created through the admin API ({store} store)")
        for key in (
            "statuses", "creates_s", "p50_ms", "p99_ms", "max_ms", "served", "served_p50_ms", "served_p99_ms",
            "served_max_ms", "served_over_1s", "before", "after", "queues_added", "node_queues_delta",
            "node_mem_growth_mib", "worker_rss_mib", "worker_open_files", "worker_errors", "stopped", "cleanup",
            "failed",
        ):  # fmt: skip
            if key in out:
                print(f"- {key}: {_shown(out[key])}")
        print("- targets: p99 < 100 ms; queues added 0; node memory growth < 100 MiB; served within 1 s", flush=True)


async def store_figures(args: argparse.Namespace, workdir: Path) -> None:
    items = endpoints(args.lane_store, "http://127.0.0.1:9/hook")
    for store in [s for s in args.stores.split(",") if s != "none"]:
        url, database = await _store_url(store, workdir)
        try:
            took = await fill_store(url, items)
            print(f"\n- {args.lane_store:,} endpoints written to the {store} store in {took:.1f} s (batches of 1,000)")
        finally:
            if database is not None:
                await drop_database(PG, database)
    del items
    figures: dict[int, list[dict[str, Any]]] = {}
    async with FirstArrivals() as receiver:
        for count in (args.lane_store, args.baseline):
            try:
                figures[count] = await one_deployment(count, args.route_events, args.runs, receiver)
            except Exception as exc:
                figures[count] = [{"failed": f"{type(exc).__name__}: {exc}"[:400]}]
            for out in figures[count]:
                print(f"- run, {count:,} endpoints in the stream: {_shown(out)}", flush=True)
    print(f"\n## {args.lane_store:,} lane endpoints in the endpoints stream: a worker (its router in it) starting")
    for count, runs in figures.items():
        done = [r for r in runs if "worker_start_s" in r]
        if not done:
            continue
        starts = ", ".join(f"{r['worker_start_s']:.1f}" for r in done)
        rates = ", ".join(f"{r['route_rate']:.0f}" for r in done if "route_rate" in r)
        print(
            f"- {count:,} endpoints: start {_median(done, 'worker_start_s'):.1f} s ({starts}), "
            f"RSS {_median(done, 'worker_rss_mib'):.0f} MiB, CPU {_median(done, 'worker_cpu_s'):.1f} s, "
            f"stream filled in {_median(done, 'stream_fill_s'):.1f} s; one tenant's route rate "
            f"{statistics.median(r['route_rate'] for r in done if 'route_rate' in r):.0f}/s ({rates})"
        )
    big, small = figures[args.lane_store], figures[args.baseline]
    pairs = zip(big, small, strict=False)
    ratios = [b["route_rate"] / s["route_rate"] for b, s in pairs if "route_rate" in b and "route_rate" in s]
    if ratios:
        print(
            f"- route rate, {args.lane_store:,} / {args.baseline}: {statistics.median(ratios):.2f} "
            f"({', '.join(f'{r:.2f}' for r in ratios)}) (target ≥ 0.9)"
        )
    micro = [(index_micro(args.lane_store), index_micro(args.baseline)) for _ in range(args.runs)]
    print(
        f"- SubscriptionIndex.subscribers, one tenant's event: {statistics.median(m[0] for m in micro):.2f} µs with "
        f"{args.lane_store:,} endpoints, {statistics.median(m[1] for m in micro):.2f} µs with {args.baseline}"
    )
    print("- targets: start < 30 s, RSS < 500 MiB, route rate ≥ 0.9 of the baseline's", flush=True)


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_shown(v)}" for k, v in value.items() if k != "logs")
    return str(value)


async def run_lane_figures(args: argparse.Namespace) -> None:
    await ceilings()
    print("# shared machine: other work runs beside this; figures are noisy", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="warren-lane-figures-"))
    if args.lane_creates:
        await creates(args, workdir)
    if args.lane_store:
        await store_figures(args, workdir)
