"""Recover (``POST /v1/endpoints/{name}/recover?since=...`` and ``warren endpoint recover``) on real RabbitMQ:
only the letters dead at or after ``since`` come back, each delivered once; the older ones stay in the DLQ."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.api.admin.conftest import AdminServer
from tests.support.cli import warren
from tests.support.dead_letters import peek_ids, seed_dead_letters, wait_depth
from tests.support.processes import write_config
from tests.support.receiver import Receiver
from tests.support.topology import declare
from warren.broker.events import Event
from warren.consumers.worker import Worker
from warren.topology import names

Start = Callable[..., Awaitable[AdminServer]]

pytestmark = [pytest.mark.timeout(60), pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)]

HOUR_MS = 3_600_000


async def seeded(start_admin: Start, receiver: Receiver) -> tuple[AdminServer, int]:
    """An API over a file endpoint `shop` whose DLQ holds old-0..2 (dead 2 h ago) then new-0..2 (dead 1 min ago)."""
    admin = await start_admin([{"name": "shop", "url": receiver.url, "events": ["#"]}])
    await declare(admin.config)
    now = int(time.time() * 1000)
    events = [Event(type="order.paid", data={}, id=f"{age}-{i}") for age in ("old", "new") for i in range(3)]
    await seed_dead_letters(admin.config, "shop", events, dead_ms=[now - 2 * HOUR_MS] * 3 + [now - 60_000] * 3)
    await wait_depth(admin.config, names.dlq(admin.config.broker.prefix, "shop"), 6)
    return admin, now - HOUR_MS  # since: an hour ago, between the two


async def delivered_once(receiver: Receiver, expected: set[str]) -> None:
    await receiver.wait_for(lambda r: r.ok_ids() >= expected, 15)
    await asyncio.sleep(1.0)  # a duplicate would come within this
    assert sorted(r.event_id for r in receiver.received) == sorted(expected)


async def test_recover_replays_only_what_died_since_and_each_is_delivered_once(start_admin: Start) -> None:
    async with Receiver() as receiver:
        admin, since_ms = await seeded(start_admin, receiver)
        since = datetime.fromtimestamp(since_ms / 1000, UTC).isoformat().replace("+00:00", "Z")
        async with Worker(admin.config):
            # When the platform recovers what failed in the last hour
            reply = await admin.call("POST", f"/v1/endpoints/shop/recover?since={since}")
            # Then the three later letters were sent back and delivered once each; the older stay dead
            assert reply.status == 200, reply.body
            assert (reply.body["recovered"], reply.body["dlq_depth"], reply.body["name"]) == (3, 6, "shop")
            await delivered_once(receiver, {"new-0", "new-1", "new-2"})
        dlq = names.dlq(admin.config.broker.prefix, "shop")
        assert sorted(await peek_ids(admin.config, dlq)) == ["old-0", "old-1", "old-2"]


async def test_recover_answers_what_it_cannot_do(start_admin: Start) -> None:
    async with Receiver() as receiver:
        admin, _ = await seeded(start_admin, receiver)
        missing = await admin.call("POST", "/v1/endpoints/nobody/recover?since=1h")
        no_since = await admin.call("POST", "/v1/endpoints/shop/recover")
        bad_since = await admin.call("POST", "/v1/endpoints/shop/recover?since=yesterday")
        anonymous = await admin.call("POST", "/v1/endpoints/shop/recover?since=1h", token=None)
    assert (missing.status, missing.body["error"]) == (404, "not_found")
    assert (no_since.status, bad_since.status) == (422, 422) and "since" in bad_since.body["message"]
    assert anonymous.status == 401
    assert len(await peek_ids(admin.config, names.dlq(admin.config.broker.prefix, "shop"))) == 6


async def test_the_cli_recovers_the_same_way(start_admin: Start, tmp_path: Path) -> None:
    async with Receiver() as receiver:
        admin, _ = await seeded(start_admin, receiver)
        path = write_config(tmp_path, admin.config)
        async with Worker(admin.config):
            result = await warren("endpoint", "recover", "shop", "--since", "1h", "--config", str(path))
            assert result.code == 0, result.err
            assert "recovered 3 dead letter(s)" in result.out and "3 left in its DLQ" in result.out
            await delivered_once(receiver, {"new-0", "new-1", "new-2"})


async def test_a_since_no_date_holds_is_refused_before_anything_moves(start_admin: Start, tmp_path: Path) -> None:
    # Given six dead letters, and a `since` before year 1 (999999999 days ago; year 0 once in UTC): the recovery
    # ran, moving all six, and then writing the moment back raised ValueError (a 500; a traceback at the CLI)
    async with Receiver() as receiver:
        admin, _ = await seeded(start_admin, receiver)
        path = write_config(tmp_path, admin.config)
        for since in ("999999999d", "0001-01-01T00:00:00%2B01:00"):
            reply = await admin.call("POST", f"/v1/endpoints/shop/recover?since={since}")
            assert (reply.status, reply.body["error"]) == (422, "invalid_request"), reply.body
            assert "since" in reply.body["message"]
        result = await warren("endpoint", "recover", "shop", "--since", "999999999d", "--config", str(path))
        assert result.code == 2 and "--since" in result.err and "Traceback" not in result.err, result.err
    # Then nothing was recovered
    assert len(await peek_ids(admin.config, names.dlq(admin.config.broker.prefix, "shop"))) == 6
