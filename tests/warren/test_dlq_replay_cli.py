"""Whole-DLQ replays through the real CLI, again and again: each shovel starts, moves, and goes away."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import warren
from tests.support.dead_letters import seed_dead_letters, wait_depth
from tests.support.processes import write_config
from tests.support.topology import declare
from warren.broker.events import Event
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(120)


async def test_five_whole_dlq_replays_in_a_row_each_complete_quickly(
    make_config: Any, tmp_path: Path, management: Any
) -> None:
    # Given an endpoint nobody consumes (its work queue keeps what is replayed) and its config file
    config: WarrenConfig = make_config(
        [{"name": "down", "url": "http://127.0.0.1:9/hook", "events": ["#"], "circuit": {"enabled": False}}]
    )
    await declare(config)
    path = write_config(tmp_path, config)
    prefix = config.broker.prefix
    work = names.work_queue(prefix, "down")
    took: list[float] = []
    for round_ in range(5):
        # When three dead letters are seeded and the whole DLQ is replayed, five times in a row
        await seed_dead_letters(config, "down", [Event(type="a.x", data={"r": round_, "i": i}) for i in range(3)])
        assert await wait_depth(config, names.dlq(prefix, "down"), 3, timeout=5)
        started = time.monotonic()
        run = await warren("dlq", "replay", "down", "--timeout", "20s", "--config", str(path), timeout=30)
        took.append(time.monotonic() - started)
        # Then every run moved its three letters and exited 0
        assert run.code == 0, (round_, run.out, run.err)
        assert "replayed 3 dead letter(s) of down" in run.out, (round_, run.out)
        assert await wait_depth(config, work, 3 * (round_ + 1), timeout=5)
    # And none waited out a timeout: each took seconds, and no shovel is left behind
    assert max(took) < 10, took
    left = await management.request("GET", f"parameters/shovel/{management.vhost}", allow_404=True) or []
    assert [p["name"] for p in left if p["name"].startswith(prefix + ".")] == []
