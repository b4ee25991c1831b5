"""bench/lanes.py's isolation sides: this checkout alone, or two checkouts' code run by the same launcher."""

from __future__ import annotations

from bench.lanes import ROOT, isolation_systems


def test_without_a_baseline_the_worker_is_this_checkouts_own() -> None:
    systems = isolation_systems(None)
    assert list(systems) == [""]
    assert systems[""].launcher == ()


def test_a_baseline_runs_beside_the_candidate_through_the_same_launcher() -> None:
    systems = isolation_systems("/tmp/main-export")
    assert list(systems) == ["candidate", "baseline"]
    candidate, baseline = systems["candidate"].launcher, systems["baseline"].launcher
    assert candidate[-2:] == ("--source", str(ROOT)) and baseline[-2:] == ("--source", "/tmp/main-export")
    assert candidate[:-2] == baseline[:-2]  # one launcher: only the code differs
    assert isolation_systems("/b", "/c")["candidate"].launcher[-1] == "/c"
