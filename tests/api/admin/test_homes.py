"""An endpoint's home through the admin API and `warren endpoint`: a create that names none gets the deployment's
default (a lane while lanes are on, configurable; dedicated when they are off), the answer and GET show it, and an
update keeps it (another home is refused: moving is not built)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.api.admin.conftest import AdminServer
from tests.conftest import TEST_STORE_KEY
from tests.support.cli import warren
from tests.support.processes import write_config
from warren.api.admin.homes import home_kept, with_home
from warren.api.ingest.errors import ApiError
from warren.topology.settings import LaneSettings

Start = Callable[..., Awaitable[AdminServer]]

pytestmark = pytest.mark.timeout(60)


def spec(name: str, **fields: object) -> dict[str, object]:
    return {"name": name, "url": "http://127.0.0.1:9/hook", "events": ["order.*"], **fields}


def test_the_default_home_follows_the_lanes_and_an_update_never_moves_an_endpoint() -> None:
    on, off, dedicated = LaneSettings(count=4), LaneSettings(), LaneSettings(count=4, api_default_home="dedicated")
    assert [with_home({}, lanes)["home"] for lanes in (on, off, dedicated)] == ["lane", "dedicated", "dedicated"]
    assert with_home({"ordering": "key"}, on)["home"] == "dedicated"  # ordered lane endpoints are not built
    assert with_home({"home": "dedicated"}, on)["home"] == "dedicated"
    # An update that leaves home out keeps it, null is the default a create would get, another home is refused
    assert home_kept("a", "lane", {}, {}, on) == "lane"
    assert home_kept("a", "dedicated", {"url": "x"}, {}, on) == "dedicated"
    assert home_kept("a", "lane", {"home": None}, {}, on) == "lane"
    for current, changes in (
        ("lane", {"home": "dedicated"}),
        ("lane", {"home": None}),
        ("dedicated", {"home": "lane"}),
    ):
        lanes = off if changes["home"] is None else on
        with pytest.raises(ApiError, match="is not built yet") as refused:
            home_kept("a", current, changes, {}, lanes)
        assert (refused.value.status, refused.value.code) == (409, "refused")


async def test_with_lanes_on_an_endpoint_created_without_a_home_is_a_lane_endpoint(start_admin: Start) -> None:
    # Given the admin API of a deployment with lanes
    admin = await start_admin(lanes={"count": 2})
    # When an endpoint is created without a home, one with "dedicated", and an ordered one
    plain = await admin.call("POST", "/v1/endpoints", spec("tail"))
    own = await admin.call("POST", "/v1/endpoints", spec("busy", home="dedicated"))
    ordered = await admin.call("POST", "/v1/endpoints", spec("ledger", ordering="key"))
    assert (plain.status, own.status, ordered.status) == (201, 201, 201), (plain.body, own.body, ordered.body)
    # Then the first lives on a lane, the others on queues of their own: applied so, answered so, read so
    assert [e.home for e in admin.applier.applied] == ["lane", "dedicated", "dedicated"]
    assert [r.body["home"] for r in (plain, own, ordered)] == ["lane", "dedicated", "dedicated"]
    read = await admin.call("GET", "/v1/endpoints/tail")
    assert (read.body["home"], read.body["options"]["home"]) == ("lane", "lane")
    listed = await admin.call("GET", "/v1/endpoints")
    assert {e["name"]: e["home"] for e in listed.body["data"]} == {
        "tail": "lane",
        "busy": "dedicated",
        "ledger": "dedicated",
    }
    # When updated without a home, it stays where it is
    updated = await admin.call("PATCH", "/v1/endpoints/tail", {"url": "http://127.0.0.1:9/v2"})
    assert (updated.status, updated.body["home"], admin.applier.applied[-1].home) == (200, "lane", "lane")
    # And a change of home is refused before anything is applied
    applied = len(admin.applier.applied)
    moved = await admin.call("PATCH", "/v1/endpoints/busy", {"home": "lane"})
    assert (moved.status, moved.body["error"]) == (409, "refused") and "not built yet" in moved.body["message"]
    assert len(admin.applier.applied) == applied
    assert (await admin.call("GET", "/v1/endpoints/busy")).body["home"] == "dedicated"


async def test_the_default_home_is_configurable_and_dedicated_without_lanes(start_admin: Start) -> None:
    chosen = await start_admin(lanes={"count": 2, "api_default_home": "dedicated"})
    without = await start_admin()
    for admin, name in ((chosen, "chosen"), (without, "without")):  # one store: a name each
        created = await admin.call("POST", "/v1/endpoints", spec(name))
        assert (created.status, created.body["home"]) == (201, "dedicated"), created.body
        assert admin.applier.applied[-1].home == "dedicated"


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
    moved = await warren("endpoint", "update", "tail", "--home", "dedicated", "--config", path)
    assert moved.code != 0 and "not built yet" in moved.err, (moved.out, moved.err)
    assert (await admin.call("GET", "/v1/endpoints/tail")).body["home"] == "lane"
