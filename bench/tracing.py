"""Tracing's cost (docs/tracing.md): one Warren worker with tracing off beside the same worker on another
checkout's code (``--baseline DIR``: main before tracing, exported with ``git archive``), and beside it with
tracing on (OpenTelemetry's SDK, a BatchSpanProcessor into an InMemorySpanExporter: bench/worker_variant.py),
interleaved run by run on the workloads of bench/run.py, medians and per-run ratios.

    mkdir -p /tmp/warren-main && git archive main warren | tar -x -C /tmp/warren-main
    .venv/bin/python bench/tracing.py --baseline /tmp/warren-main [--runs 3] [--scale 0.25] [--workloads happy,flaky]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.interleave import Results, interleaved_table, variant
from bench.run import System, cpu_cell, median, per_run_ratio

COLUMNS = (
    "deliveries/s",
    "per CPU-s",
    "CPU-s per 1k: worker / broker / machine",
    "p50 ms",
    "p99 ms",
    "lost",
    "requests",
    "vs tracing off: deliveries/s (per run)",
    "vs tracing off: worker CPU-s per 1k (per run)",
)


async def main(runs: int, scale: float, chosen: list[str], baseline: str | None) -> None:
    off = System(1, "uvloop", variant="tracing off")
    systems = [off, variant("tracing on (SDK, in memory)", "--traced")]
    if baseline:
        systems.insert(0, variant("baseline", "--source", baseline))

    def cells(system: System, rows: list[dict[str, float]], results: Results) -> list[str]:
        ratio = cpu_ratio = "-"
        if system != off:
            ratio = per_run_ratio(rows, results[off], "deliveries_per_s")
            cpu_ratio = per_run_ratio(rows, results[off], "worker_s_per_1k")
        return [
            f"{median(rows, 'deliveries_per_s'):,.0f}",
            f"{median(rows, 'per_cpu_s'):,.0f}",
            cpu_cell(rows),
            f"{median(rows, 'p50_ms'):,.1f}",
            f"{median(rows, 'p99_ms'):,.1f}",
            f"{max(r['lost'] for r in rows):.0f}",
            f"{median(rows, 'requests'):,.0f}",
            ratio,
            cpu_ratio,
        ]

    await interleaved_table("Warren tracing cost", COLUMNS, cells, systems, chosen, runs, scale)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=0.25, help="events per workload, times this")
    parser.add_argument("--workloads", default="happy,flaky")
    parser.add_argument("--baseline", help="a checkout of other code (main) whose worker runs beside, same venv")
    a = parser.parse_args()
    asyncio.run(main(a.runs, a.scale, a.workloads.split(","), a.baseline))
