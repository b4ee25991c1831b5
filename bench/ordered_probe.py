"""What an ordered endpoint's worker does per delivery, beside an unordered one's (issue 38, part 4): ack frames,
in flight, window use, and how the keys spread over the partitions.

    .venv/bin/python bench/ordered_probe.py [--runs 1] [--workloads slow] [--partitions 32,4] [--scale 0.5]

Runs each workload to the unordered endpoint and to the ordered one (each partition count), as bench/ordered.py
does, with the worker started through this file (``--launch``), which counts, without changing what it runs:

- ``basic.ack`` frames the worker sent (``multiple`` and single) and deliveries per frame;
- every 20 ms while deliveries are held: requests in flight (the unordered runner's deliveries; for the ordered
  one, the key lanes running), messages held unacked in each partition's window, and of those the acks waiting
  in its batcher;
- deliveries and distinct keys per partition (the consistent-hash exchange's spread of the bench's 1,000 keys);
- channels opened and each consume's prefetch (``basic.qos``);
- per key, the time from one handling's end to the next one's start when the next was already delivered (the
  lanes' own hand-off), and how often it was; each delivery's wait behind its key; and the in-flight count over
  the run, in tenths of it (a second line per run).

The worker writes them as JSON into the file named after ``--launch`` when it stops; this prints one row per
run. Rates here are not for quoting (the probe samples the loop): bench/ordered.py measures the rate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import weakref
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SAMPLE_EVERY = 0.02


def launch(out: str, args: list[str]) -> None:
    """Patch the counters in (module docstring), run ``warren *args``, and write the counts into ``out``."""
    import atexit

    import aiormq.channel

    from warren.consumers import consuming, key_lanes

    stats: dict[str, Any] = {"ack_multiple": 0, "ack_single": 0, "channels": 0, "qos": Counter(), "samples": []}
    partitions: weakref.WeakSet[Any] = weakref.WeakSet()
    runners: weakref.WeakSet[Any] = weakref.WeakSet()
    delivered: dict[int, int] = {}  # id(lanes) -> deliveries
    keys: dict[int, set[str]] = {}
    arrived: dict[tuple[int, int], float] = {}  # (id(lanes), delivery tag) -> when dispatched
    last_end: dict[str, float] = {}  # key -> when its last handling ended
    handoffs: list[list[float]] = []  # per handling after its key's previous: [end -> start s, arrived before end]
    waits: list[float] = []  # per ordered handling: arrival -> start, seconds (behind its key in the lane)

    basic_ack = aiormq.channel.Channel.basic_ack
    basic_qos = aiormq.channel.Channel.basic_qos
    channel_open = aiormq.channel.Channel.open

    async def counted_ack(self: Any, delivery_tag: int, multiple: bool = False, wait: bool = True) -> None:
        stats["ack_multiple" if multiple else "ack_single"] += 1
        await basic_ack(self, delivery_tag, multiple=multiple, wait=wait)

    async def counted_qos(self: Any, **kwargs: Any) -> Any:
        stats["qos"][str(kwargs.get("prefetch_count"))] += 1
        return await basic_qos(self, **kwargs)

    async def counted_open(self: Any, *args: Any, **kwargs: Any) -> Any:
        stats["channels"] += 1
        return await channel_open(self, *args, **kwargs)

    aiormq.channel.Channel.basic_ack = counted_ack  # type: ignore[method-assign]
    aiormq.channel.Channel.basic_qos = counted_qos  # type: ignore[method-assign]
    aiormq.channel.Channel.open = counted_open  # type: ignore[method-assign]

    lanes_init = key_lanes.PartitionLanes.__init__
    dispatch = key_lanes.PartitionLanes.dispatch
    consumers_init = consuming.EndpointConsumers.__init__

    def lanes_registered(self: Any, *args: Any, **kwargs: Any) -> None:
        lanes_init(self, *args, **kwargs)
        partitions.add(self)
        handle = self._handle

        async def timed(message: Any) -> None:
            start = time.monotonic()
            key = key_lanes.lane_key(message)
            at = arrived.pop((id(self), message.delivery_tag or 0), start)
            waits.append(start - at)
            if (end := last_end.get(key)) is not None:
                handoffs.append([start - end, 1.0 if at <= end else 0.0])
            try:
                await handle(message)
            finally:
                last_end[key] = time.monotonic()

        self._handle = timed
        if delay := os.environ.get("WARREN_PROBE_ACK_DELAY"):  # a sweep: the partition batchers' window, seconds
            self.acks.max_delay = float(delay)
        if flush_at := os.environ.get("WARREN_PROBE_FLUSH_AT"):
            self.acks.flush_at = int(flush_at)

    async def dispatch_counted(self: Any, message: Any) -> None:
        delivered[id(self)] = delivered.get(id(self), 0) + 1
        arrived[(id(self), message.delivery_tag or 0)] = time.monotonic()
        keys.setdefault(id(self), set()).add(key_lanes.lane_key(message))
        await dispatch(self, message)

    def consumers_registered(self: Any, *args: Any, **kwargs: Any) -> None:
        consumers_init(self, *args, **kwargs)
        runners.add(self)

    key_lanes.PartitionLanes.__init__ = lanes_registered  # type: ignore[method-assign]
    key_lanes.PartitionLanes.dispatch = dispatch_counted  # type: ignore[method-assign]
    consuming.EndpointConsumers.__init__ = consumers_registered  # type: ignore[method-assign]

    async def sample() -> None:
        while True:
            await asyncio.sleep(SAMPLE_EVERY)
            held = [lanes.held for lanes in partitions]
            unordered = sum(r.in_flight for r in runners if not r.ordered)
            if sum(held) + unordered == 0:
                continue
            stats["samples"].append(
                {
                    "t": time.monotonic(),
                    "in_flight": unordered + sum(lanes._running for lanes in partitions),
                    "held": held,
                    "acks_waiting": sum(len(lanes.acks._acked) for lanes in partitions),
                }
            )

    from warren import loop as warren_loop

    factory = warren_loop.loop_factory() or asyncio.new_event_loop
    samplers: list[asyncio.Task[None]] = []

    def sampled() -> asyncio.AbstractEventLoop:
        created = factory()
        samplers.append(created.create_task(sample()))
        return created

    warren_loop.loop_factory = lambda: sampled

    def write() -> None:
        stats["per_partition"] = sorted(delivered.values())
        stats["keys_per_partition"] = sorted(len(k) for k in keys.values())
        stats["handoffs"] = handoffs
        stats["lane_waits"] = waits
        Path(out).write_text(json.dumps(stats))

    atexit.register(write)
    sys.argv = ["warren", *args]
    from warren.cli import main as warren

    warren()


def summary(stats: dict[str, Any], delivered: float) -> dict[str, float]:
    samples = stats["samples"]
    frames = stats["ack_multiple"] + stats["ack_single"]
    per_partition = stats["per_partition"] or [0]
    held = [h for s in samples for h in s["held"]]
    return {
        "ack_frames_per_1k": frames / max(1e-9, delivered / 1000),
        "single_share": stats["ack_single"] / max(1, frames),
        "deliveries_per_frame": delivered / max(1, frames),
        "in_flight": statistics.mean(s["in_flight"] for s in samples) if samples else 0.0,
        "held_per_partition": statistics.mean(held) if held else 0.0,
        "acks_waiting": statistics.mean(s["acks_waiting"] for s in samples) if samples else 0.0,
        "share_max": max(per_partition) / max(1, sum(per_partition)),
        "share_min": min(per_partition) / max(1, sum(per_partition)),
        "keys_min": min(stats["keys_per_partition"] or [0]),
        "keys_max": max(stats["keys_per_partition"] or [0]),
        "channels": stats["channels"],
        "qos": ",".join(f"{k}x{v}" for k, v in sorted(stats["qos"].items())),
        **handoff_summary(stats),
    }


def quantile(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))] if values else 0.0


def handoff_summary(stats: dict[str, Any]) -> dict[str, Any]:
    """Per key: the time from one handling's end to the next one's start of that key, when the next was already
    delivered (the lane's own hand-off) and share of such; the wait of a delivery behind its key in the lane; and
    the in-flight count over the run, in tenths of its sampled time (the timeline)."""
    queued = [h[0] for h in stats.get("handoffs", []) if h[1]]
    waits = stats.get("lane_waits", [])
    samples = [s for s in stats["samples"] if "t" in s]
    timeline: list[float] = []
    if samples:
        t0, t1 = samples[0]["t"], samples[-1]["t"]
        bins: list[list[int]] = [[] for _ in range(10)]
        for s in samples:
            bins[min(9, int(10 * (s["t"] - t0) / max(1e-9, t1 - t0)))].append(s["in_flight"])
        timeline = [statistics.mean(b) if b else 0.0 for b in bins]
    return {
        "handoff_queued_share": len(queued) / max(1, len(stats.get("handoffs", []))),
        "handoff_p50_ms": 1000 * quantile(queued, 0.5),
        "handoff_p99_ms": 1000 * quantile(queued, 0.99),
        "lane_wait_p50_ms": 1000 * quantile(waits, 0.5),
        "lane_wait_p99_ms": 1000 * quantile(waits, 0.99),
        "timeline": " ".join(f"{x:.0f}" for x in timeline),
        "sampled_s": (samples[-1]["t"] - samples[0]["t"]) if samples else 0.0,
    }


async def main(runs: int, chosen: list[str], scale: float, partitions: list[int]) -> None:
    from bench.run import PY, WORKLOADS, System, one_run, receiving

    workdir = Path(tempfile.mkdtemp(prefix="warren-bench-probe-"))
    print(
        "| workload | endpoint | deliveries/s | ack frames per 1k (single share) | deliveries per ack frame "
        "| in flight (mean) | held per partition window (mean) | acks waiting (mean) "
        "| partition share min-max | keys per partition | channels | qos (prefetch x channels) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    async with receiving(workdir):
        for name in chosen:
            unordered = replace(WORKLOADS[name], count=max(100, round(WORKLOADS[name].count * scale)))
            variants = {"unordered": unordered} | {
                f"ordered, {n} partitions": replace(unordered, ordered=True, partitions=n) for n in partitions
            }
            for _ in range(runs):
                for label, workload in variants.items():
                    out = workdir / f"{name}-{label.replace(' ', '').replace(',', '-')}.json"
                    system = System(1, "uvloop", launcher=(PY, __file__, "--launch", str(out)), variant="probe")
                    row = await one_run(workload, system, workdir)
                    s = summary(json.loads(out.read_text()), workload.count)
                    print(
                        f"| {name} | {label} | {row['deliveries_per_s']:,.0f} | {s['ack_frames_per_1k']:,.0f} "
                        f"({s['single_share']:.0%}) | {s['deliveries_per_frame']:.2f} | {s['in_flight']:.1f} "
                        f"| {s['held_per_partition']:.1f} | {s['acks_waiting']:.1f} "
                        f"| {s['share_min']:.1%}-{s['share_max']:.1%} | {s['keys_min']}-{s['keys_max']} "
                        f"| {s['channels']} | {s['qos']} |",
                        flush=True,
                    )
                    print(
                        f"|  | hand-off (next already delivered: {s['handoff_queued_share']:.0%}) p50/p99 "
                        f"{s['handoff_p50_ms']:.2f}/{s['handoff_p99_ms']:.2f} ms; wait behind its key p50/p99 "
                        f"{s['lane_wait_p50_ms']:.2f}/{s['lane_wait_p99_ms']:.2f} ms; in flight per tenth of "
                        f"{s['sampled_s']:.1f} s: {s['timeline']} |",
                        flush=True,
                    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--launch"]:
        launch(sys.argv[2], sys.argv[3:])
    else:
        parser = argparse.ArgumentParser()
        parser.add_argument("--runs", type=int, default=1)
        parser.add_argument("--workloads", default="slow")
        parser.add_argument("--scale", type=float, default=0.5)
        parser.add_argument("--partitions", default="32,4")
        a = parser.parse_args()
        asyncio.run(main(a.runs, a.workloads.split(","), a.scale, [int(n) for n in a.partitions.split(",")]))
