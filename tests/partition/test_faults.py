"""Each network fault of scripts/partition against a mixed run (bench/partition.py): nothing confirmed is lost.

Per fault: an unordered and an ordered endpoint (dedicated), one on a shared lane and a flaky one (503 to every
fourth request); two workers, one with a connection on the faulted node; 2,000 keyed events published while the
fault holds for 20 s, then healed. Checked: every confirmed event delivered at least once to every endpoint;
duplicates bounded (deliveries in flight when a link went, by the prefetch); no order violation and no key served by
two workers at once on the ordered endpoint; every queue empty at the end; both workers alive, never restarted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.partition import ENDPOINTS, fault_run

FAULTS = ["isolate-follower", "isolate-leader", "oneway", "pause", "lossy"]


@pytest.mark.timeout(420)
@pytest.mark.parametrize("fault", FAULTS)
async def test_a_network_fault_loses_nothing_confirmed_and_keeps_order(
    fault: str, partition_harness: str, tmp_path: Path
) -> None:
    figures = await fault_run(fault, events=2000, hold=20, workdir=tmp_path)
    print(json.dumps(figures, indent=2))
    # Each broken promise named first: a CI log cuts the figures short, and "assert 4 == 0" alone said nothing
    # of which endpoint or which figure it was (a 4.x leg, 2026-12-07).
    assert not broken_promises(figures), (broken_promises(figures), figures)
    assert figures["confirmed"] >= 1000, "most of the publish should ride through the fault"


def broken_promises(figures: dict[str, Any]) -> list[str]:
    """What of the run's promises did not hold, each named with its figure: every event accounted for, none
    confirmed lost, duplicates bounded, keys in order and never served twice at once, queues empty, workers up."""
    broken = []
    if figures["confirmed"] + figures["not_stored"] != 2000:
        broken.append(f"confirmed {figures['confirmed']} + not stored {figures['not_stored']} != 2000")
    for endpoint in ENDPOINTS:
        if figures[endpoint]["lost"]:
            broken.append(f"{endpoint}: {figures[endpoint]['lost']} confirmed events never delivered")
        if figures[endpoint]["duplicates"] > 600:
            broken.append(f"{endpoint}: {figures[endpoint]['duplicates']} duplicates (> 600)")
    for figure in ("order_violations", "overlaps"):
        if figures["ordered"][figure]:
            broken.append(f"ordered: {figures['ordered'][figure]} {figure}")
    if figures["left_in_queues"]:
        broken.append(f"left in queues: {figures['left_in_queues']}")
    if not figures["workers_alive"]:
        broken.append("a worker died")
    return broken
