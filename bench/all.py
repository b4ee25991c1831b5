"""Everything issue 13 measures, in one command and one sitting, with its targets checked at the end.

    .venv/bin/python bench/all.py [--runs 3] [--scale 1] [--partitions 32,4] [--modes today,user]

1. ``bench/run.py``: the machine's ceilings, then one Warren worker (every feature on, uvloop) beside the uvloop
   bare loop on *happy* and *slow*, and publish-to-delivery latency at half of the measured capacity,
   unordered and ordered.
2. ``bench/ordered.py``: the ordered endpoint (each partition count asked for) beside the unordered one on
   *slow*, *flaky* and *happy*.
3. ``bench/user_mode.py`` (issue 38), the user's mode: Warren fed by its own ``Publisher`` and the bare loop by a
   plain aio-pika confirmed publisher, each publishing at full speed during delivery, the rate from the first
   publish to the last first 2xx, both publish rates and every process's CPU; then ordered beside unordered
   at the same rate. ``--modes today`` or ``--modes user`` runs one of the two.
4. A table of the targets, each with what this run measured (medians of the per-run ratios) and met or not.

Benchmarks are not tests: this exits 0 whether or not a target is met, and reports which.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import ordered, run, user_mode
from bench.run import counts


async def main(runs: int, scale: float, partitions: list[int], modes: list[str]) -> None:
    verdicts: list[run.Verdict] = []
    if "today" in modes:
        verdicts += await run.main(
            runs, [1], ["happy", "slow", "latency", "latency-ordered"], ["uvloop"], False, scale, [False]
        )
        print()
        verdicts += await ordered.main(runs, ["slow", "flaky", "happy"], "uvloop", True, scale, partitions)
    if "user" in modes:
        print()
        verdicts += await user_mode.main(runs, scale, partitions, ["happy", "slow"], ["slow", "happy"])
    print("\n## Issue 13's and issue 38's targets, this run")
    print("| target | measured | wanted | |")
    print("|---|---:|---:|---|")
    for verdict in verdicts:
        print(verdict.row())
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="events per workload, times this (0.5: half)")
    parser.add_argument(
        "--partitions",
        default="32,4",
        help="the ordered endpoint's partition counts, side by side (32: the issue's; 4: Warren's default)",
    )
    parser.add_argument(
        "--modes",
        default="today,user",
        help="today: one publisher (Warren's) feeds every system; user: each system its own (bench/user_mode.py)",
    )
    a = parser.parse_args()
    modes = a.modes.split(",")
    if not modes or not set(modes) <= {"today", "user"}:
        parser.error("--modes takes today and/or user")
    asyncio.run(main(a.runs, a.scale, counts(a.partitions), modes))
