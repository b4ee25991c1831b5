"""``warren publish --file`` riding through a node killed mid-publish, on the three-node cluster of scripts/cluster.

    scripts/cluster up
    .venv/bin/python bench/cluster_publish.py [--events 3000] [--runs 1] [--deadline SECONDS]

Topology declared on the cluster (an unordered and an ordered endpoint, leaders spread with ``rabbitmq-queues
rebalance``), two workers delivering to a receiver in this process, and ``warren publish --file -`` against the
three nodes fed ``--events`` keyed events on standard input at a steady pace; the node holding the most queue
leaders is killed with ``kill -9`` a third of the way into the stream and started again 8 s later. Prints, per
run, the publish's exit code and summary line, and per endpoint what was delivered, lost, duplicated and
reordered among first deliveries. tests/cluster/test_publish_node_killed.py runs it and asserts on it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import (
    CLUSTER,
    PY,
    Process,
    Receiver,
    Seen,
    _bases,
    cluster_ctl,
    config_for,
    fresh_vhost,
    leaders,
    rebalance,
)
from tests.support.processes import write_config
from warren.broker.applier import apply_setup
from warren.broker.management import ManagementClient

PACE = 0.001  # seconds between two lines written to the publisher (about 1,000 events/s offered)
KEYS = 50


def _line(n: int) -> bytes:
    key = f"k{n % KEYS}"
    return orjson.dumps({"id": f"e-{n}", "type": "bench.event", "key": key, "data": {"n": n, "key": key}}) + b"\n"


async def publish_kill_run(
    events: int = 3000, workdir: Path | None = None, deadline: float | None = None
) -> dict[str, Any]:
    """The scenario of the module docstring; returns its figures. ``deadline``: the publish's ``--deadline``
    (None: its default; 0: send once, the behaviour before re-sending)."""
    workdir = workdir or Path(tempfile.mkdtemp(prefix="warren-publish-kill-"))
    receiver = await Receiver().start()
    workers: list[Process] = []
    figures: dict[str, Any] = {"events": events}
    try:
        async with fresh_vhost(CLUSTER) as vhost:
            prefix = f"p{uuid.uuid4().hex[:6]}"
            config = config_for(CLUSTER, vhost, prefix, receiver)
            await apply_setup(config)
            await rebalance(vhost)
            path = write_config(workdir, config, f"{prefix}.toml")
            async with ManagementClient(_bases(CLUSTER.management), "guest", "guest", vhost) as api:
                spread = await leaders(api)
            figures["leaders"] = dict(spread)
            victim = int(spread.most_common(1)[0][0].split("@")[0].removeprefix("warren"))
            for n in range(2):
                log = workdir / f"{prefix}-worker-{n}.log"
                workers.append(await Process(["worker", "--config", str(path)], log).start(b"worker consuming"))
            publisher = await asyncio.create_subprocess_exec(
                PY,
                "-m",
                "warren",
                "publish",
                "--config",
                str(path),
                "--file",
                "-",
                *([] if deadline is None else ["--deadline", str(deadline)]),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            assert publisher.stdin is not None
            started = time.monotonic()
            restart: asyncio.Task[None] | None = None
            for n in range(events):
                if n == events // 3:
                    await cluster_ctl("kill", str(victim))
                    figures["killed"] = f"warren{victim}@localhost after {n} lines"

                    async def start_again() -> None:
                        await asyncio.sleep(8)
                        await cluster_ctl("start", str(victim))

                    restart = asyncio.create_task(start_again())
                publisher.stdin.write(_line(n))
                if n % 20 == 0:
                    await publisher.stdin.drain()
                    await asyncio.sleep(PACE * 20)
            publisher.stdin.close()
            out, err = await asyncio.wait_for(publisher.communicate(), 240)
            figures["publish_exit"] = publisher.returncode
            figures["publish_summary"] = out.decode(errors="replace").strip().splitlines()[-1:]
            figures["publish_seconds"] = round(time.monotonic() - started, 1)
            figures["publish_errors"] = [
                line for line in err.decode(errors="replace").splitlines() if line.startswith("event ")
            ][:5]
            if restart is not None:
                await restart
            deadline = time.monotonic() + 180
            while min(receiver.delivered(p) for p in ("ordered", "unordered")) < events:
                if time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(1.0)  # late duplicates, if any, are counted too
            for name in ("unordered", "ordered"):
                seen = receiver.paths.get(name, Seen())
                figures[name] = {
                    "delivered": len(seen.ok),
                    "lost": events - len(seen.ok),
                    "duplicates": seen.duplicates,
                    "order_violations": seen.violations,
                }
            figures["workers_alive"] = all(w.alive for w in workers)
            figures["workdir"] = str(workdir)
            for worker in workers:
                await worker.stop()
            workers.clear()
    finally:
        for worker in workers:
            await worker.stop()
        await receiver.stop()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--deadline", type=float, default=None, help="warren publish --deadline (0: send once)")
    args = parser.parse_args()
    for run in range(args.runs):
        figures = asyncio.run(publish_kill_run(args.events, deadline=args.deadline))
        print(f"run {run + 1}:", json.dumps(figures, indent=2), flush=True)


if __name__ == "__main__":
    main()
