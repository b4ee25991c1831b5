"""One publisher's whole process, looked into over its publish span only (first publish -> last confirm), issue 38.

    .venv/bin/python bench/publish_process.py --kind warren|bare [--count 20000] [--mode gc|census|cprofile]
    WT=<another checkout> .venv/bin/python bench/publish_process.py --kind warren    # that checkout's warren

Runs ``bench/publisher.py``'s side in this process against a fresh topology (as bench/publish_compare.py) and
prints its JSON line, then with ``--mode gc`` the garbage collections of each generation in the span and the
thread CPU they took (ms), with ``--mode census`` the objects the collector tracks 2 s into the span beyond
those before it, by type (what one in-flight event keeps alive, times the window), with ``--mode cprofile``
a cProfile dump (``--out``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import gc
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(os.environ.get("WT") or Path(__file__).resolve().parent.parent)
sys.path.insert(0, str(ROOT))

from bench import publisher as pub
from bench.run import AMQP, Workload, config_for
from bench.topology_teardown import declared

GC: dict[int, list[float]] = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}
_STARTED = [0.0]


def _collected(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _STARTED[0] = time.thread_time()
    else:
        GC[info["generation"]][0] += 1
        GC[info["generation"]][1] += time.thread_time() - _STARTED[0]


def _census() -> collections.Counter[str]:
    return collections.Counter(type(o).__qualname__ for o in gc.get_objects())


def instrument(mode: str, profile: cProfile.Profile) -> None:
    first, last = pub.first_publish, pub.last_confirm

    def started() -> None:
        first()
        if mode == "cprofile":
            profile.enable()
        elif mode == "gc":
            gc.callbacks.append(_collected)
        elif mode == "census":
            before = _census()

            def take() -> None:
                now = _census()
                grown = {k: n - before.get(k, 0) for k, n in now.items() if n - before.get(k, 0) > 100}
                top = sorted(grown.items(), key=lambda kv: -kv[1])
                print("census", sum(grown.values()), top, flush=True)

            asyncio.get_running_loop().call_later(2.0, take)

    def ended() -> None:
        if mode == "cprofile":
            profile.disable()
        elif mode == "gc":
            gc.callbacks.remove(_collected)
        last()

    pub.first_publish, pub.last_confirm = started, ended


async def main(kind: str, count: int) -> None:
    config = config_for(f"benchg{uuid.uuid4().hex[:6]}", Workload("happy", count, {}))
    async with declared(config):
        await pub.main(kind, AMQP, config.broker.prefix, count, 1000, 300, 512, 0, 0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--kind", choices=["warren", "bare"], required=True)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--mode", choices=["gc", "census", "cprofile"], default="gc")
    parser.add_argument("--out", default="publisher.prof", help="the cProfile dump (--mode cprofile)")
    a = parser.parse_args()
    profile = cProfile.Profile()
    instrument(a.mode, profile)
    asyncio.run(main(a.kind, a.count))
    if a.mode == "cprofile":
        profile.dump_stats(a.out)
    if a.mode == "gc":
        shown = {g: f"{n:.0f} collections, {t * 1000:.0f} ms" for g, (n, t) in GC.items()}
        print("gc", shown, "objects tracked at the end", len(gc.get_objects()))
