"""Recover and replay (the admin API, ``warren endpoint recover``) on lane endpoints, on real RabbitMQ: two lane
endpoints share a lane and its DLQ; each operation takes the one endpoint's letters out of that DLQ, confirmed,
back to the lane, delivered once; the lane-mate's letters stay, in order, uncounted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.api.admin.conftest import AdminServer
from tests.support.cli import warren
from tests.support.dead_letters import peek_ids, seed_dead_letters, wait_depth
from tests.support.processes import write_config
from tests.support.receiver import Receiver
from tests.support.topology import declare
from warren.broker.dlq.browse import delivery_limit
from warren.broker.events import Event
from warren.broker.management import ManagementClient
from warren.consumers.worker import Worker
from warren.topology import names
from warren.topology.planner import DELIVERY_LIMIT

Start = Callable[..., Awaitable[AdminServer]]

pytestmark = [pytest.mark.timeout(90), pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)]

LANES = 2
HOUR_MS = 3_600_000


def mates() -> tuple[str, str]:
    """Two endpoint names on one lane."""
    found = [f"shop-{n}" for n in range(64) if names.lane_of(f"shop-{n}", LANES) == 0]
    return found[0], found[1]


async def deployment(start_admin: Start, receiver: Receiver) -> tuple[AdminServer, str, str, str]:
    """Two lane endpoints on lane 0, the first with 2 letters dead 2 h ago and 2 dead a minute ago, the second
    with 3 dead a minute ago, interleaved in the lane's DLQ: the API, the two names, and the DLQ."""
    first, second = mates()
    admin = await start_admin(
        [{"name": n, "url": f"{receiver.url}/{n}", "events": ["#"], "home": "lane"} for n in (first, second)],
        lanes={"count": LANES},
    )
    await declare(admin.config)
    now = int(time.time() * 1000)
    old, recent = now - 2 * HOUR_MS, now - 60_000
    for index in range(2):
        await seed_dead_letters(admin.config, first, [Event(type="order.paid", data={}, id=f"old-{index}")],
                                dead_ms=[old], lanes=LANES)  # fmt: skip
        await seed_dead_letters(admin.config, second, [Event(type="order.paid", data={}, id=f"mate-{index}")],
                                dead_ms=[recent], lanes=LANES)  # fmt: skip
    await seed_dead_letters(admin.config, first, [Event(type="order.paid", data={}, id=f"new-{i}") for i in range(2)],
                            dead_ms=[recent] * 2, lanes=LANES)  # fmt: skip
    await seed_dead_letters(admin.config, second, [Event(type="order.paid", data={}, id="mate-2")],
                            dead_ms=[recent], lanes=LANES)  # fmt: skip
    dlq = names.lane_dlq(admin.config.broker.prefix, 0)
    await wait_depth(admin.config, dlq, 7)
    return admin, first, second, dlq


async def delivered_once(receiver: Receiver, path: str, expected: set[str]) -> None:
    await receiver.wait_for(lambda r: r.ok_ids(path) >= expected, 15)
    await asyncio.sleep(1.0)  # a duplicate would come within this
    assert sorted(r.event_id for r in receiver.received if r.path == path) == sorted(expected)


async def test_recover_and_replay_take_one_lane_endpoints_letters_and_leave_its_mates_in_order(
    start_admin: Start, management: ManagementClient, tmp_path: Path
) -> None:
    async with Receiver() as receiver:
        admin, first, second, dlq = await deployment(start_admin, receiver)
        assert await peek_ids(admin.config, dlq) == ["old-0", "mate-0", "old-1", "mate-1", "new-0", "new-1", "mate-2"]
        async with Worker(admin.config):
            # When the platform recovers what failed for the first endpoint in the last hour
            recovered = await admin.call("POST", f"/v1/endpoints/{first}/recover?since=1h")
            # Then its two recent letters were sent back and delivered once each, and the answer counts its own
            # letters only (four of the lane DLQ's seven)
            assert recovered.status == 200, recovered.body
            body = recovered.body
            assert (body["name"], body["recovered"], body["dlq_depth"], body["scanned"]) == (first, 2, 4, 7)
            await delivered_once(receiver, f"/hook/{first}", {"new-0", "new-1"})
            # And the mate's letters stay, in order, among the first's older ones
            assert await peek_ids(admin.config, dlq) == ["old-0", "mate-0", "old-1", "mate-1", "mate-2"]
            # When chosen events are replayed for the first endpoint, one of them the mate's
            replayed = await admin.call("POST", f"/v1/endpoints/{first}/replay", {"event_ids": ["old-1", "mate-0"]})
            # Then only its own letter moved
            assert replayed.status == 200, replayed.body
            assert (replayed.body["replayed"], replayed.body["dlq_depth"]) == (1, 2)
            await delivered_once(receiver, f"/hook/{first}", {"new-0", "new-1", "old-1"})
            assert await peek_ids(admin.config, dlq) == ["old-0", "mate-0", "mate-1", "mate-2"]
            # When the CLI recovers the mate's: its three come back, the first's last letter stays
            path = str(write_config(tmp_path, admin.config))
            result = await warren("endpoint", "recover", second, "--since", "1h", "--config", path)
            assert result.code == 0, result.err
            assert "recovered 3 dead letter(s)" in result.out and "0 left in its DLQ" in result.out, result.out
            await delivered_once(receiver, f"/hook/{second}", {"mate-0", "mate-1", "mate-2"})
        assert await peek_ids(admin.config, dlq) == ["old-0"]
    # And the reads spent nothing: the lane's DLQ has Warren's delivery limit (none on 3.10, 2^31-1 on 4.x)
    assert await delivery_limit(management, dlq) in (None, DELIVERY_LIMIT)
