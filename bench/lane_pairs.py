"""Lane endpoints of two checkouts side by side, and dedicated ones beside them (issue 34, part 6, on 4.0.5).

    .venv/bin/python bench/lane_pairs.py --baseline /tmp/warren-main [--candidate .] [--rounds 5] [--scale 0.5]
                                         [--workload happy]

bench/lanes.py's throughput workload (16 endpoints, 32 in flight each, 16 lanes): each round runs the baseline's
code with lane endpoints, the candidate's with lane endpoints, and the candidate's with dedicated endpoints,
in an order rotated round by round, so that drift in a shared machine's speed hits each alike. Both checkouts
run through bench/worker_variant.py ``--source`` (the same launcher). Prints each run, then medians and the
ratios per round: deliveries/s and the worker's CPU-s per 1,000 deliveries (the figure a busy machine moves
least). A benchmark reports, it does not gate.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.interleave import sitting, variant
from bench.lanes import SPREAD
from bench.run import WORKLOADS, System, one_run


async def rounds(args: argparse.Namespace) -> None:
    base = WORKLOADS[args.workload]
    base = replace(base, count=max(100, round(base.count * args.scale)), endpoints=SPREAD, bare=False)
    lane, dedicated = replace(base, home="lane"), base
    runs: list[tuple[str, object, System]] = [
        ("lane · baseline", lane, variant("baseline", "--source", args.baseline)),
        ("lane · candidate", lane, variant("candidate", "--source", args.candidate)),
        ("dedicated · candidate", dedicated, variant("candidate", "--source", args.candidate)),
    ]
    results: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in runs}
    async with sitting(f"Lane pairs, {args.workload}", args.rounds, args.scale) as workdir:
        for i in range(args.rounds):
            for label, workload, system in runs[i % 3 :] + runs[: i % 3]:
                row = await one_run(workload, system, workdir)  # type: ignore[arg-type]
                results[label].append(row)
                print(
                    f"round {i + 1}: {label}: {row['deliveries_per_s']:,.0f}/s, worker {row['worker_s_per_1k']:.3f} "
                    f"broker {row['broker_s_per_1k']:.3f} CPU-s per 1k, lost {row['lost']:.0f}",
                    flush=True,
                )
        print("\n| system | deliveries/s | CPU-s per 1k: worker / broker | lost |\n|---|---:|---:|---:|")
        for label, rows in results.items():
            rate = statistics.median(r["deliveries_per_s"] for r in rows)
            worker = statistics.median(r["worker_s_per_1k"] for r in rows)
            broker = statistics.median(r["broker_s_per_1k"] for r in rows)
            print(f"| {label} | {rate:,.0f} | {worker:.3f} / {broker:.3f} | {max(r['lost'] for r in rows):.0f} |")
        pairs = (
            ("lane: candidate / baseline", "lane · candidate", "lane · baseline"),
            ("candidate: lane / dedicated", "lane · candidate", "dedicated · candidate"),
            ("baseline lane / candidate dedicated", "lane · baseline", "dedicated · candidate"),
        )
        print("\n| ratio, per round | deliveries/s | worker CPU-s per 1k |\n|---|---:|---:|")
        for name, top, bottom in pairs:
            cells = []
            for key in ("deliveries_per_s", "worker_s_per_1k"):
                ratios = [a[key] / b[key] for a, b in zip(results[top], results[bottom], strict=True)]
                each = ", ".join(f"{r:.2f}" for r in ratios)
                cells.append(f"{statistics.median(ratios):.2f} ({each})")
            print(f"| {name} | {cells[0]} | {cells[1]} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="a checkout's root (git archive main warren | tar -x)")
    parser.add_argument("--candidate", default=str(ROOT))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scale", type=float, default=0.5)
    parser.add_argument("--workload", default="happy", choices=["happy", "slow"])
    asyncio.run(rounds(parser.parse_args()))


if __name__ == "__main__":
    main()
