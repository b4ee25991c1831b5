"""An endpoint's home through the admin API and `warren endpoint`: a create that names none gets the deployment's
default (a lane while lanes are on, configurable; dedicated when they are off), the answer and GET show it, and an
update keeps it unless it names another (a move; an ordered endpoint's, not with its ordering changed at once)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.api.admin.conftest import ADMIN_TOKEN, AdminServer
from tests.api.ingest.conftest import TOKEN, ApiServer
from tests.broker.test_lanes_live import publish
from tests.conftest import TEST_STORE_KEY
from tests.support.cli import warren
from tests.support.health import wait_until
from tests.support.processes import write_config
from tests.support.receiver import Receiver
from tests.support.setup_helpers import prefix_state
from warren.api.admin.homes import home_after_update, ordered_move, with_home
from warren.broker.events import Event
from warren.broker.management import ManagementClient
from warren.consumers.worker import Worker
from warren.topology.config import WarrenConfig
from warren.topology.settings import LaneSettings

Start = Callable[..., Awaitable[AdminServer]]

pytestmark = pytest.mark.timeout(60)


def spec(name: str, **fields: object) -> dict[str, object]:
    return {"name": name, "url": "http://127.0.0.1:9/hook", "events": ["order.*"], **fields}


def test_the_default_home_follows_the_lanes_and_an_update_keeps_it_unless_asked() -> None:
    on, off, dedicated = LaneSettings(count=4), LaneSettings(), LaneSettings(count=4, api_default_home="dedicated")
    assert [with_home({}, lanes)["home"] for lanes in (on, off, dedicated)] == ["lane", "dedicated", "dedicated"]
    assert with_home({"ordering": "key"}, on)["home"] == "lane"  # ordered ones too: the ordered lanes
    assert with_home({"ordering": "key"}, off)["home"] == "dedicated"
    assert with_home({"home": "dedicated"}, on)["home"] == "dedicated"
    # An update that leaves home out keeps it; null asks for the default a create would get
    assert home_after_update("lane", {}, {}, on) == "lane"
    assert home_after_update("dedicated", {"url": "x"}, {}, on) == "dedicated"
    assert home_after_update("lane", {"home": None}, {}, off) == "dedicated"
    assert home_after_update("lane", {"home": None}, {"ordering": "key"}, on) == "lane"
    assert home_after_update("dedicated", {"home": "lane"}, {}, on) == "lane"


def test_an_ordered_endpoint_moves_either_way_only_with_its_ordering_unchanged() -> None:
    ledger = {"name": "ledger", "ordering": "key"}
    assert ordered_move("dedicated", "key", {**ledger, "home": "lane"}) is None
    assert ordered_move("lane", "key", {**ledger, "home": "lane"}) is None
    assert ordered_move("lane", "key", {**ledger, "home": "dedicated"}) is None
    assert "at once" in (ordered_move("lane", "key", {"name": "ledger", "home": "dedicated"}) or "")
    assert "at once" in (ordered_move("dedicated", "none", {**ledger, "home": "lane"}) or "")
    assert "at once" in (ordered_move("dedicated", "key", {"name": "ledger", "home": "lane"}) or "")
    assert ordered_move("dedicated", "none", {"name": "tail", "home": "lane"}) is None


async def test_with_lanes_on_an_endpoint_created_without_a_home_is_a_lane_endpoint(start_admin: Start) -> None:
    # Given the admin API of a deployment with lanes
    admin = await start_admin(lanes={"count": 2})
    # When an endpoint is created without a home, one with "dedicated", and an ordered one
    plain = await admin.call("POST", "/v1/endpoints", spec("tail"))
    own = await admin.call("POST", "/v1/endpoints", spec("busy", home="dedicated"))
    ordered = await admin.call("POST", "/v1/endpoints", spec("ledger", ordering="key"))
    assert (plain.status, own.status, ordered.status) == (201, 201, 201), (plain.body, own.body, ordered.body)
    # Then the first and the ordered one live on lanes, the other on queues of its own: applied so, answered so,
    # read so
    assert [e.home for e in admin.applier.applied] == ["lane", "dedicated", "lane"]
    assert [r.body["home"] for r in (plain, own, ordered)] == ["lane", "dedicated", "lane"]
    read = await admin.call("GET", "/v1/endpoints/tail")
    assert (read.body["home"], read.body["options"]["home"]) == ("lane", "lane")
    listed = await admin.call("GET", "/v1/endpoints")
    assert {e["name"]: e["home"] for e in listed.body["data"]} == {
        "tail": "lane",
        "busy": "dedicated",
        "ledger": "lane",
    }
    # When updated without a home, it stays where it is
    updated = await admin.call("PATCH", "/v1/endpoints/tail", {"url": "http://127.0.0.1:9/v2"})
    assert (updated.status, updated.body["home"], admin.applier.applied[-1].home) == (200, "lane", "lane")
    # And null asks for the default, which it has
    again = await admin.call("PATCH", "/v1/endpoints/tail", {"home": None})
    assert (again.status, again.body["home"], admin.applier.applied[-1].home) == (200, "lane", "lane")


async def test_a_promotion_the_routing_stage_did_not_confirm_is_a_503_and_changes_nothing(start_admin: Start) -> None:
    # Given a lane endpoint
    admin = await start_admin(lanes={"count": 2})
    created = await admin.call("POST", "/v1/endpoints", spec("rising"))
    assert (created.status, created.body["home"]) == (201, "lane"), created.body
    # When it is promoted and the routing stage does not confirm in time
    admin.applier.unconfirmed = 1
    refused = await admin.call("PATCH", "/v1/endpoints/rising", {"home": "dedicated"})
    # Then the answer says so, to be tried again, and the endpoint stays a lane endpoint
    assert (refused.status, refused.body["error"]) == (503, "routing_unconfirmed"), refused.body
    assert "apply it again" in refused.body["message"]
    assert (await admin.call("GET", "/v1/endpoints/rising")).body["home"] == "lane"
    # And asked again once routers confirm, it moves; only a move from a lane was applied as a promotion
    moved = await admin.call("PATCH", "/v1/endpoints/rising", {"home": "dedicated"})
    assert (moved.status, moved.body["home"]) == (200, "dedicated"), moved.body
    touched = await admin.call("PATCH", "/v1/endpoints/rising", {"url": "http://127.0.0.1:9/v2"})
    assert touched.status == 200
    assert admin.applier.promotions == [False, True, True, False]


async def test_an_ordered_lane_endpoint_is_promoted_but_not_while_its_ordering_changes(start_admin: Start) -> None:
    # Given an ordered lane endpoint
    admin = await start_admin(lanes={"count": 2})
    created = await admin.call("POST", "/v1/endpoints", spec("ledger", ordering="key"))
    assert (created.status, created.body["home"]) == (201, "lane"), created.body
    # When it is asked onto queues of its own with its ordering changed at once: refused, it stays
    both = await admin.call("PATCH", "/v1/endpoints/ledger", {"home": "dedicated", "ordering": "none"})
    assert (both.status, both.body["error"]) == (409, "refused"), both.body
    assert "at once" in both.body["message"]
    assert (await admin.call("GET", "/v1/endpoints/ledger")).body["home"] == "lane"
    # Then asked with its ordering kept, it moves, applied as a promotion (warren/broker/ordered_promotion.py)
    moved = await admin.call("PATCH", "/v1/endpoints/ledger", {"home": "dedicated"})
    assert (moved.status, moved.body["home"]) == (200, "dedicated"), moved.body
    assert admin.applier.promotions[-1] is True
    assert admin.applier.applied[-1].ordering == "key"


async def test_the_default_home_is_configurable_and_dedicated_without_lanes(start_admin: Start) -> None:
    chosen = await start_admin(lanes={"count": 2, "api_default_home": "dedicated"})
    without = await start_admin()
    for admin, name in ((chosen, "chosen"), (without, "without")):  # one store: a name each
        created = await admin.call("POST", "/v1/endpoints", spec(name))
        assert (created.status, created.body["home"]) == (201, "dedicated"), created.body
        assert admin.applier.applied[-1].home == "dedicated"


@pytest.mark.timeout(180)  # six CLI processes: 10 s here, 46 s and over 60 s on a loaded CI machine
async def test_the_cli_creates_on_the_default_home_and_shows_it(start_admin: Start, tmp_path: Path) -> None:
    admin = await start_admin(lanes={"count": 2}, store={"keys": [TEST_STORE_KEY]})  # the CLI seals for workers
    path = str(write_config(tmp_path, admin.config))
    created = await warren(
        "endpoint", "create", "tail", "--url", "http://127.0.0.1:9/t", "-e", "order.*", "--config", path
    )
    assert created.code == 0, created.err
    assert "(home lane)" in created.out
    named = await warren(
        "endpoint", "create", "busy", "--url", "http://127.0.0.1:9/b", "-e", "#", "--home", "dedicated",
        "--config", path, "--json",
    )  # fmt: skip
    assert named.code == 0, named.err
    assert '"home": "dedicated"' in named.out
    # A dedicated endpoint asked onto a lane moves there (demotion, warren/broker/live_demote.py)
    moved = await warren("endpoint", "update", "busy", "--home", "lane", "--config", path)
    assert moved.code == 0, (moved.out, moved.err)
    assert (await admin.call("GET", "/v1/endpoints/busy")).body["home"] == "lane"
    # An ordered one moves onto the ordered lanes (live_demote_ordered.py); back while that move is unfinished (no
    # worker drained it here), or with its ordering changed at once, refused: it stays there
    ordered = await warren(
        "endpoint", "create", "ledger", "--url", "http://127.0.0.1:9/l", "-e", "#", "--ordering", "key",
        "--home", "dedicated", "--config", path,
    )  # fmt: skip
    assert ordered.code == 0, ordered.err
    demoted = await warren("endpoint", "update", "ledger", "--home", "lane", "--config", path)
    assert demoted.code == 0, (demoted.out, demoted.err)
    assert (await admin.call("GET", "/v1/endpoints/ledger")).body["home"] == "lane"
    refused = await warren("endpoint", "update", "ledger", "--home", "dedicated", "--config", path)
    assert refused.code != 0 and "unfinished" in refused.err, refused.err
    both = await warren("endpoint", "update", "ledger", "--home", "dedicated", "--ordering", "none", "--config", path)
    assert both.code != 0 and "at once" in both.err, both.err
    assert (await admin.call("GET", "/v1/endpoints/ledger")).body["home"] == "lane"
    kept = await warren("endpoint", "update", "tail", "--concurrency", "4", "--config", path, "--json")
    assert kept.code == 0 and '"home": "lane"' in kept.out, (kept.out, kept.err)


async def test_an_endpoint_created_without_a_home_owns_nothing_on_the_broker_and_is_served(
    make_config: Callable[..., WarrenConfig],
    start_api: Callable[..., Awaitable[ApiServer]],
    store_url: str,
    management: ManagementClient,
    prefix: str,
) -> None:
    async with Receiver() as receiver:
        # Given `warren api` applying for real, lanes on, and a worker
        config = make_config(
            api={"tokens": [TOKEN], "admin_tokens": [ADMIN_TOKEN]},
            store={"url": store_url, "keys": [TEST_STORE_KEY]},
            lanes={"count": 2},
        )
        api = await start_api(config)
        async with Worker(config) as worker:
            before = await prefix_state(management, prefix)
            # When an endpoint is created without a home
            body = {"name": "tail", "url": f"{receiver.url}/tail", "events": ["order.*"]}
            created = await api.request("POST", "/v1/endpoints", body, token=ADMIN_TOKEN)
            assert (created.status, created.body["home"]) == (201, "lane"), created.body
            # Then the broker holds no queue or binding more, and the endpoint gets its events
            after = await prefix_state(management, prefix)
            # (the API's own follower of the endpoint states, an exclusive server-named queue, aside)
            assert (set(after.queues), _durable(after.bindings)) == (set(before.queues), _durable(before.bindings))
            await wait_until(lambda: worker.lanes is not None and "tail" in worker.lanes.index, 10, "tail served")
            published = await api.request("POST", "/v1/events", {"type": "order.paid", "data": {}}, token=TOKEN)
            assert published.status == 202, published.body
            await receiver.wait_for(lambda r: published.body["id"] in r.ok_ids("/hook/tail"), 10)


def _durable(bindings: set[tuple[str, str, str, str]]) -> set[tuple[str, str, str, str]]:
    """The bindings of Warren's declared objects: not those of a connection's server-named queue (amq.gen-...)."""
    return {b for b in bindings if not b[1].startswith("amq.gen-")}


@pytest.mark.timeout(180)  # CLI processes: slow on a loaded machine
async def test_the_cli_refuses_a_promotion_the_routing_stage_did_not_confirm_and_the_endpoint_stays_on_its_lane(
    start_admin: Start, tmp_path: Path
) -> None:
    # Given a lane endpoint with events waiting for it in the routing stage, and no worker routing
    lanes = {"count": 1, "route_partitions": 1, "promote_wait": "300ms"}
    admin = await start_admin(lanes=lanes, store={"keys": [TEST_STORE_KEY]})
    path = str(write_config(tmp_path, admin.config))  # the API declared the topology
    created = await warren(
        "endpoint", "create", "rising", "--url", "http://127.0.0.1:9/r", "-e", "order.*", "--home", "lane",
        "--config", path,
    )  # fmt: skip
    assert created.code == 0, created.err
    await publish(admin.config, [Event(type="order.paid", data={"n": 1})])
    # When it is asked onto queues of its own
    moved = await warren("endpoint", "update", "rising", "--home", "dedicated", "--config", path)
    # Then the CLI says why it was not, exits non-zero, and the endpoint is still a lane endpoint
    assert moved.code != 0, moved.out
    assert "routing stage did not confirm" in moved.err and "apply it again" in moved.err, moved.err
    assert (await admin.call("GET", "/v1/endpoints/rising")).body["home"] == "lane"
