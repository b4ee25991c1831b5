"""The broker's side of an ordered endpoint alone: Warren's publisher into the unordered topology and into the
ordered one (N partitions), no worker consuming, interleaved; confirmed publishes per second and the broker's
CPU-s per 1,000 (issue 38: what an ordered endpoint costs before any delivery).

    .venv/bin/python bench/ordered_ingest.py [--runs 3] [--count 5000] [--partitions 1,4,32]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import uuid
from dataclasses import replace
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import cpu
from bench.run import AMQP, PY, WORKLOADS, config_for
from bench.topology_teardown import declared


async def one(ordered: bool, partitions: int, count: int) -> dict[str, float]:
    workload = replace(WORKLOADS["slow"], ordered=ordered, partitions=partitions)
    prefix = f"bench{uuid.uuid4().hex[:6]}"
    async with declared(config_for(prefix, workload)):
        broker = cpu.broker_pid(AMQP)
        before = cpu.process_seconds(broker)
        args = {"--url": AMQP, "--prefix": prefix, "--count": str(count)}  # Warren's publisher, full speed
        command = [PY, str(ROOT / "bench" / "publisher.py"), *(x for pair in args.items() for x in pair)]
        publisher = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE)
        out, _ = await publisher.communicate()
        after = cpu.process_seconds(broker)
        published = orjson.loads(out.strip().rsplit(b"\n", 1)[-1])  # its last line
        used = -1.0 if before is None or after is None else after - before
        return {"publish_per_s": published["publish_rate"], "broker_s_per_1k": used / (count / 1000)}


async def main(runs: int, count: int, partitions: list[int]) -> None:
    rows: dict[str, list[dict[str, float]]] = {"unordered": []} | {f"ordered, {n} partitions": [] for n in partitions}
    for _ in range(runs):  # interleaved: the machine's drift hits every topology alike
        rows["unordered"].append(await one(False, 1, count))
        for n in partitions:
            rows[f"ordered, {n} partitions"].append(await one(True, n, count))
    print("| topology | confirmed publishes/s (runs) | broker CPU-s per 1k (runs) |\n|---|---:|---:|")
    for label, rs in rows.items():
        rate = [r["publish_per_s"] for r in rs]
        broker = [r["broker_s_per_1k"] for r in rs]
        print(
            f"| {label} | {statistics.median(rate):,.0f} ({', '.join(f'{x:,.0f}' for x in rate)}) | "
            f"{statistics.median(broker):.3f} ({', '.join(f'{x:.3f}' for x in broker)}) |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--partitions", default="1,4,32")
    a = parser.parse_args()
    asyncio.run(main(a.runs, a.count, [int(n) for n in a.partitions.split(",")]))
