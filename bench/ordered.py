"""Ordered beside unordered: each workload to an ordered endpoint (32 partitions, per-key lanes) and to an
unordered one, interleaved run by run, with the ratio taken pair by pair.

    .venv/bin/python bench/ordered.py [--runs 3] [--workloads happy,flaky,slow] [--loop uvloop] [--scale 1]
                                      [--port 18089] [--partitions 32[,8,...]]

Same receiver, publisher, event counts and 1,000 keys as bench/run.py. The unordered endpoint has concurrency
(prefetch) 512; the ordered one N partitions of partition_prefetch 512 / N, so 512 in flight at most, too
(several N: each is its own ordered variant, all interleaved with the same unordered runs). Prints
the machine's ceilings first (unless --skip-ceilings), then one row per workload and system, and the issue's
targets beside the ordered/unordered ratios.
Per-key order is the tests' job (tests/consumers/test_key_lanes_live.py); this measures the rate.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import signal
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import run as harness
from bench.run import (
    PY,
    WORKLOADS,
    System,
    Verdict,
    ceilings,
    counts,
    cpu_cell,
    lost_cell,
    median,
    one_run,
    pair_ratios,
    per_run_ratio,
    start,
)

TARGETS = {"happy": 0.9, "flaky": 0.6, "slow": 0.8}  # ordered / unordered, deliveries/s (issue 13)


async def main(
    runs: int, chosen: list[str], loop: str, skip_ceilings: bool, scale: float, partitions: list[int]
) -> list[Verdict]:
    """Runs and prints the workloads; returns the ordered/unordered ratios beside issue 13's targets."""
    verdicts: list[Verdict] = []
    workdir = Path(tempfile.mkdtemp(prefix="warren-bench-ordered-"))
    port = str(harness.PORT)
    receiver = await start([PY, str(ROOT / "bench" / "receiver.py"), "--port", port], workdir / "r.log", b"")
    deadline = time.monotonic() + 30
    while True:  # the receiver is up once it answers (a busy machine takes a while to start a process)
        try:
            await harness.http("GET", "/stats")
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)
    system = System(1, loop)
    try:
        print(
            f"# Warren ordered vs unordered · {platform.node()} · {os.cpu_count()} cores · Python "
            f"{platform.python_version()} · {runs} runs each, medians · {time.strftime('%Y-%m-%d %H:%M')} · {loop}"
            f" · event counts x {scale:g} · partitions {', '.join(map(str, partitions))}"
        )
        if not skip_ceilings:
            rows = [await ceilings(workdir) for _ in range(runs)]
            print("\n## Ceilings (same machine, same run)")
            for key in ("publish_confirmed_per_s", "consume_ack_per_s", "aiohttp_post_per_s"):
                print(f"- {key}: {median(rows, key):,.0f}/s  (runs: {', '.join(f'{r[key]:,.0f}' for r in rows)})")
        print(
            "\n| workload | endpoint | deliveries/s | per CPU-s | CPU-s per 1k: worker / broker / machine | p50 ms "
            "| p99 ms | lost | requests | ordered / unordered (per run) | target |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name in chosen:
            unordered = replace(WORKLOADS[name], count=max(100, round(WORKLOADS[name].count * scale)))
            variants = {"unordered": unordered} | {
                f"ordered, {n} partitions": replace(unordered, name=f"{name}-ordered", ordered=True, partitions=n)
                for n in partitions
            }
            results: dict[str, list[dict[str, float]]] = {label: [] for label in variants}
            for _ in range(runs):  # interleaved: drift in the machine's speed hits every variant alike
                for label, workload in variants.items():
                    results[label].append(await one_run(workload, system, workdir))
            for label, rows in results.items():
                ratio = target = "-"
                if label != "unordered":
                    ratio = per_run_ratio(rows, results["unordered"], "deliveries_per_s")
                    if name in TARGETS:
                        target = f"≥ {TARGETS[name]}"
                        pairs = pair_ratios(rows, results["unordered"], "deliveries_per_s")
                        what = f"{name}: {label} / unordered, deliveries/s"
                        verdicts.append(Verdict.ratio_at_least(what, pairs, TARGETS[name]))
                print(
                    f"| {name} | {label} | {median(rows, 'deliveries_per_s'):,.0f} | {median(rows, 'per_cpu_s'):,.0f} "
                    f"| {cpu_cell(rows)} | {median(rows, 'p50_ms'):,.0f} | {median(rows, 'p99_ms'):,.0f} | "
                    f"{lost_cell(rows)} | {median(rows, 'requests'):,.0f} | {ratio} | {target} |",
                    flush=True,
                )
    finally:
        receiver.send_signal(signal.SIGTERM)
        await receiver.wait()
    return verdicts


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workloads", default="happy,flaky,slow")
    parser.add_argument("--loop", default="uvloop", choices=["uvloop", "asyncio"])
    parser.add_argument("--skip-ceilings", action="store_true")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the event counts (a busy machine: 0.25)")
    parser.add_argument("--port", type=int, default=harness.PORT, help="the receiver's (another run may hold 18089)")
    parser.add_argument(
        "--partitions",
        default="32",
        help="the ordered endpoint's, comma-separated for several side by side (partition_prefetch 512 / this each)",
    )
    a = parser.parse_args()
    harness.PORT = a.port
    asyncio.run(main(a.runs, a.workloads.split(","), a.loop, a.skip_ceilings, a.scale, counts(a.partitions)))
