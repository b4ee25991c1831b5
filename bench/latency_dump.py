"""Where a run's slow deliveries come from: the receiver's dumps (``WARREN_BENCH_LATENCY_DUMP=DIR``) read back.

    .venv/bin/python bench/latency_dump.py DIR [--slow-ms 300] [--lanes 16] [--misbehaving hangs,refuses]

For each dump (one a run, in the order the runs ended), the first deliveries of the well-behaved endpoints are
put in classes by how they stand to bench/lanes.py's two misbehaving endpoints: ``co:<name>`` (subscribed to an
event type that endpoint also receives: with N endpoints, bench-0 ... bench-<N/100 - 1> share the hanging one's,
the next N/100 the refusing one's; their events are routed to both), ``mate:<name>`` (on that endpoint's lane,
``lane_of`` as Warren computes it), or ``other``; each split into an endpoint's first delivery of the run
(``first``: a new endpoint is served through its lane until an attempt there is fast, so these are the lane
copies; docs/architecture.md, "The first attempt inline") and its later ones (``later``: made inline by the
routing stage when its last attempt was fast and a slot was free, else copies too). Per class: count, p50,
p90, p99; then the deliveries slower than
``--slow-ms`` by lane and by the second (since the run's first publish) their event was published in. The same
percentiles in every class point at the whole machine or the broker; a class of its own points at the lanes or
the routing stage. The dump's fourth column (since 2026-12-06) is the event id (``webhook-id``), to find a
delivery in the worker's attempt lines (``event_id``).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from warren.topology.names import lane_of


def classify(name: str, endpoints: int, misbehaving: list[str], lanes: int) -> str:
    """The class of well-behaved endpoint ``name`` (``bench-<k>``) in a run of ``endpoints`` of them."""
    share = max(1, endpoints // 100)  # bench/lanes.py: each misbehaving endpoint gets 1% of the event types
    k = int(name.rsplit("-", 1)[-1]) if name.rsplit("-", 1)[-1].isdigit() else -1
    for i, bad in enumerate(misbehaving):
        if i * share <= k < (i + 1) * share:
            return f"co:{bad}"
    for bad in misbehaving:
        if lane_of(name, lanes) == lane_of(bad, lanes):
            return f"mate:{bad}"
    return "other"


def percentile(values: list[float], p: float) -> float:
    return values[min(len(values) - 1, int(p * len(values)))]


def report(path: Path, slow: float, lanes: int, misbehaving: list[str]) -> None:
    dump = orjson.loads(path.read_bytes())
    rows = dump["rows"]
    if not rows:
        return
    names = [row[2].rsplit("/", 1)[-1] for row in rows]
    endpoints = len(set(names))
    start = min(row[0] - row[1] for row in rows)
    print(f"\n{path.name}: {len(rows):,} first deliveries to {endpoints:,} endpoints, {dump['misbehaved']} requests to "
          f"the misbehaving ones")  # fmt: skip
    classes: dict[str, list[float]] = defaultdict(list)
    by_lane: Counter[int] = Counter()
    by_second: Counter[int] = Counter()
    seen: set[str] = set()
    for row, name in sorted(zip(rows, names, strict=True), key=lambda pair: pair[0][0]):  # in arrival order
        nth = "later" if name in seen else "first"
        seen.add(name)
        classes[f"{classify(name, endpoints, misbehaving, lanes)} · {nth}"].append(row[1])
        if row[1] > slow:
            by_lane[lane_of(name, lanes)] += 1
            by_second[int(row[0] - row[1] - start)] += 1
    print("| class | deliveries | p50 ms | p90 ms | p99 ms |\n|---|---:|---:|---:|---:|")
    for label, values in sorted(classes.items()):
        values.sort()
        cells = " | ".join(f"{percentile(values, p) * 1000:,.1f}" for p in (0.5, 0.9, 0.99))
        print(f"| {label} | {len(values):,} | {cells} |")
    print(f"slower than {slow * 1000:g} ms: {sum(by_lane.values()):,}; by lane {dict(sorted(by_lane.items()))}; "
          f"by second published {dict(sorted(by_second.items()))}")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("directory", type=Path)
    parser.add_argument("--slow-ms", type=float, default=300.0)
    parser.add_argument("--lanes", type=int, default=16)
    parser.add_argument("--misbehaving", default="hangs,refuses")
    a = parser.parse_args()
    for dumped in sorted(a.directory.glob("run-*.json")):
        report(dumped, a.slow_ms / 1000, a.lanes, a.misbehaving.split(","))
