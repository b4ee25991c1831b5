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
import os
import platform
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.run import PY, ROOT, WORKLOADS, System, cpu_cell, median, one_run, start_receiver

VARIANT = str(ROOT / "bench" / "worker_variant.py")


def ratios(rows: list[dict[str, float]], reference: list[dict[str, float]]) -> str:
    pairs = [a["worker_s_per_1k"] / b["worker_s_per_1k"] for a, b in zip(rows, reference, strict=True)]
    return f"{statistics.median(pairs):.2f} ({', '.join(f'{p:.2f}' for p in pairs)})"


async def main(runs: int, scale: float, chosen: list[str], baseline: str | None, candidate: str | None) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="warren-bench-worker-cpu-"))
    receiver = await start_receiver(workdir)
    bare = System(0, "uvloop")
    systems = [System(1, "uvloop", variant="this checkout"), bare]
    if candidate:  # a copy of this checkout's code, so that editing it cannot change a run under way
        systems[0] = System(1, "uvloop", launcher=(PY, VARIANT, "--source", candidate), variant="this change")
    if baseline:
        systems.insert(0, System(1, "uvloop", launcher=(PY, VARIANT, "--source", baseline), variant="baseline"))
    try:
        print(
            f"# Warren worker CPU per delivery · {platform.node()} · {os.cpu_count()} cores · Python "
            f"{platform.python_version()} · {runs} runs each, medians · --scale {scale:g} · "
            f"{time.strftime('%Y-%m-%d %H:%M')} · load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
        print(
            "\n| workload | system | deliveries/s | CPU-s per 1k: worker / broker / machine | worker CPU-s per 1k "
            "(per run) | lost | worker CPU vs bare loop (per run) | vs baseline (per run) |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for name in chosen:
            workload = WORKLOADS[name]
            results: dict[System, list[dict[str, float]]] = {s: [] for s in systems}
            for _ in range(runs):
                for system in systems:  # interleaved: drift in the machine's speed hits each alike
                    results[system].append(await one_run(workload, system, workdir, 0, scale))
            for system, rows in results.items():
                each = ", ".join(f"{r['worker_s_per_1k']:.3f}" for r in rows)
                vs_bare = ratios(rows, results[bare]) if system != bare else "-"
                vs_base = (
                    ratios(rows, results[systems[0]]) if baseline and system.workers and system != systems[0] else "-"
                )
                print(
                    f"| {name} | {system.name} | {median(rows, 'deliveries_per_s'):,.0f} | {cpu_cell(rows)} | "
                    f"{median(rows, 'worker_s_per_1k'):.3f} ({each}) | {max(r['lost'] for r in rows):.0f} | "
                    f"{vs_bare} | {vs_base} |",
                    flush=True,
                )
        print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"worker logs: {workdir}")
    finally:
        receiver.send_signal(signal.SIGTERM)
        await receiver.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=0.5, help="events per workload, times this")
    parser.add_argument("--workloads", default="happy,slow")
    parser.add_argument("--baseline", help="a checkout of other code (main) whose worker runs beside, same venv")
    parser.add_argument("--candidate", help="the code measured as this change (default: this checkout's warren/)")
    a = parser.parse_args()
    asyncio.run(main(a.runs, a.scale, a.workloads.split(","), a.baseline, a.candidate))
