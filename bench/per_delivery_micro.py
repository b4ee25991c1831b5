"""The worker's own per-delivery pieces that issue 38's second pass changed, in CPU µs, in this process (no broker,
no HTTP): reading the envelope, deciding a delivered attempt as the runner does, the answer's result, the
endpoint's standing, and the attempt's and the settlement's metrics; and beside them (issue 38's third pass) a
whole delivery through the runner without the broker or the network (bench/delivery_path.py). ``--source DIR``
measures another checkout's ``warren/`` (main, exported with ``git archive``); ``--compare DIR`` runs this one and
DIR's alternately, ``--rounds`` times each, in fresh processes, and prints the medians side by side.

    .venv/bin/python bench/per_delivery_micro.py --compare /tmp/warren-main --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
import timeit
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
WHOLE = "a whole delivery, no I/O (bench/delivery_path.py)"  # not one of the pieces: beside their total
LANE = "a lane endpoint's whole event, inline, no I/O (bench/lane_path.py)"  # the same for a lane endpoint


def measure(number: int, repeat: int) -> dict[str, float]:
    import orjson
    from multidict import CIMultiDict

    from warren.broker.endpoint_state.records import EndpointView, standing
    from warren.consumers import decision
    from warren.consumers.delivery import parse_delivery
    from warren.consumers.hooks import AttemptRecord
    from warren.consumers.metrics import WorkerMetrics
    from warren.topology.config import RetryPolicy
    from warren.transport.http import http_result, kept_headers

    body = orjson.dumps({"id": "evt_1", "type": "order.paid", "timestamp": "2026-01-01T00:00:00Z", "key": "k1",
                         "data": {"text": "x" * 300}})  # fmt: skip
    headers = {"warren-key": "k1", "warren-published": 1_700_000_000_000}
    answer = CIMultiDict({"Content-Type": "text/plain", "Content-Length": "2"})
    policy, view, metrics = RetryPolicy(), EndpointView("shop"), WorkerMetrics(["shop"])
    record = AttemptRecord("shop", "evt_1", 1, 200, None, 0.0021, "delivered", None, 1.5, None, None, "ok", ())
    ok = http_result(200, None, 0.002)
    lazy = hasattr(decision, "ACK")  # this pass: the runner hands decide a function that makes the context
    context = partial(decision.Context, attempt=1, age=1.0, policy=policy)
    pieces: dict[str, Any] = {
        "parse_delivery": lambda: parse_delivery(body, "evt_1", headers, 0, max_payload=1 << 20),
        "decide, delivered": (lambda: decision.decide(ok, context)) if lazy else lambda: decision.decide(ok, context()),
        "http_result + kept_headers": lambda: http_result(
            200, None, 0.002, retry_after=answer.get("Retry-After"), excerpt="ok", response_headers=kept_headers(answer)
        ),
        "standing": lambda: standing(view, 0.0),
        "metrics: observe + settle": lambda: (metrics.observe(record), metrics.settle("shop", "acked")),
    }
    figures = {
        name: min(timeit.repeat(call, number=number, repeat=repeat, timer=time.process_time)) / number * 1e6
        for name, call in pieces.items()
    }
    sys.path.insert(1, str(HERE))  # bench/, after the measured warren/
    from bench.delivery_path import run

    figures[WHOLE] = asyncio.run(run(max(number // 4, 1000), repeat))
    from bench.lane_path import run as lane_run

    figures[LANE] = asyncio.run(lane_run(max(number // 4, 1000), repeat))
    return figures


def compare(other: str, rounds: int, number: int) -> None:
    sides = {"this checkout": None, other: other}
    runs: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    for i in range(rounds):
        for side, source in list(sides.items())[:: 1 if i % 2 == 0 else -1]:  # each goes first in turn
            command = [sys.executable, __file__, "--number", str(number)] + (["--source", source] if source else [])
            runs[side].append(json.loads(subprocess.run(command, check=True, capture_output=True).stdout))
    names = list(runs["this checkout"][0])
    print(f"| piece | {' | '.join(f'{side}, CPU µs (median of {rounds})' for side in sides)} | this / other |")
    print("|---|" + "---:|" * (len(sides) + 1))
    for name in names:
        medians = [statistics.median(r[name] for r in runs[side]) for side in sides]
        print(f"| {name} | {' | '.join(f'{m:.2f}' for m in medians)} | {medians[0] / medians[1]:.2f} |")
    pieces = [n for n in names if n not in (WHOLE, LANE)]
    totals = [sum(statistics.median(r[n] for r in runs[side]) for n in pieces) for side in sides]
    print(f"| the pieces above | {' | '.join(f'{t:.2f}' for t in totals)} | {totals[0] / totals[1]:.2f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", help="measure this checkout's warren/ instead")
    parser.add_argument("--compare", help="a checkout to measure beside this one, alternately")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--number", type=int, default=20_000)
    a = parser.parse_args()
    if a.compare:
        compare(a.compare, a.rounds, a.number)
    else:
        sys.path.insert(0, a.source or str(HERE))
        print(json.dumps(measure(a.number, 5)))
