"""Payload filters through the admin API: checked at create and update (a 422 naming the place, nothing applied),
shown in the endpoint's view, changed and removed (docs/endpoints.md, "Payload filters")."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from tests.api.admin.conftest import AdminServer

Start = Callable[..., Awaitable[AdminServer]]

pytestmark = pytest.mark.timeout(30)

BIG_EU = {"amount": {"$gt": 1000}, "region": "eu"}


def spec(name: str, **fields: object) -> dict[str, object]:
    return {"name": name, "url": "http://127.0.0.1:9/hook", "events": ["order.*"], **fields}


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ({"amount": {"$gt": True}}, "filter: amount.$gt: takes a number or a string, not a boolean"),
        ({"$or": [{"region": "eu"}, {"customer": {"tier": {"$ne": "x"}}}]}, "filter: $or[1].customer.tier.$ne:"),
        ({"region": {"$in": "eu"}}, "filter: region.$in: takes a list"),
        ({"a..b": 1}, "filter: a..b: a path is names joined by single dots"),
    ],
)
async def test_a_bad_filter_is_a_422_naming_its_place_and_nothing_is_applied(
    start_admin: Start, bad: object, says: str
) -> None:
    admin = await start_admin()
    refused = await admin.call("POST", "/v1/endpoints", spec("big", filter=bad))
    assert (refused.status, refused.body["error"]) == (422, "invalid_endpoint"), refused.body
    assert refused.body["message"].startswith(says), refused.body["message"]
    assert refused.body["fields"][0]["field"] == "filter"
    assert admin.applier.applied == []
    assert (await admin.call("GET", "/v1/endpoints/big")).status == 404


async def test_a_filter_that_is_not_an_object_is_refused_by_the_schema(start_admin: Start) -> None:
    admin = await start_admin()
    for bad in ("region = eu", [{"region": "eu"}], 3):
        refused = await admin.call("POST", "/v1/endpoints", spec("big", filter=bad))
        assert refused.status == 422 and refused.body["fields"][0]["field"].startswith("filter"), refused.body
    assert admin.applier.applied == []


async def test_a_filter_is_applied_shown_changed_and_removed(start_admin: Start) -> None:
    # Given an endpoint created with a filter
    admin = await start_admin()
    created = await admin.call("POST", "/v1/endpoints", spec("big", filter=BIG_EU))
    assert created.status == 201, created.body
    # Then workers are told of it (the applier), and its view shows it as given
    [applied] = admin.applier.applied
    assert applied.filter is not None and applied.filter.matches({"amount": 1001, "region": "eu"})
    assert created.body["options"]["filter"] == BIG_EU
    assert (await admin.call("GET", "/v1/endpoints/big")).body["options"]["filter"] == BIG_EU
    listed = await admin.call("GET", "/v1/endpoints")
    assert listed.body["data"][0]["options"]["filter"] == BIG_EU
    # When a bad filter is patched in, it is refused and the one it has stays
    refused = await admin.call("PATCH", "/v1/endpoints/big", {"filter": {"amount": {"$gt": [1]}}})
    assert (refused.status, refused.body["message"]) == (
        422,
        "filter: amount.$gt: takes a number or a string, not a list",
    )
    assert (await admin.call("GET", "/v1/endpoints/big")).body["options"]["filter"] == BIG_EU
    # When another filter is patched in, it replaces it (the rest of the endpoint unchanged)
    changed = await admin.call("PATCH", "/v1/endpoints/big", {"filter": {"region": {"$in": ["eu", "uk"]}}})
    assert changed.status == 200 and changed.body["options"]["filter"] == {"region": {"$in": ["eu", "uk"]}}
    assert admin.applier.applied[-1].filter is not None
    assert admin.applier.applied[-1].filter.matches({"region": "uk"})
    assert admin.applier.applied[-1].events == ("order.*",)
    # When it is patched to null, the endpoint takes every event of its subscription again
    removed = await admin.call("PATCH", "/v1/endpoints/big", {"filter": None})
    assert removed.status == 200 and "filter" not in removed.body["options"], removed.body
    assert admin.applier.applied[-1].filter is None
    # And an empty object is no filter either
    emptied = await admin.call("PATCH", "/v1/endpoints/big", {"filter": {}})
    assert emptied.status == 200 and not emptied.body["options"].get("filter")
    assert admin.applier.applied[-1].filter is None
