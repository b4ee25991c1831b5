"""Lane endpoints measured (issue 34, part 6): isolation inside the lanes, and throughput beside dedicated ones.

    .venv/bin/python bench/lanes.py [--runs 3] [--scale 1] [--endpoints 1000] [--modes throughput,isolation]
                                    [--hang-ms 15000] [--skip-ceilings] [--rate N] [--baseline DIR]
                                    [--candidate DIR]

- **throughput**: bench/run.py's *happy* and *slow* workloads with their events spread evenly over 16
  endpoints (each subscribed to its own event type, 32 in flight each: 512 in all, as bench/run.py's one
  endpoint), once as dedicated endpoints and once as lane endpoints on 16 lanes (`[lanes] prefetch` 64),
  interleaved run by run; the ratio lane / dedicated per run (issue 34's target: at least 0.9).
- **isolation**: ``--endpoints`` lane endpoints on 16 lanes, the events spread evenly over them; in one variant
  two more lane endpoints beside them, one whose receiver answers after ``--hang-ms`` (its timeout is 10 s:
  every attempt times out) and one answering 503 forever (its circuit opens), each subscribed to 1% of the
  others' event types (with 1,000 endpoints, ten: ten times an ordinary endpoint's share). The other
  variant is the same run without the two. Each run: a saturated one (as fast as the publisher goes: the
  others' deliveries/s) and one at a fixed rate, half of what the first saturated run without the two
  delivered, for 10 s (the others' p99 publish-to-delivery latency). The receiver leaves the two endpoints'
  requests out of its counts. Targets: deliveries/s with the two at least 0.9 of without; p99 no more than
  100 ms higher. ``--rate N``: the fixed-rate runs at N/s instead (the same rate in every sitting);
  ``--baseline DIR``: DIR's ``warren`` (main's export) run beside this checkout's (or ``--candidate DIR``'s),
  round by round, the order rotated, each with its own rows and targets.

Prints the machine's ceilings first (unless --skip-ceilings), then one table per mode and the targets. A
benchmark reports, it does not gate: it exits 0 either way.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import run as harness
from bench.interleave import variant
from bench.run import (
    WORKLOADS,
    System,
    Verdict,
    Workload,
    cpu_cell,
    lost_cell,
    median,
    one_run,
    pair_ratios,
    per_run_ratio,
)

THROUGHPUT_TARGET = 0.9  # lane / dedicated, deliveries/s (issue 34)
ISOLATION_RATE_TARGET = 0.9  # the others' deliveries/s with the two misbehaving endpoints / without
ISOLATION_P99_MS = 100.0  # the others' p99 with the two, at most this much above without
SPREAD = 16  # endpoints the throughput workloads spread their events over
HANGING, REFUSING = "hangs", "refuses"
SEPARATOR = "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"


async def throughput(runs: int, scale: float, workdir: Path) -> list[Verdict]:
    verdicts: list[Verdict] = []
    print(
        "\n## Throughput: lane endpoints beside dedicated ones (16 endpoints, 32 in flight each, 16 lanes)\n"
        "| workload | endpoints | deliveries/s | per CPU-s | CPU-s per 1k: worker / broker / machine | p50 ms "
        "| p99 ms | lost | requests | lane / dedicated (per run) | target |\n" + SEPARATOR
    )
    for name in ("happy", "slow"):
        base = replace(WORKLOADS[name], count=max(100, round(WORKLOADS[name].count * scale)), endpoints=SPREAD)
        variants = {"dedicated": replace(base, bare=False), "lane": replace(base, bare=False, home="lane")}
        results: dict[str, list[dict[str, float]]] = {label: [] for label in variants}
        for _ in range(runs):  # interleaved: drift in the machine's speed hits both alike
            for label, workload in variants.items():
                results[label].append(await one_run(workload, System(1, "uvloop"), workdir))
        for label, rows in results.items():
            ratio = target = "-"
            if label == "lane":
                what = f"{name}: lane / dedicated, deliveries/s"
                ratio, target, verdict = rate_ratio(rows, results["dedicated"], what, THROUGHPUT_TARGET)
                verdicts.append(verdict)
            print(row(name, label, rows, ratio, target), flush=True)
    return verdicts


def rate_ratio(
    rows: list[dict[str, float]], reference: list[dict[str, float]], what: str, floor: float
) -> tuple[str, str, Verdict]:
    """The deliveries/s ratio cell (median, and each run), the target cell, and the verdict."""
    pairs = pair_ratios(rows, reference, "deliveries_per_s")
    cell = per_run_ratio(rows, reference, "deliveries_per_s")
    return cell, f"≥ {floor}", Verdict.ratio_at_least(what, pairs, floor)


def row(name: str, label: str, rows: list[dict[str, float]], ratio: str, target: str) -> str:
    return (
        f"| {name} | {label} | {median(rows, 'deliveries_per_s'):,.0f} | {median(rows, 'per_cpu_s'):,.0f} "
        f"| {cpu_cell(rows)} | {median(rows, 'p50_ms'):,.1f} | {median(rows, 'p99_ms'):,.1f} | "
        f"{lost_cell(rows)} | {median(rows, 'requests'):,.0f} | {ratio} | {target} |"
    )


def isolation_workloads(endpoints: int, scale: float, hang_ms: int) -> dict[str, Workload]:
    count = max(endpoints, round(20_000 * scale))
    calm = Workload("isolation", count, {"delay_ms": 0, "fail_first": 0}, bare=False, endpoints=endpoints, home="lane")
    share = max(1, endpoints // 100)  # event types each of the two subscribes to: 1% of the events
    misbehaving = (
        (HANGING, tuple(f"bench.t{k}" for k in range(share))),
        (REFUSING, tuple(f"bench.t{k}" for k in range(share, 2 * share))),
    )
    behaviour = {**calm.receiver, "hang": [HANGING], "hang_ms": hang_ms, "refuse": [REFUSING]}
    return {"without the two": calm, "with the two": replace(calm, extra=misbehaving, receiver=behaviour)}


@dataclass(frozen=True)
class Sides:
    """Isolation's fixed rate (0: half the first calm saturated run's) and whose code runs: this checkout's, or
    with ``baseline`` ``candidate``'s beside it (``--rate``, ``--baseline``, ``--candidate``)."""

    rate: float = 0
    baseline: str | None = None
    candidate: str = str(ROOT)


