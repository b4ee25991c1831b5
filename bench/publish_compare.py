"""Warren's publisher beside a bare aio-pika confirmed publisher, alone: nothing consumes while they publish.

    .venv/bin/python bench/publish_compare.py [--runs 3] [--count 20000] [--window 512] [--baseline DIR]

Each run declares a fresh topology (one endpoint, its quorum queue bound to everything, as bench/run.py's
*happy*), then runs ``bench/publisher.py --kind warren`` and ``--kind bare`` one after the other into it, in
their own processes, the order alternating from run to run so that drift in the machine hits both alike.
Prints each side's publish rate, its process's CPU-s per 1,000 events, RabbitMQ's and the machine's over the
same window, and the ratio Warren / bare per run. ``--baseline DIR`` adds a third side, Warren's publisher
from another checkout (e.g. a worktree of main: the same script, that checkout's ``warren``), so that a
change is measured before and after in one sitting (rate, and events per CPU-s of the publisher), with the load
average before and after. ``WARREN_BENCH_PROFILE=<dir>`` samples both publishers with py-spy (collapsed stacks,
a file each).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
import uuid
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import cpu
from bench.run import AMQP, PROFILE, PY, Workload, config_for
from bench.topology_teardown import declared


async def one(kind: str, prefix: str, count: int, window: int, baseline: str) -> dict[str, float]:
    broker = cpu.broker_pid(AMQP)
    broker_at, machine_at = cpu.process_seconds(broker), cpu.machine_busy_seconds()
    env = dict(os.environ)
    if kind == "baseline":
        env["WARREN_BENCH_CODE"], kind = baseline, "warren"
    command = [PY, str(ROOT / "bench" / "publisher.py"), "--kind", kind, "--url", AMQP, "--prefix", prefix]
    command += ["--count", str(count), "--window", str(window)]
    if PROFILE:
        out = Path(PROFILE) / f"publisher-{kind}-{prefix}.txt"
        spy = str(Path(PY).parent / "py-spy")
        command = [spy, "record", "--format", "raw", "-o", str(out), "--rate", "250", "--", *command]
    process = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE, env=env)
    out_text, _ = await process.communicate()
    result = orjson.loads([line for line in out_text.splitlines() if line.startswith(b"{")][-1])  # py-spy talks too
    broker_now = cpu.process_seconds(broker)
    thousands = max(1e-9, result["published"] / 1000)
    return {
        "rate": result["publish_rate"],
        "failed": result["failed"],
        "cpu_per_1k": result["cpu_s"] / thousands,
        "per_cpu_s": result["published"] / max(1e-9, result["cpu_s"]),
        "broker_per_1k": -1.0 if broker_now is None or broker_at is None else (broker_now - broker_at) / thousands,
        "machine_per_1k": (cpu.machine_busy_seconds() - machine_at) / thousands,
    }


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def main(runs: int, count: int, window: int, baseline: str) -> None:
    kinds = ("warren", "bare", "baseline") if baseline else ("warren", "bare")
    print(
        f"# Warren's publisher vs bare aio-pika · {platform.node()} · {os.cpu_count()} cores · Python "
        f"{platform.python_version()} · {runs} runs, interleaved, medians · {count:,} events · window {window} · "
        f"{time.strftime('%Y-%m-%d %H:%M')} · load average {load()}\n"
    )
    rows: dict[str, list[dict[str, float]]] = {kind: [] for kind in kinds}
    for run in range(runs):
        for kind in kinds if run % 2 == 0 else kinds[::-1]:
            config = config_for(f"benchp{uuid.uuid4().hex[:6]}", Workload("happy", count, {}))
            async with declared(config):
                rows[kind].append(await one(kind, config.broker.prefix, count, window, baseline))
    print("| publisher | publish/s | CPU-s per 1k: publisher / broker / machine | not confirmed | runs (publish/s) |")
    print("|---|---:|---:|---:|---|")
    for kind in kinds:
        r = rows[kind]
        med = {key: statistics.median(x[key] for x in r) for key in r[0]}
        broker = "-" if med["broker_per_1k"] < 0 else f"{med['broker_per_1k']:.3f}"
        label = f"warren @ {baseline}" if kind == "baseline" else kind
        each = ", ".join(f"{x['rate']:,.0f}" for x in r)
        print(
            f"| {label} | {med['rate']:,.0f} | {med['cpu_per_1k']:.3f} / {broker} / {med['machine_per_1k']:.3f} | "
            f"{max(x['failed'] for x in r):.0f} | {each} |"
        )
    for key, what in (("rate", "publish/s"), ("per_cpu_s", "events per CPU-s of the publisher")):
        for side in kinds:
            if side == "bare":
                continue
            pairs = [w[key] / b[key] for w, b in zip(rows[side], rows["bare"], strict=True)]
            shown = ", ".join(f"{p:.2f}" for p in pairs)
            print(f"\n{side} / bare, {what}: {statistics.median(pairs):.2f} ({shown})")
    print(f"\nload average at the end: {load()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--window", type=int, default=512)
    parser.add_argument("--baseline", default="", help="another checkout whose warren publishes as a third side")
    a = parser.parse_args()
    asyncio.run(main(a.runs, a.count, a.window, a.baseline))
