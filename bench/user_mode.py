"""The user's mode: each system fed by its own publisher at full speed while it delivers, measured as a user
measures (issue 38).

    .venv/bin/python bench/user_mode.py [--runs 3] [--scale 1] [--partitions 32,4] [--workloads happy,slow]

``bench/run.py`` (today's mode) feeds Warren and the bare loop through the same publisher, Warren's, so that
their ratio is the consumers' alone. A user comparing Warren with "aio-pika and a loop" writes both sides: here
Warren's worker is fed through Warren's ``Publisher.publish_many`` and the bare loop through a plain aio-pika
confirmed publisher (``bench/publisher.py --kind bare``: confirms, ``mandatory``, persistent, the same envelope,
the same window, the same exchange and quorum queue; no per-key order, no re-sends), each started after its
consumer and publishing during delivery on the same two cores. The rate is events / (first publish, with the
connection open, -> last first 2xx), and each publisher's own rate and CPU are reported beside the consumer's,
the broker's and the machine's. Then ordered beside unordered, every side fed by Warren's publisher, at the
same rate. Runs are interleaved; ratios are taken run by run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.run import WORKLOADS, System, Verdict, counts, lost_cell, median, one_run, pair_ratios, receiving

VS_BARE = 0.95  # issue 38: one worker vs the bare loop, and Warren's publisher vs the bare publisher
DEFAULT_PARTITIONS = 4  # an ordered endpoint's partitions unless it says (docs/configuration.md)
ORDERED = {DEFAULT_PARTITIONS: 0.9}  # ordered / unordered at the default count; 0.8 at any other (issue 38)
Rows = list[dict[str, float]]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_cell(rows: Rows) -> str:
    """CPU-s per 1,000 events, medians: the publisher's / the consumer's / the broker's / the machine's."""
    broker = median(rows, "broker_s_per_1k")
    return (
        f"{median(rows, 'publisher_s_per_1k'):.3f} / {median(rows, 'worker_s_per_1k'):.3f} / "
        f"{'-' if broker < 0 else f'{broker:.3f}'} / {median(rows, 'machine_s_per_1k'):.3f}"
    )


def ratio(rows: Rows, reference: Rows, key: str) -> str:
    pairs = pair_ratios(rows, reference, key)
    return f"{statistics.median(pairs):.2f} ({', '.join(f'{p:.2f}' for p in pairs)})"


async def versus_bare(workdir: Path, runs: int, names: list[str], loop: str, scale: float) -> list[Verdict]:
    """Warren + Warren's publisher beside the bare loop + the bare publisher, per workload."""
    verdicts: list[Verdict] = []
    print("\n## Warren beside the bare loop, each fed by its own publisher")
    print(
        "| workload | system | publisher | publish/s | deliveries/s | lost | CPU-s per 1k: publisher / consumer / "
        "broker / machine | deliveries/s: warren / bare (per run) | publish/s: warren / bare (per run) |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    sides = ((System(1, loop), "warren"), (System(0, loop), "bare"))
    for name in names:
        workload = WORKLOADS[name]
        results: dict[str, Rows] = {kind: [] for _, kind in sides}
        for run in range(runs):  # interleaved, the order alternating, so drift hits both sides alike
            for system, kind in sides if run % 2 == 0 else sides[::-1]:
                results[kind].append(await one_run(workload, system, workdir, scale=scale, publisher=kind))
        warren, bare = results["warren"], results["bare"]
        for (system, kind), rows in zip(sides, (warren, bare), strict=True):
            vs = (
                ("-", "-")
                if kind == "bare"
                else (ratio(warren, bare, "user_per_s"), ratio(warren, bare, "publish_user_per_s"))
            )
            print(
                f"| {name} | {system.name} | {kind} | {median(rows, 'publish_user_per_s'):,.0f} | "
                f"{median(rows, 'user_per_s'):,.0f} | {lost_cell(rows)} | {cpu_cell(rows)} | {vs[0]} | {vs[1]} |",
                flush=True,
            )
        what = f"user mode · {name}: 1 worker / bare loop, deliveries/s"
        verdicts.append(Verdict.ratio_at_least(what, pair_ratios(warren, bare, "user_per_s"), VS_BARE))
        what = f"user mode · {name}: Warren's publisher / bare aio-pika, publish/s"
        verdicts.append(Verdict.ratio_at_least(what, pair_ratios(warren, bare, "publish_user_per_s"), VS_BARE))
    return verdicts


async def ordered_beside_unordered(
    workdir: Path, runs: int, names: list[str], loop: str, scale: float, partitions: list[int]
) -> list[Verdict]:
    """Ordered endpoints (each partition count) beside the unordered one, all fed by Warren's publisher."""
    verdicts: list[Verdict] = []
    print("\n## Ordered beside unordered, fed by Warren's publisher")
    print(
        "| workload | endpoint | publish/s | deliveries/s | lost | CPU-s per 1k: publisher / consumer / broker / "
        "machine | ordered / unordered, deliveries/s (per run) | target |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    system = System(1, loop)
    for name in names:
        unordered = WORKLOADS[name]
        variants = {"unordered": unordered} | {
            f"ordered, {n} partitions": replace(unordered, name=f"{name}-ordered", ordered=True, partitions=n)
            for n in partitions
        }
        results: dict[str, Rows] = {label: [] for label in variants}
        labels = list(variants)
        for run in range(runs):  # the order rotated round by round: no variant always follows the biggest teardown
            for label in labels[run % len(labels) :] + labels[: run % len(labels)]:
                results[label].append(await one_run(variants[label], system, workdir, scale=scale))
        for label, rows in results.items():
            shown = target = "-"
            if label != "unordered":
                n = int(label.split()[1])
                floor = ORDERED.get(n, 0.8)
                pairs = pair_ratios(rows, results["unordered"], "user_per_s")
                shown, target = ratio(rows, results["unordered"], "user_per_s"), f"≥ {floor}"
                what = f"user mode · {name}: {label} / unordered, deliveries/s"
                verdicts.append(Verdict.ratio_at_least(what, pairs, floor))
            print(
                f"| {name} | {label} | {median(rows, 'publish_user_per_s'):,.0f} | {median(rows, 'user_per_s'):,.0f} "
                f"| {lost_cell(rows)} | {cpu_cell(rows)} | {shown} | {target} |",
                flush=True,
            )
    return verdicts


async def main(
    runs: int, scale: float, partitions: list[int], names: list[str], ordered: list[str], loop: str = "uvloop"
) -> list[Verdict]:
    """Runs and prints the user's mode; returns its targets beside what it measured."""
    workdir = Path(tempfile.mkdtemp(prefix="warren-bench-user-"))
    async with receiving(workdir):
        print(
            f"# Warren benchmark, the user's mode · {platform.node()} · {os.cpu_count()} cores · Python "
            f"{platform.python_version()} · {runs} runs each, interleaved, medians · --scale {scale:g} · {loop} · "
            f"{time.strftime('%Y-%m-%d %H:%M')} · load average {load()}"
        )
        verdicts = await versus_bare(workdir, runs, names, loop, scale) if names else []
        if ordered and partitions:
            verdicts += await ordered_beside_unordered(workdir, runs, ordered, loop, scale, partitions)
        print(f"\nload average at the end: {load()}")
    return verdicts


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="events per workload, times this (0.5: half)")
    parser.add_argument("--workloads", default="happy,slow", help="Warren beside the bare loop ('' for none)")
    parser.add_argument("--ordered", default="slow,happy", help="ordered beside unordered ('' for none)")
    parser.add_argument("--partitions", default="32,4", help="the ordered endpoint's partition counts")
    a = parser.parse_args()
    chosen = [w for w in a.workloads.split(",") if w]
    verdicts = asyncio.run(main(a.runs, a.scale, counts(a.partitions), chosen, [w for w in a.ordered.split(",") if w]))
    print("\n| target | measured | wanted | |\n|---|---:|---:|---|")
    for verdict in verdicts:
        print(verdict.row())