CALM_HALF = Sides()  # this checkout's code, at half the first calm run's rate


def isolation_systems(baseline: str | None, candidate: str = str(ROOT)) -> dict[str, System]:
    """The worker's code measured: this checkout's, or with ``--baseline DIR`` ``candidate``'s (this checkout's
    unless named) and DIR's side by side (both through bench/worker_variant.py ``--source``, the same launcher)."""
    if baseline is None:
        return {"": System(1, "uvloop")}
    return {
        "candidate": variant("candidate", "--source", candidate),
        "baseline": variant("baseline", "--source", baseline),
    }


async def isolation(
    runs: int, scale: float, endpoints: int, hang_ms: int, workdir: Path, sides: Sides = CALM_HALF
) -> list[Verdict]:
    """``sides.rate`` > 0: the fixed-rate runs' rate (else half the first calm saturated run's), the same for
    every system and variant, so that two sittings or two checkouts are measured at one rate."""
    variants = isolation_workloads(endpoints, scale, hang_ms)
    systems = isolation_systems(sides.baseline, sides.candidate)
    rate = sides.rate
    keys = [(code, label) for code in systems for label in variants]
    saturated: dict[tuple[str, str], list[dict[str, float]]] = {key: [] for key in keys}
    fixed: dict[tuple[str, str], list[dict[str, float]]] = {key: [] for key in keys}
    codes = list(systems)
    for i in range(runs):  # interleaved: drift in the machine's speed hits both alike; the code's order rotated
        for code in codes[i % len(codes) :] + codes[: i % len(codes)]:
            for label, workload in variants.items():
                saturated[code, label].append(await one_run(workload, systems[code], workdir))
                rate = rate or saturated[code, label][-1]["deliveries_per_s"] / 2  # half the first calm run's
            for label, workload in variants.items():
                fixed[code, label].append(await one_run(workload, systems[code], workdir, rate))
    print(
        f"\n## Isolation: {endpoints:,} lane endpoints on 16 lanes, with and without one endpoint timing out (10 s; "
        f"its receiver answers after {hang_ms / 1000:g} s) and one answering 503 forever\n"
        "| run | variant | deliveries/s | per CPU-s | CPU-s per 1k: worker / broker / machine | p50 ms | p99 ms "
        "| lost | requests | with / without (per run) | target |\n" + SEPARATOR
    )
    verdicts = []
    for code in codes:
        named = f"{code}: " if code else ""
        for label in variants:
            rows, ratio, target = saturated[code, label], "-", "-"
            if label == "with the two":
                what = f"isolation: {named}the others' deliveries/s, with the two / without"
                reference = saturated[code, "without the two"]
                ratio, target, verdict = rate_ratio(rows, reference, what, ISOLATION_RATE_TARGET)
                verdicts.append(verdict)
            print(row("saturated", f"{named}{label}", rows, ratio, target), flush=True)
        for label in variants:
            rows, diff, target = fixed[code, label], "-", "-"
            if label == "with the two":
                calm = fixed[code, "without the two"]
                diffs = [a["p99_ms"] - b["p99_ms"] for a, b in zip(rows, calm, strict=True)]
                measured = statistics.median(diffs)
                diff = f"{measured:+,.1f} ms ({', '.join(f'{d:+,.1f}' for d in diffs)})"
                target = f"p99 ≤ +{ISOLATION_P99_MS:g} ms"
                what = f"isolation: {named}the others' p99 at {rate:,.0f}/s, with the two minus without"
                verdicts.append(Verdict(what, measured, f"< {ISOLATION_P99_MS:g} ms", measured <= ISOLATION_P99_MS))
            print(row(f"{rate:,.0f}/s for 10 s", f"{named}{label}", rows, diff, target), flush=True)
    return verdicts


