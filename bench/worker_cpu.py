"""The worker's CPU per delivery against the bare loop's (issue 38: at most 1.15x, every feature on), before and
after a change in one sitting: one Warren worker on this checkout's code, the same worker on another checkout's
(``--baseline DIR``: main, exported with ``git archive``), and the uvloop bare loop, interleaved run by run on
bench/run.py's workloads (every feature on: JSON attempt lines to a file, Prometheus metrics, signing).

    mkdir -p /tmp/warren-main && git archive main warren | tar -x -C /tmp/warren-main
    .venv/bin/python bench/worker_cpu.py --baseline /tmp/warren-main [--candidate DIR] [--runs 3] [--scale 0.5]
                                         [--workloads happy,slow]

``--candidate DIR`` runs the change from an export too (``git archive HEAD warren``), so that the checkout can be
edited while the benchmark runs.

The figure is the worker process's own CPU seconds (user + system, /proc) per 1,000 deliveries, over the window
from the first publish to the last first 2xx: on a shared machine it moves far less than a rate does.
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
    "CPU-s per 1k: worker / broker / machine",
    "worker CPU-s per 1k (per run)",
    "lost",
    "worker CPU vs bare loop (per run)",
    "vs baseline (per run)",
)


async def main(runs: int, scale: float, chosen: list[str], baseline: str | None, candidate: str | None) -> None:
    bare = System(0, "uvloop")
    # --candidate: a copy of this checkout's code, so that editing the checkout cannot change a run under way
    systems = [variant("this change", "--source", candidate) if candidate else System(1, "uvloop"), bare]
    if baseline:
        systems.insert(0, variant("baseline", "--source", baseline))

    def cells(system: System, rows: list[dict[str, float]], results: Results) -> list[str]:
        each = ", ".join(f"{r['worker_s_per_1k']:.3f}" for r in rows)
        vs_bare = per_run_ratio(rows, results[bare], "worker_s_per_1k") if system != bare else "-"
        compared = baseline and system.workers and system != systems[0]
        return [
            f"{median(rows, 'deliveries_per_s'):,.0f}",
            cpu_cell(rows),
            f"{median(rows, 'worker_s_per_1k'):.3f} ({each})",
            f"{max(r['lost'] for r in rows):.0f}",
            vs_bare,
            per_run_ratio(rows, results[systems[0]], "worker_s_per_1k") if compared else "-",
        ]

    await interleaved_table("Warren worker CPU per delivery", COLUMNS, cells, systems, chosen, runs, scale)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=0.5, help="events per workload, times this")
    parser.add_argument("--workloads", default="happy,slow")
    parser.add_argument("--baseline", help="a checkout of other code (main) whose worker runs beside, same venv")
    parser.add_argument("--candidate", help="the code measured as this change (default: this checkout's warren/)")
    a = parser.parse_args()
    asyncio.run(main(a.runs, a.scale, a.workloads.split(","), a.baseline, a.candidate))
