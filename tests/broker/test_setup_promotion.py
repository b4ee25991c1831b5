"""A file endpoint moved from ``home = "lane"`` to ``home = "dedicated"`` and applied with ``warren setup`` fences the
routing stage as the admin API's promotion does (warren/broker/promotion_fence.py): an event published before its
bindings and still in a route partition is routed to its lane before setup returns, so workers started with the new
file (whose routers route past the endpoint) never see it; with no router confirming, setup refuses and undoes the
endpoint's queues."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from tests.broker.test_lanes_live import publish
from tests.conftest import TEST_SECRET, TEST_STORE_KEY
from tests.support.cli import warren
from tests.support.dead_letters import wait_depth
from tests.support.rabbit import RabbitServer
from tests.support.receiver import Receiver, Reply
from warren.broker.applier import apply_setup
from warren.broker.events import Event
from warren.broker.live_apply import RoutingUnconfirmed
from warren.broker.management import ManagementClient
from warren.consumers import lane_router
from warren.consumers.worker import Worker
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(90)

LANES = {"count": 1, "route_partitions": 2, "inline": True, "promote_wait": "20s"}


def toml(sections: dict[str, dict[str, Any]]) -> str:
    """A configuration file's text: each section's values written as JSON, which TOML reads the same."""
    return "".join(
        f"{header}\n" + "".join(f"{k} = {orjson.dumps(v).decode()}\n" for k, v in fields.items()) + "\n"
        for header, fields in sections.items()
    )


def configs(make_config: Callable[..., WarrenConfig], receiver: Receiver, **lanes: Any) -> tuple[WarrenConfig, ...]:
    """The file before (``rising`` on a lane) and after (on queues of its own)."""
    found = {"name": "rising", "url": f"{receiver.url}/rising", "events": ["order.*"], "timeout": "60s"}
    return tuple(
        make_config([{**found, "home": home}], lanes={**LANES, **lanes}, delivery={"grace_period": "1s"})
        for home in ("lane", "dedicated")
    )


async def test_setup_moving_a_file_endpoint_off_its_lane_waits_for_the_router_holding_its_events(
    make_config: Callable[..., WarrenConfig], monkeypatch: pytest.MonkeyPatch, prefix: str
) -> None:
    release, cut, requests = asyncio.Event(), asyncio.Event(), []

    async def answer(_: Receiver, __: web.Request, body: bytes) -> Reply:
        if release.is_set() or cut.is_set():
            return Reply(200)
        requests.append(body)
        # Every first attempt (inline, in the router) hangs until the fence reaches the router; one cut off by the
        # worker's stop instead is answered 503 (its worker has gone: no delivery)
        await asyncio.wait([asyncio.ensure_future(e.wait()) for e in (release, cut)], return_when="FIRST_COMPLETED")
        return Reply(200 if release.is_set() else 503)

    real = lane_router.answer_fence

    async def taken(*args: Any) -> None:
        release.set()  # the router holds the fence: the events ahead of it may now be delivered, and routed
        await real(*args)

    monkeypatch.setattr(lane_router, "answer_fence", taken)
    async with Receiver(answer) as receiver:
        try:
            # Given a file lane endpoint and a router of that file holding events for it, unrouted (inline attempts)
            on_lane, dedicated = configs(make_config, receiver)
            await apply_setup(on_lane)
            before = [Event(type="order.paid", data={"n": i}, key=f"k{i}") for i in range(4)]
            async with Worker(on_lane):
                await publish(on_lane, before)
                await receiver.wait_for(lambda _: len(requests) >= len(before), 15)
                # When the file moves it to queues of its own and `warren setup` applies that
                report = await asyncio.wait_for(apply_setup(dedicated), 30)
                assert report.applied
            # and the workers are restarted with the new file
            cut.set()
            async with Worker(dedicated):
                after = [Event(type="order.paid", data={"n": i}) for i in range(4, 8)]
                await publish(dedicated, after)
                # Then every event reaches it: the ones the router held were routed to its lane before setup
                # returned (without the fence, the new file's router took them back and routed them to nobody)
                wanted = {e.id for e in [*before, *after]}
                await receiver.wait_for(lambda r: r.ok_ids("/hook/rising") >= wanted, 20)
            for i in range(2):
                assert await wait_depth(dedicated, names.route_partition(prefix, i), 0) == 0
        finally:
            cut.set()


async def test_setup_moving_a_file_endpoint_off_its_lane_with_no_router_running_is_refused_and_undone(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, prefix: str
) -> None:
    async with Receiver() as receiver:
        # Given a file lane endpoint with events waiting for it in the route partitions, and no worker running
        on_lane, dedicated = configs(make_config, receiver, promote_wait="300ms")
        await apply_setup(on_lane)
        before = [Event(type="order.paid", data={"n": i}, key=f"k{i}") for i in range(6)]
        await publish(on_lane, before)
        # When setup applies the file that moves it to queues of its own
        with pytest.raises(RoutingUnconfirmed) as refused:
            await apply_setup(dedicated)
        # Then it is refused, saying why and what to do, and its queues are undone
        assert "run `warren setup` again" in str(refused.value) and "'rising' not promoted" in str(refused.value)
        assert sorted(refused.value.missing) == [names.route_partition(prefix, i) for i in range(2)]
        assert await management.queue(names.work_queue(prefix, "rising")) is None
        assert await management.exchange(names.endpoint_exchange(prefix, "rising")) is None
        # and once the workers of the old file have routed what waited, setup again succeeds and nothing is lost
        async with Worker(on_lane):
            await receiver.wait_for(lambda r: r.ok_ids("/hook/rising") >= {e.id for e in before}, 15)
            assert (await apply_setup(dedicated)).applied
        async with Worker(dedicated):
            after = [Event(type="order.paid", data={"n": i}) for i in range(6, 9)]
            await publish(dedicated, after)
            wanted = {e.id for e in [*before, *after]}
            await receiver.wait_for(lambda r: r.ok_ids("/hook/rising") >= wanted, 15)


async def test_the_cli_refuses_an_unconfirmed_move_with_one_message_and_exit_1(
    make_config: Callable[..., WarrenConfig], tmp_path: Path, amqp_url: str, rabbit_server: RabbitServer, prefix: str
) -> None:
    # Given a file lane endpoint with an event waiting in the route partitions and no worker routing
    async with Receiver() as receiver:
        on_lane, _ = configs(make_config, receiver)
        await apply_setup(on_lane)
        await publish(on_lane, [Event(type="order.paid", data={"n": 1})])
        # When `warren setup` runs with the file that moves it to queues of its own
        path = tmp_path / "warren.toml"
        path.write_text(
            toml(
                {
                    "[broker]": {"url": amqp_url, "management_url": rabbit_server.management_url, "prefix": prefix},
                    "[lanes]": {"count": 1, "route_partitions": 2, "promote_wait": "300ms"},
                    "[delivery]": {"allow_private_networks": True},
                    "[store]": {"keys": [TEST_STORE_KEY]},
                    "[[endpoints]]": {
                        "name": "rising",
                        "url": f"{receiver.url}/rising",
                        "secret": TEST_SECRET,
                        "events": ["order.*"],
                        "home": "dedicated",
                    },
                }
            )
        )
        run = await warren("setup", "--config", str(path))
    # Then it exits 1 with one message saying why and what to do, no traceback
    assert run.code == 1, run.out + run.err
    assert "Traceback" not in run.out + run.err
    assert "endpoint 'rising' not promoted, still on its lane" in run.err
    assert "run `warren setup` again once workers are routing" in " ".join(run.err.split())