async def main(
    runs: int,
    scale: float,
    endpoints: int,
    modes: list[str],
    hang_ms: int,
    skip_ceilings: bool,
    sides: Sides = CALM_HALF,
) -> list[Verdict]:
    workdir = Path(tempfile.mkdtemp(prefix="warren-bench-lanes-"))
    verdicts: list[Verdict] = []
    async with harness.receiving(workdir):
        print(harness.heading("Warren lanes", runs, scale))
        if not skip_ceilings:
            await harness.print_ceilings(workdir, runs)
        if "throughput" in modes:
            verdicts += await throughput(runs, scale, workdir)
        if "isolation" in modes:
            verdicts += await isolation(runs, scale, endpoints, hang_ms, workdir, sides)
        print("\n## Issue 34's targets, this run\n| target | measured | wanted | |\n|---|---:|---:|---|")
        for verdict in verdicts:
            print(verdict.row())
        print(f"\nload average at the end: {harness.load_average()}")
    return verdicts


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the event counts (a busy machine: 0.25)")
    parser.add_argument("--endpoints", type=int, default=1000, help="isolation: the well-behaved lane endpoints")
    parser.add_argument("--modes", default="throughput,isolation")
    parser.add_argument("--hang-ms", type=int, default=15_000, help="isolation: the hanging receiver's answer time")
    parser.add_argument("--skip-ceilings", action="store_true")
    parser.add_argument("--rate", type=float, default=0, help="isolation: the fixed rate (default: half the calm)")
    parser.add_argument("--baseline", help="isolation: another checkout's root to run beside this one, interleaved")
    parser.add_argument("--candidate", default=str(ROOT), help="isolation, with --baseline: the other side's root")
    parser.add_argument("--port", type=int, default=harness.PORT, help="the receiver's (another run may hold 18089)")
    a = parser.parse_args()
    harness.PORT = a.port
    sides = Sides(a.rate, a.baseline, a.candidate)
    asyncio.run(main(a.runs, a.scale, a.endpoints, a.modes.split(","), a.hang_ms, a.skip_ceilings, sides))
