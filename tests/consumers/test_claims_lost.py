"""A claims connection lost and claimed again at once: partitions claimed again are not handed back.

Pure test of PartitionClaims' bookkeeping with a stand-in runner (no broker): a node-kill run on a cluster lost the
claims connection, reclaimed the same four partitions 0.3 s later, and the hand-backs still queued from the loss
then unassigned them, leaving them claimed by this worker and consumed by none (512 events stuck).
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from warren.consumers.partition_claims import PartitionClaims

pytestmark = pytest.mark.timeout(10)


class SlowRunner:
    queue_names = ["x.ep.o.p00", "x.ep.o.p01", "x.ep.o.p02"]

    def __init__(self) -> None:
        self.unassigned: list[str] = []

    async def unassign(self, name: str) -> None:
        await asyncio.sleep(0.05)  # a hand-back waits for its lanes to settle
        self.unassigned.append(name)


async def test_partitions_claimed_again_while_hand_backs_settle_stay_consumed() -> None:
    runner = SlowRunner()
    claims = PartitionClaims(cast(Any, None), cast(Any, runner), interval=1.0)
    claims.owned = list(runner.queue_names)
    claims._on_lost()  # the claims connection dropped: every partition is to be handed back
    assert claims.owned == []
    await asyncio.sleep(0.01)  # the first hand-back is under way ...
    claims.owned = ["x.ep.o.p01", "x.ep.o.p02"]  # ... when the loop reconnects and claims two of them again
    for _ in range(100):
        if runner.unassigned:
            await asyncio.sleep(0.2)
            break
        await asyncio.sleep(0.01)
    assert runner.unassigned == ["x.ep.o.p00"]
