"""``warren dlq`` on a lane endpoint: its letters picked out of its lane's shared DLQ, never another's."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aio_pika
import pytest

from tests.support.cli import warren
from tests.support.dead_letters import drain, wait_depth
from tests.support.processes import write_config
from tests.support.topology import declare
from warren.broker import wire
from warren.broker.events import Event, encode_event
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(90)

LANES = 2


def mates(count: int) -> list[str]:
    """``count`` endpoint names on lane 0."""
    found, n = [], 0
    while len(found) < count:
        if names.lane_of(f"ep-{n}", LANES) == 0:
            found.append(f"ep-{n}")
        n += 1
    return found


async def seed(config: WarrenConfig, letters: list[tuple[str, Event]]) -> None:
    """Dead letters in lane 0's DLQ, each naming its endpoint, as the worker writes them."""
    connection = await aio_pika.connect(config.broker.url)
    try:
        channel = await connection.channel()
        for endpoint, event in letters:
            message = encode_event(event)
            message.headers = {**message.headers, wire.H_ENDPOINT: endpoint, wire.H_DEAD_REASON: "HTTP 400"}
            await channel.default_exchange.publish(message, routing_key=names.lane_dlq(config.broker.prefix, 0))
    finally:
        await connection.close()


async def deployment(make_config: Callable[..., Any], tmp_path: Path) -> tuple[WarrenConfig, str, str, str]:
    """Two lane endpoints on lane 0, declared; the configuration, its file, and the two names."""
    first, second = mates(2)
    url = "http://127.0.0.1:9/in"
    config = make_config(
        [{"name": n, "url": url, "events": ["#"], "home": "lane"} for n in (first, second)], lanes={"count": LANES}
    )
    await declare(config)
    return config, str(write_config(tmp_path, config)), first, second


async def test_list_replay_and_purge_touch_one_lane_endpoints_letters_only(
    make_config: Callable[..., Any], tmp_path: Path
) -> None:
    # Given two lane endpoints on one lane, each with 3 letters in the lane's DLQ, interleaved
    config, path, first, second = await deployment(make_config, tmp_path)
    mine = [Event(type="order.paid", data={"n": i}) for i in range(3)]
    theirs = [Event(type="order.paid", data={"n": i}) for i in range(3)]
    await seed(config, [pair for i in range(3) for pair in ((first, mine[i]), (second, theirs[i]))])
    prefix = config.broker.prefix
    dlq, lane = names.lane_dlq(prefix, 0), names.lane_queue(prefix, 0)
    await wait_depth(config, dlq, 6)
    # When listed: the first endpoint's letters alone
    listed = await warren("dlq", "list", first, "--config", path, "--json")
    assert listed.code == 0, listed.err
    assert [letter["event_id"] for letter in json.loads(listed.out)] == [e.id for e in mine]
    # and one of the other endpoint's is not "shown" for the first
    shown = await warren("dlq", "show", first, theirs[0].id, "--config", path)
    assert shown.code != 0 and "no dead letter" in shown.err
    # When the first endpoint's letters are replayed: they go back to the lane, the others stay, in order
    replayed = await warren("dlq", "replay", first, "--config", path)
    assert replayed.code == 0, replayed.err
    back = await drain(config, lane)
    assert [m.message_id for m in back] == [e.id for e in mine]
    assert all(wire.header_text(m.headers[wire.H_ENDPOINT]) == first and wire.H_REPLAYED in m.headers for m in back)
    # When the second endpoint's letters are purged, then the DLQ is empty (the first's left by the replay)
    await wait_depth(config, dlq, 3)
    purged = await warren("dlq", "purge", second, "--config", path, "--yes")
    assert purged.code == 0, purged.err
    assert "purged 3 dead letter(s)" in purged.out
    assert await wait_depth(config, dlq, 0) == 0


async def test_purging_one_lane_endpoint_keeps_its_lane_mates_letters(
    make_config: Callable[..., Any], tmp_path: Path
) -> None:
    # Given a letter of one lane endpoint among four of its lane-mate's
    config, path, first, second = await deployment(make_config, tmp_path)
    theirs = [Event(type="order.paid", data={"n": i}) for i in range(4)]
    await seed(config, [(first, Event(type="order.paid", data={})), *((second, e) for e in theirs)])
    dlq = names.lane_dlq(config.broker.prefix, 0)
    await wait_depth(config, dlq, 5)
    # When the first is purged, then the mate's four are left, in order
    purged = await warren("dlq", "purge", first, "--config", path, "--yes")
    assert purged.code == 0, purged.err
    left = await drain(config, dlq)
    assert [m.message_id for m in left] == [e.id for e in theirs]
