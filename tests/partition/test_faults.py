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

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.partition import broken_promises, fault_run

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
