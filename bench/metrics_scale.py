"""What /metrics costs as lane endpoints grow: one worker's metrics after every endpoint had one delivery, with a
series per lane endpoint (``worker.metrics_lane_endpoints = "each"``, the default) and with their lanes' series
(``"by-lane"``), side by side: the scrape's time (rendered on the worker's event loop, so delivery waits that
long), its size, and the memory the metrics hold per endpoint.

    .venv/bin/python bench/metrics_scale.py [--endpoints 1000,10000] [--lanes 16] [--runs 3]

CPU and memory only: no broker, no network. The machine's own pace is printed beside (a plain-Python loop), so
that figures from different machines can be compared by their ratio to it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import tracemalloc
from collections.abc import Callable

from prometheus_client import generate_latest

from warren.consumers.hooks import AttemptRecord
from warren.consumers.metrics import WorkerMetrics
from warren.consumers.metrics_server import lane_series
from warren.topology import names


def fed(endpoints: int, series: Callable[[str], str] | None) -> WorkerMetrics:
    """A worker's metrics after one delivered attempt and one ack of each endpoint."""
    metrics = WorkerMetrics([], series=series)
    for i in range(endpoints):
        name = f"endpoint-{i:06d}"
        metrics.observe(AttemptRecord(name, f"evt_{i}", 1, 200, None, 0.012, "delivered", None, 0.05, None))
        metrics.settle(name, "acked")
    return metrics


def pace() -> float:
    """Seconds for a million iterations of a small plain-Python loop: the machine's pace, same run."""
    started = time.perf_counter()
    total = 0
    for i in range(1_000_000):
        total += i & 7
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoints", default="1000,10000")
    parser.add_argument("--lanes", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    lanes = args.lanes
    modes: dict[str, Callable[[str], str] | None] = {
        "each": None,
        "by-lane": lane_series(lambda name: names.lane_of(name, lanes)),
    }
    print(
        f"# /metrics as lane endpoints grow · {os.cpu_count()} cores · {lanes} lanes · {args.runs} runs, medians · "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(f"machine pace: {statistics.median(pace() for _ in range(3)) * 1000:.0f} ms per 1M plain-Python loop steps\n")
    print("| endpoints | series | scrape ms (per run) | scrape KB | lines | metrics' memory per endpoint |")
    print("|---:|---|---:|---:|---:|---:|")
    for count in (int(n) for n in args.endpoints.split(",")):
        for mode, series in modes.items():
            tracemalloc.start()
            metrics = fed(count, series)
            held = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
            times, body = [], b""
            for _ in range(args.runs):
                started = time.perf_counter()
                body = generate_latest(metrics.registry)
                times.append((time.perf_counter() - started) * 1000)
            runs = ", ".join(f"{t:,.0f}" for t in times)
            lines = body.count(b"\n")
            print(
                f"| {count:,} | {mode} | {statistics.median(times):,.0f} ({runs}) | {len(body) / 1024:,.0f} | "
                f"{lines:,} | {held / count:,.0f} B |"
            )
            del metrics


if __name__ == "__main__":
    main()
