"""``warren setup`` run while a fleet is at work: the workers' own queues are neither leftovers nor changes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import warren
from tests.support.processes import running_workers, write_config
from tests.support.setup_helpers import prefix_state
from tests.support.topology import declare
from warren.broker.management import ManagementClient
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def fleet(make_config: Any, tmp_path: Path) -> AsyncIterator[tuple[WarrenConfig, Path]]:
    """Two real workers serving an unordered endpoint (rate-limited: a health roster) and an ordered one."""
    config: WarrenConfig = make_config(
        [
            {"name": "acme", "url": "http://127.0.0.1:9/acme", "events": ["a.#"], "rate_limit": 50},
            {"name": "ledger", "url": "http://127.0.0.1:9/ledger", "events": ["b.#"], "ordering": "key",
             "partitions": 4},
        ]
    )  # fmt: skip
    await declare(config)
    path = write_config(tmp_path, config)
    async with running_workers(path, 2):
        yield config, path


async def _runtime_queues(api: ManagementClient, prefix: str, timeout: float = 15) -> set[str]:
    """The queues the workers declared themselves, once both claim partitions and the roster is there."""
    planned = {names.work_queue(prefix, "acme"), names.dlq(prefix, "acme"), names.dlq(prefix, "ledger")}
    planned |= {names.partition_queue(prefix, "ledger", i) for i in range(4)}
    deadline = time.monotonic() + timeout
    while True:
        state = await prefix_state(api, prefix)
        found = {q for q in state.queues if not q.startswith(f"{prefix}.delay.") and q not in planned}
        owners = {q for q in found if q.endswith(".owner")}
        if len(owners) == 4 or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.2)


async def test_setup_prune_and_dry_run_leave_a_running_fleet_alone(
    fleet: tuple[WarrenConfig, Path], management: ManagementClient
) -> None:
    # Given two workers at work: the ordered endpoint's claims and roster, the health roster, are on the broker
    config, path = fleet
    prefix = config.broker.prefix
    runtime = await _runtime_queues(management, prefix)
    assert {q for q in runtime if q.endswith(".owner")} == {
        f"{names.partition_queue(prefix, 'ledger', i)}.owner" for i in range(4)
    }, runtime
    assert f"{prefix}.ep.ledger.roster" in runtime and names.health_roster(prefix, "acme") in runtime
    # When setup, setup --prune, setup --dry-run and setup --prune --dry-run run while they work
    plain = await warren("setup", "--config", str(path))
    pruned = await warren("setup", "--prune", "--config", str(path))
    dry = await warren("setup", "--dry-run", "--config", str(path))
    dry_prune = await warren("setup", "--prune", "--dry-run", "--config", str(path))
    # Then each exits 0 with no change, no leftover and no warning about partitions
    for run in (plain, pruned, dry, dry_prune):
        assert run.code == 0, (run.out, run.err)
        assert "No change" in run.out, run.out
        assert "Leftovers" not in run.out and "warning" not in run.out, run.out
        assert "RESOURCE_LOCKED" not in run.out + run.err
    # And every queue of the fleet is still there, the workers' own included (claims may move meanwhile)
    assert await _runtime_queues(management, prefix) == runtime
