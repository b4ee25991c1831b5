"""The worker's young-generation threshold (warren/core/collector.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from warren.core.collector import YOUNG_THRESHOLD, raise_young_threshold


@pytest.fixture(autouse=True)
def restored() -> Iterator[None]:
    threshold, enabled = gc.get_threshold(), gc.isenabled()
    yield
    gc.set_threshold(*threshold)
    if enabled:
        gc.enable()
    else:
        gc.disable()


def test_raises_the_young_threshold_and_keeps_the_older_ones() -> None:
    gc.set_threshold(700, 11, 12)
    assert raise_young_threshold() is True
    assert gc.get_threshold() == (YOUNG_THRESHOLD, 11, 12)


def test_cyclic_garbage_is_still_collected() -> None:
    raise_young_threshold()

    class Node:
        other: object

    collected: list[int] = []
    gc.callbacks.append(lambda phase, info: collected.append(info["collected"]) if phase == "stop" else None)
    try:
        for _ in range(3 * YOUNG_THRESHOLD):
            a, b = Node(), Node()
            a.other, b.other = b, a  # a cycle: only the collector frees it
    finally:
        gc.callbacks.pop()
    assert sum(collected) > 0


@pytest.mark.parametrize("threshold", [(0, 10, 10), (50_000, 10, 10)])
def test_leaves_a_collector_turned_off_or_waiting_longer(threshold: tuple[int, int, int]) -> None:
    gc.set_threshold(*threshold)
    assert raise_young_threshold() is False
    assert gc.get_threshold() == threshold


def test_leaves_a_disabled_collector() -> None:
    gc.set_threshold(700, 10, 10)
    gc.disable()
    assert raise_young_threshold() is False
    assert gc.get_threshold() == (700, 10, 10)
