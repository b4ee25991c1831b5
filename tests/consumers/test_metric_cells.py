"""The worker's per-attempt metrics through their value cells (warren/consumers/metric_cells.py) expose exactly what
``prometheus_client``'s own methods would: sample for sample, bucket bounds included."""

from __future__ import annotations

import math
from typing import Any

import pytest
from prometheus_client import generate_latest

from warren.consumers.hooks import AttemptRecord
from warren.consumers.metric_cells import HistogramCells, adder, setter
from warren.consumers.metrics import SETTLEMENTS, WorkerMetrics

pytestmark = pytest.mark.timeout(30)

# Durations on, just under and just over bucket bounds (0.005, 0.01, ..., 30), beyond the last, and zero; attempt
# numbers on the bounds of theirs; ages past the largest finite bound.
DURATIONS = [0.0, 0.005, 0.0050001, 0.0049999, 0.01, 0.25, 1.0, 2.5, 30.0, 30.5, 1e9, 0.333]
OUTCOMES = ["delivered", "retry", "retry-in-place", "exhausted", "dead", "disabled", "parked"]


def records() -> list[AttemptRecord]:
    out = []
    for i, duration in enumerate(DURATIONS * 3):
        outcome = OUTCOMES[i % len(OUTCOMES)]
        endpoint = "a" if i % 3 else "b"
        age = [0.01, 0.05, 7.0, 86400.0, 4 * 86400.0, 0.0][i % 6]
        out.append(AttemptRecord(endpoint, f"evt_{i}", 1 + i % 17, 200, None, duration, outcome, None, age, None))
    return out


def observed_publicly(metrics: WorkerMetrics, record: AttemptRecord) -> None:
    """What WorkerMetrics.observe did before the cells: the library's own methods."""
    endpoint = record.endpoint
    metrics.attempts.labels(endpoint, record.outcome).inc()
    metrics.attempt_number.labels(endpoint).observe(record.attempt)
    metrics.request_seconds.labels(endpoint).observe(record.duration)
    metrics.last_age.labels(endpoint).set(record.age)
    if record.outcome == "delivered":
        metrics.age_seconds.labels(endpoint).observe(record.age)
    elif record.outcome == "retry-in-place":
        metrics.retries.labels(endpoint, "in-place").inc()


def settled_publicly(metrics: WorkerMetrics, endpoint: str, how: str) -> None:
    metrics.settlements.labels(endpoint, how).inc()
    if how == "retry-scheduled":
        metrics.retries.labels(endpoint, "delay-chain").inc()
        metrics.confirms.labels(endpoint, "delay").inc()
    elif how == "dead-lettered":
        metrics.dead.labels(endpoint).inc()
        metrics.confirms.labels(endpoint, "dead").inc()
    elif how == "filtered":
        metrics.filtered.labels(endpoint).inc()


def exposition(metrics: WorkerMetrics) -> list[str]:
    """The text /metrics serves, without the _created samples (the time each child was made)."""
    return [line for line in generate_latest(metrics.registry).decode().splitlines() if "_created" not in line]


def test_the_cells_expose_what_the_librarys_methods_would() -> None:
    # Given two workers' metrics, one fed through the cells and one through prometheus_client's own methods
    cells, public = WorkerMetrics(["a"]), WorkerMetrics(["a"])
    # When both see the same attempts and settlements (every outcome and settlement, values on bucket bounds)
    for record in records():
        cells.observe(record)
        observed_publicly(public, record)
    for i, how in enumerate(SETTLEMENTS * 2):
        endpoint = "a" if i % 2 else "c"
        cells.settle(endpoint, how)
        settled_publicly(public, endpoint, how)
    # Then /metrics says the same, sample for sample
    assert exposition(cells) == exposition(public)
    got = cells.registry.get_sample_value
    assert got("warren_request_duration_seconds_bucket", {"endpoint": "a", "le": "0.005"}) == 3.0
    assert got("warren_delivery_attempt_number_count", {"endpoint": "b"}) == 12.0


def test_a_nan_is_observed_as_the_library_does() -> None:
    cells, public = WorkerMetrics(), WorkerMetrics()
    record = AttemptRecord("a", "evt", 1, None, "boom", math.nan, "retry", 1.0, 1.0, None)
    cells.observe(record)
    observed_publicly(public, record)
    assert exposition(cells) == exposition(public)


class Plain:
    """A child with only the public methods (another version of prometheus_client)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float]] = []

    def inc(self, amount: float = 1) -> None:
        self.calls.append(("inc", amount))

    def set(self, value: float) -> None:
        self.calls.append(("set", value))

    def observe(self, value: float) -> None:
        self.calls.append(("observe", value))


def test_without_the_private_fields_the_public_methods_are_used() -> None:
    child: Any = Plain()
    adder(child)(1)
    setter(child)(2.5)
    HistogramCells(child).observe(0.5)
    assert child.calls == [("inc", 1), ("set", 2.5), ("observe", 0.5)]


def test_the_tallies_fold_at_every_scrape_as_the_cells_would_have_moved() -> None:
    # Given a worker's metrics fed through its tallies (this prometheus_client has the cells) and one fed publicly
    tallied, public = WorkerMetrics(["a"]), WorkerMetrics(["a"])
    assert tallied.observe == tallied._observe_tallied
    # When /metrics is read between the attempts and settlements, as well as after them
    for i, record in enumerate(records()):
        tallied.observe(record)
        observed_publicly(public, record)
        tallied.settle(record.endpoint, SETTLEMENTS[i % len(SETTLEMENTS)])
        settled_publicly(public, record.endpoint, SETTLEMENTS[i % len(SETTLEMENTS)])
        if i % 5 == 0:
            # Then each reading says what the library's own methods made by then, sample for sample
            assert exposition(tallied) == exposition(public)
    assert exposition(tallied) == exposition(public)


def test_a_read_restricted_to_some_names_folds_the_tallies_too() -> None:
    # Given a worker's metrics fed through its tallies, never read yet
    metrics = WorkerMetrics(["a"])
    assert metrics.observe == metrics._observe_tallied
    for record in records():
        metrics.observe(record)
        metrics.settle(record.endpoint, "acked")
    # When a scrape asks for two names only (``name[]``: prometheus_client's restricted registry)
    wanted = ["warren_delivery_attempts_total", "warren_settlements_total"]
    text = generate_latest(metrics.registry.restricted_registry(wanted)).decode()  # type: ignore[arg-type]
    # Then it says what the attempts and settlements made, not the zeros of the cells before any fold
    delivered = sum(1 for r in records() if r.endpoint == "a" and r.outcome == "delivered")
    assert f'warren_delivery_attempts_total{{endpoint="a",outcome="delivered"}} {float(delivered)}' in text
    acked = sum(1 for r in records() if r.endpoint == "b")
    assert f'warren_settlements_total{{endpoint="b",how="acked"}} {float(acked)}' in text
    assert "warren_request_duration_seconds" not in text  # restricted: only what was asked for
